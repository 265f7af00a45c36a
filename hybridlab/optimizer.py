"""Optimizers (``mx.optimizer``): how a weight moves, given its gradient.

What this module teaches
------------------------
An optimizer is a rule ``w_next = update(w, g, state)`` plus the hyperparameters it reads
(learning rate, momentum, weight decay) and the state it keeps per weight (SGD a momentum,
Adam two moments). Keeping it apart from the :class:`~hybridlab.gluon.Trainer` lets two
places apply the same rule: the Trainer, on each device's weights, and a key-value store
(``kv.set_optimizer``), once per key on the store's copy -- the parameter server's
"update on the server" (hybridlab/kvstore/).

MXNet's interface, which code written for MXNet subclasses (``Optimizer.register``):

* ``create_state(index, weight)`` makes the state of one weight (NDArrays, or None);
* ``update(index, weight, grad, state)`` changes ``weight`` (and ``state``) in place.
  The built-in rules call MXNet's fused update operators (``nd.sgd_mom_update(w, g, mom,
  out=w, ...)``, ``nd.adam_update``: hybridlab/ops/optimizer.py), or write the formula
  with ``nd`` arithmetic where MXNet does (AdaGrad, AdaDelta, Adamax, Nadam, SGLD, LAMB);
* ``multi_precision=True`` keeps a float32 master copy of a float16 weight: the update
  runs on the copy, and the weight gets it rounded (``update_multi_precision``);
* ``_get_lr(index)``/``_get_wd(index)``: the rates times the parameter's multipliers
  (``lr_mult``/``wd_mult`` of a Gluon Parameter, or of a Symbol's variable by name);
  ``_update_count(index)`` counts the steps (Adam's bias correction reads it).

A fast path beside it (NOTE [One op per step]): SGD and Adam also have their rule as one
numpy function (``RULES``), which the Trainer applies to every parameter of a device in
ONE engine op, and a store's server to numpy arrays. A subclass that overrides ``update``,
clipping and multi-precision take MXNet's path instead.

SGD:   ``state = momentum*state - lr*(g + wd*w);  w += state``   (plain: ``w -= lr*(g+wd*w)``)
Adam:  ``m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g;  w -= lr_t * m / (sqrt(v) + eps)``
       with ``lr_t = lr*sqrt(1-b2**t)/(1-b1**t)`` (bias correction),
where ``g`` is the gradient times ``rescale_grad`` (the Trainer sets it to ``1/batch_size``)
and clipped to ``[-clip_gradient, clip_gradient]`` when that is set.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import MutableMapping
from typing import Any, Callable, Iterator

import numpy as np

from hybridlab import engine
from hybridlab import ndarray as nd
from hybridlab.initializer import _number
from hybridlab.ndarray_io import aligned_empty

_nd: Any = nd  # (its operators are generated from the registry: mypy cannot see them)


class Optimizer:
    """The base of every optimizer: hyperparameters, rate multipliers, step counts."""

    opt_registry: dict[str, type] = {}
    name = ""  # the registry name ("sgd"); MXNet's classes register by class name
    hyper_names: tuple[str, ...] = ()  # the subclass's own hyperparameters (attributes)

    def __init__(self, rescale_grad: float = 1.0, param_idx2name: dict | None = None,
                 wd: float = 0.0, clip_gradient: float | None = None,
                 learning_rate: float | None = None, lr_scheduler: Any = None,
                 sym: Any = None, begin_num_update: int = 0, multi_precision: bool = False,
                 param_dict: dict | None = None) -> None:
        self.rescale_grad = self._checked("rescale_grad", rescale_grad)
        self.wd = self._checked("wd", wd)
        self.clip_gradient = None if clip_gradient is None else self._checked(
            "clip_gradient", clip_gradient)
        self.lr_scheduler = lr_scheduler
        if lr_scheduler is not None and learning_rate is not None \
                and lr_scheduler.base_lr != learning_rate:
            warnings.warn("the learning rate of the lr_scheduler is overwritten by the "
                          "optimizer's learning_rate", UserWarning, stacklevel=2)
            lr_scheduler.base_lr = learning_rate
        if learning_rate is None:
            learning_rate = lr_scheduler.base_lr if lr_scheduler is not None else 0.01
        self.lr = self._checked("learning_rate", learning_rate)
        self.begin_num_update = self.num_update = begin_num_update
        self._all_index_update_counts: dict[Any, dict[Any, int]] = {0: {}}
        self._index_update_count = self._all_index_update_counts[0]
        self.multi_precision = multi_precision
        self.idx2name = dict(param_idx2name or {})
        self.sym_info = (sym.attr_dict(), sym.list_arguments()) if sym is not None else ()
        # key -> what has ``lr_mult``/``wd_mult`` (a Parameter; the Trainer fills it)
        self.param_dict: dict[Any, Any] = dict(param_dict or {})
        self.lr_mult: dict[Any, float] = {}
        self.wd_mult: dict[Any, float] = {}
        self.set_lr_mult({})
        self.set_wd_mult({})
        self.states: dict[Any, list[np.ndarray]] = {}  # the fast path's numpy states

    def _checked(self, what: str, value: Any) -> float:
        return check_number(f"{self.name or type(self).__name__.lower()} {what}", value)

    # -- the registry ------------------------------------------------------------------

    @staticmethod
    def register(klass: type) -> type:
        """``@mx.optimizer.register``: make ``create('myopt')`` find ``class MyOpt``."""
        key = klass.__name__.lower()
        if key in Optimizer.opt_registry:
            warnings.warn(f"optimizer {key!r} is registered again: "
                          f"{klass.__module__}.{klass.__name__} replaces "
                          f"{Optimizer.opt_registry[key].__name__}", stacklevel=2)
        Optimizer.opt_registry[key] = klass
        klass.name = key  # type: ignore[attr-defined]
        return klass

    @staticmethod
    def create_optimizer(name: str, **kwargs: Any) -> Optimizer:
        """An optimizer by its (case-insensitive) registered name."""
        found = Optimizer.opt_registry.get(name.lower()) if isinstance(name, str) else None
        if found is None:
            raise ValueError(f"unknown optimizer {name!r}; registered: "
                             f"{sorted(Optimizer.opt_registry)}")
        known = _parameters(found)
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise ValueError(f"{name.lower()}: unknown optimizer parameter(s) {unknown}; "
                             f"known: {sorted(known)}")
        made: Optimizer = found(**kwargs)
        return made

    # -- rates -------------------------------------------------------------------------

    @property
    def learning_rate(self) -> float:
        if self.lr_scheduler is not None:
            return float(self.lr_scheduler(self.num_update))
        return self.lr

    def set_learning_rate(self, lr: float) -> None:
        if self.lr_scheduler is not None:
            raise UserWarning("this optimizer has an lr_scheduler, which sets the learning "
                              "rate; change the scheduler instead of set_learning_rate")
        self.lr = self._checked("learning_rate", lr)

    def set_lr_mult(self, args_lr_mult: dict) -> None:
        """Per-parameter rate multipliers, by name or index (a Symbol's variables give
        theirs, ``__lr_mult__``, when the optimizer was made with ``sym=``)."""
        self.lr_mult = self._symbol_mults("__lr_mult__")
        self.lr_mult.update(args_lr_mult)

    def set_wd_mult(self, args_wd_mult: dict) -> None:
        """As :meth:`set_lr_mult`; a named parameter that is not a ``_weight`` or a
        ``_gamma`` (a bias, BatchNorm's beta) gets no weight decay, as in MXNet."""
        self.wd_mult = {n: 0.0 for n in self.idx2name.values()
                        if not (n.endswith("_weight") or n.endswith("_gamma"))}
        self.wd_mult.update(self._symbol_mults("__wd_mult__"))
        self.wd_mult.update(args_wd_mult)

    def _symbol_mults(self, key: str) -> dict[Any, float]:
        if not self.sym_info:
            return {}
        attrs, names = self.sym_info
        return {n: float(attrs[n][key]) for n in names if key in attrs.get(n, {})}

    def _mult(self, index: Any, kind: str) -> float:
        if index in self.param_dict:
            return float(getattr(self.param_dict[index], kind, 1.0))
        table = self.lr_mult if kind == "lr_mult" else self.wd_mult
        if index in table:
            return table[index]
        return table.get(self.idx2name[index], 1.0) if index in self.idx2name else 1.0

    def _get_lrs(self, indices: list) -> list[float]:
        return [self.learning_rate * self._mult(i, "lr_mult") for i in indices]

    def _get_lr(self, index: Any) -> float:
        return self._get_lrs([index])[0]

    def _get_wds(self, indices: list) -> list[float]:
        return [self.wd * self._mult(i, "wd_mult") for i in indices]

    def _get_wd(self, index: Any) -> float:
        return self._get_wds([index])[0]

    def _set_current_context(self, device_id: Any) -> None:
        """Count each device's steps apart (every device updates its own copy)."""
        self._index_update_count = self._all_index_update_counts.setdefault(device_id, {})

    def _update_count(self, index: Any) -> None:
        for i in index if isinstance(index, (list, tuple)) else [index]:
            count = self._index_update_count.get(i, self.begin_num_update) + 1
            self._index_update_count[i] = count
            self.num_update = max(count, self.num_update)

    @property
    def counts(self) -> dict[Any, int]:
        """The steps taken per key (of the current device)."""
        return self._index_update_count

    @counts.setter
    def counts(self, value: dict[Any, int]) -> None:
        self._index_update_count.clear()
        self._index_update_count.update(value)

    # -- MXNet's interface: states and updates on NDArrays ----------------------------

    def create_state(self, index: Any, weight: Any) -> Any:
        """The state ``update`` keeps for ``weight`` (None: no state)."""
        return None

    def create_state_multi_precision(self, index: Any, weight: Any) -> Any:
        """With ``multi_precision`` and a float16 weight: ``(float32 copy, state of the
        copy)``; otherwise :meth:`create_state`."""
        if self.multi_precision and weight.dtype == np.float16:
            master = weight.astype(np.float32)
            return (master, self.create_state(index, master))
        if weight.dtype == np.float16:
            warnings.warn("updating a float16 weight in float16 loses precision; consider "
                          "the optimizer's multi_precision=True", stacklevel=2)
        return self.create_state(index, weight)

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        """Change ``weight`` (and ``state``) in place, one step with ``grad``."""
        raise NotImplementedError(f"{type(self).__name__} must define update(index, weight, "
                                  f"grad, state)")

    def update_multi_precision(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        if self.multi_precision and weight.dtype == np.float16:
            master, inner = state
            self.update(index, master, grad.astype(np.float32), inner)
            weight[:] = master.astype(weight.dtype)
        else:
            self.update(index, weight, grad, state)

    def _scaled(self, grad: Any) -> Any:
        """``grad * rescale_grad``, clipped when ``clip_gradient`` is set (NDArrays)."""
        grad = grad * self.rescale_grad
        if self.clip_gradient is not None:
            grad = _nd.clip(grad, -self.clip_gradient, self.clip_gradient)
        return grad

    def _op_kwargs(self, index: Any, **extra: Any) -> dict[str, Any]:
        """The step's attributes for MXNet's update operators (``lr``, ``wd``,
        ``rescale_grad``, ``clip_gradient``: -1 for none) -- counting the step."""
        self._update_count(index)
        return {"lr": self._get_lr(index), "wd": self._get_wd(index),
                "rescale_grad": self.rescale_grad,
                "clip_gradient": self.clip_gradient or -1.0, **extra}

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["param_dict"] = {}  # Parameters are not part of an optimizer's state
        return state

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v}" for k, v in self.hyper.items())
        return f"{type(self).__name__}({shown})"

    # -- the fast path: numpy rules (NOTE [One op per step]) ---------------------------

    @property
    def hyper(self) -> _HyperView:
        """The hyperparameters by their constructor names (``learning_rate``, ``wd``, ...),
        read and written through to the attributes."""
        return _HyperView(self)

    def fused_rule(self) -> Callable[..., np.ndarray] | None:
        """The numpy rule for one op per step, when this optimizer is a built-in one used
        as it is (not subclassed in ``update``, no clipping, no master copies)."""
        rule = RULES.get(self.name)
        owner: Any = type(self)._rule_owner()
        if rule is None or type(self).update is not owner.update:
            return None
        return rule if not self.multi_precision else None

    @classmethod
    def _rule_owner(cls) -> type:
        return next((c for c in cls.__mro__ if c.__dict__.get("name") in RULES), Optimizer)

    def step_hyper(self, key: Any) -> dict[str, Any]:
        """``key``'s hyperparameters as they are now: an update that runs later, inside the
        engine, must use the rates of the moment it was asked for."""
        return {**self.hyper, "rescale": self.rescale_grad, "learning_rate": self._get_lr(key),
                "wd": self._get_wd(key)}

    def state(self, key: Any, weight: np.ndarray) -> list[np.ndarray]:
        """The fast path's state arrays of ``key``, made at its first update."""
        if key not in self.states:
            self.states[key] = [np.zeros(weight.shape, weight.dtype)
                                for _ in range(_STATE_COUNT[self.name])]
        return self.states[key]

    def apply(self, key: Any, weight: np.ndarray, grad: np.ndarray,
              hyper: dict[str, Any] | None = None) -> np.ndarray:
        """The next value of ``weight`` (a new numpy array) after one step with ``grad``,
        with ``hyper`` from :meth:`step_hyper` (taken now when not given)."""
        hyper = dict(hyper or self.step_hyper(key))
        self._update_count(key)
        hyper["t"] = self._index_update_count[key]
        return RULES[self.name](weight, grad, self.state(key, weight), **hyper)


class _HyperView(MutableMapping):
    """An optimizer's hyperparameters as a dict (the Trainer and the stores read and set
    them by name); ``learning_rate`` is the attribute ``lr``, as in MXNet."""

    COMMON = ("learning_rate", "wd", "rescale_grad", "clip_gradient")

    def __init__(self, optimizer: Optimizer) -> None:
        self._optimizer = optimizer

    def _keys(self) -> tuple[str, ...]:
        return self.COMMON + type(self._optimizer).hyper_names

    @staticmethod
    def _attr(key: str) -> str:
        return "lr" if key == "learning_rate" else key

    def __getitem__(self, key: str) -> Any:
        if key not in self._keys():
            raise KeyError(key)
        return getattr(self._optimizer, self._attr(key))

    def __setitem__(self, key: str, value: Any) -> None:
        if key not in self._keys():
            raise KeyError(f"{type(self._optimizer).__name__} has no hyperparameter {key!r}; "
                           f"it has {list(self._keys())}")
        setattr(self._optimizer, self._attr(key), value)

    def __delitem__(self, key: str) -> None:
        raise TypeError("an optimizer's hyperparameters cannot be removed")

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())


def _parameters(cls: type) -> set[str]:
    """The keyword arguments an optimizer class takes (its and its bases' constructors)."""
    import inspect
    names: set[str] = set()
    for klass in cls.__mro__:
        if "__init__" in klass.__dict__ and klass is not object:
            init = klass.__dict__["__init__"]
            names |= {p.name for p in inspect.signature(init).parameters.values()
                      if p.kind is p.KEYWORD_ONLY or p.kind is p.POSITIONAL_OR_KEYWORD}
    return names - {"self"}


register = Optimizer.register
create_optimizer = Optimizer.create_optimizer


def create(name: str | Optimizer, **kwargs: Any) -> Optimizer:
    """``mx.optimizer.create('sgd', learning_rate=0.1)``; an Optimizer is returned as it is."""
    if isinstance(name, Optimizer):
        return name
    if not isinstance(name, str):
        raise ValueError(f"unknown optimizer {name!r}: give a name such as 'sgd' or an "
                         f"mx.optimizer object")
    return Optimizer.create_optimizer(name, **kwargs)


def check_number(what: str, value: Any) -> Any:
    """A hyperparameter must be a real number, checked now: the update runs later, in the
    engine, where a string would fail far from the line that gave it."""
    return _number(value, what, "{'learning_rate': 0.1}")


def _zeros_like(weight: Any, dtype: Any = None) -> Any:
    return _nd.zeros(weight.shape, weight.context, dtype=dtype or weight.dtype)


# -- the built-in optimizers (MXNet 1.9.1's registry) ---------------------------------------

@register
class SGD(Optimizer):
    """Stochastic gradient descent, with momentum and weight decay."""

    hyper_names: tuple[str, ...] = ("momentum",)

    def __init__(self, momentum: float = 0.0, lazy_update: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.momentum = self._checked("momentum", momentum)
        self.lazy_update = lazy_update

    def create_state(self, index: Any, weight: Any) -> Any:
        return _zeros_like(weight) if self.momentum != 0 else None

    def create_state_multi_precision(self, index: Any, weight: Any) -> Any:
        """MXNet's SGD keeps ``(momentum, float32 copy)``, the copy second."""
        if self.multi_precision and weight.dtype == np.float16:
            master = weight.astype(np.float32)
            return (self.create_state(index, master), master)
        return super().create_state_multi_precision(index, weight)

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        kwargs = self._op_kwargs(index)
        if state is None:
            _nd.sgd_update(weight, grad, out=weight, **kwargs)
        else:
            _nd.sgd_mom_update(weight, grad, state, out=weight, momentum=self.momentum,
                               **kwargs)

    def update_multi_precision(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        if self.multi_precision and weight.dtype == np.float16:
            momentum, master = state
            self.update(index, master, grad.astype(np.float32), momentum)
            weight[:] = master.astype(weight.dtype)
        else:
            self.update(index, weight, grad, state)


@register
class ccSGD(SGD):  # noqa: N801  (MXNet's name; kept for old code)
    """MXNet's deprecated alias of SGD."""


@register
class NAG(SGD):
    """Nesterov accelerated gradient: the step looks ahead along the momentum."""

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        kwargs = self._op_kwargs(index)
        if state is None:
            _nd.sgd_update(weight, grad, out=weight, **kwargs)
        else:
            _nd.nag_mom_update(weight, grad, state, out=weight, momentum=self.momentum,
                               **kwargs)


@register
class Signum(Optimizer):
    """The sign of the momentum (signSGD without momentum), Bernstein et al."""

    hyper_names = ("momentum", "wd_lh")

    def __init__(self, learning_rate: float = 0.01, momentum: float = 0.9, wd_lh: float = 0.0,
                 **kwargs: Any) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.momentum, self.wd_lh = momentum, wd_lh

    def create_state(self, index: Any, weight: Any) -> Any:
        return _zeros_like(weight) if self.momentum != 0 else None

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        kwargs = self._op_kwargs(index)
        if state is None:
            _nd.signsgd_update(weight, grad, out=weight, **kwargs)
        else:
            _nd.signum_update(weight, grad, state, out=weight, momentum=self.momentum,
                              wd_lh=self.wd_lh, **kwargs)


@register
class Adam(Optimizer):
    """Adam (Kingma and Ba), with bias correction folded into the rate."""

    hyper_names = ("beta1", "beta2", "epsilon")

    def __init__(self, learning_rate: float = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, lazy_update: bool = True, **kwargs: Any) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.lazy_update = lazy_update

    def create_state(self, index: Any, weight: Any) -> Any:
        return (_zeros_like(weight), _zeros_like(weight))

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        kwargs = self._op_kwargs(index)
        t = self._index_update_count[index]
        kwargs["lr"] *= math.sqrt(1 - self.beta2 ** t) / (1 - self.beta1 ** t)
        _nd.adam_update(weight, grad, *state, out=weight, beta1=self.beta1, beta2=self.beta2,
                        epsilon=self.epsilon, **kwargs)


@register
class FTML(Optimizer):
    """Follow the moving leader (Zheng and Kwok, 2017)."""

    hyper_names = ("beta1", "beta2", "epsilon")

    def __init__(self, beta1: float = 0.6, beta2: float = 0.999, epsilon: float = 1e-8,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon

    def create_state(self, index: Any, weight: Any) -> Any:
        return tuple(_zeros_like(weight) for _ in range(3))  # d, v, z

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        kwargs = self._op_kwargs(index)
        kwargs["clip_grad"] = kwargs.pop("clip_gradient")
        _nd.ftml_update(weight, grad, *state, out=weight, beta1=self.beta1, beta2=self.beta2,
                        epsilon=self.epsilon, t=self._index_update_count[index], **kwargs)


@register
class RMSProp(Optimizer):
    """RMSProp (Tieleman and Hinton); ``centered=True`` is Graves's variant."""

    hyper_names = ("gamma1", "gamma2", "epsilon", "centered", "clip_weights")

    def __init__(self, learning_rate: float = 0.001, gamma1: float = 0.9, gamma2: float = 0.9,
                 epsilon: float = 1e-8, centered: bool = False,
                 clip_weights: float | None = None, **kwargs: Any) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.gamma1, self.gamma2, self.epsilon = gamma1, gamma2, epsilon
        self.centered, self.clip_weights = centered, clip_weights

    def create_state(self, index: Any, weight: Any) -> Any:
        return tuple(_zeros_like(weight) for _ in range(3 if self.centered else 1))

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        kwargs = self._op_kwargs(index, gamma1=self.gamma1, epsilon=self.epsilon,
                                 clip_weights=self.clip_weights or -1.0)
        if self.centered:
            _nd.rmspropalex_update(weight, grad, *state, out=weight, gamma2=self.gamma2,
                                   **kwargs)
        else:
            _nd.rmsprop_update(weight, grad, *state, out=weight, **kwargs)


@register
class Ftrl(Optimizer):
    """Follow the regularised leader, proximal (McMahan et al.)."""

    hyper_names = ("lamda1", "beta")

    def __init__(self, lamda1: float = 0.01, learning_rate: float = 0.1, beta: float = 1,
                 **kwargs: Any) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.lamda1, self.beta = lamda1, beta

    def create_state(self, index: Any, weight: Any) -> Any:
        return (_zeros_like(weight), _zeros_like(weight))  # z, n

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        kwargs = self._op_kwargs(index, lamda1=self.lamda1, beta=self.beta)
        _nd.ftrl_update(weight, grad, *state, out=weight, **kwargs)


# the rules MXNet writes with NDArray arithmetic (no fused operator): several engine ops

@register
class AdaGrad(Optimizer):
    """Per-coordinate rates shrinking with the sum of squared gradients (Duchi et al.)."""

    hyper_names = ("float_stable_eps",)

    def __init__(self, eps: float = 1e-7, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.float_stable_eps = eps

    def create_state(self, index: Any, weight: Any) -> Any:
        return _zeros_like(weight)  # the sum of squared gradients

    def update(self, index: Any, weight: Any, grad: Any, history: Any) -> None:
        self._update_count(index)
        lr, wd, grad = self._get_lr(index), self._get_wd(index), self._scaled(grad)
        history[:] += _nd.square(grad)
        weight[:] += (grad / _nd.sqrt(history + self.float_stable_eps) + weight * wd) * -lr


@register
class AdaDelta(Optimizer):
    """Rates from running averages of squared gradients and steps (Zeiler); no ``lr``."""

    hyper_names = ("rho", "epsilon")

    def __init__(self, rho: float = 0.90, epsilon: float = 1e-5, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rho, self.epsilon = rho, epsilon

    def create_state(self, index: Any, weight: Any) -> Any:
        return (_zeros_like(weight), _zeros_like(weight))  # squared gradients, squared steps

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        wd = self._get_wd(index)
        self._update_count(index)
        grad = self._scaled(grad)
        acc_g, acc_delta = state
        acc_g[:] = self.rho * acc_g + (1.0 - self.rho) * grad * grad
        delta = _nd.sqrt(acc_delta + self.epsilon) / _nd.sqrt(acc_g + self.epsilon) * grad
        acc_delta[:] = self.rho * acc_delta + (1.0 - self.rho) * delta * delta
        weight[:] -= delta + wd * weight


@register
class Adamax(Optimizer):
    """Adam with the infinity norm (Kingma and Ba, section 7)."""

    hyper_names = ("beta1", "beta2")

    def __init__(self, learning_rate: float = 0.002, beta1: float = 0.9, beta2: float = 0.999,
                 **kwargs: Any) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2 = beta1, beta2

    def create_state(self, index: Any, weight: Any) -> Any:
        return (_zeros_like(weight), _zeros_like(weight))

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        lr /= 1.0 - self.beta1 ** self._index_update_count[index]
        grad = grad * self.rescale_grad + wd * weight  # (MXNet clips after the decay here)
        if self.clip_gradient is not None:
            grad = _nd.clip(grad, -self.clip_gradient, self.clip_gradient)
        mean, peak = state
        mean[:] = self.beta1 * mean + (1.0 - self.beta1) * grad
        peak[:] = _nd.maximum(self.beta2 * peak, _nd.abs(grad))
        weight[:] -= lr * mean / peak


@register
class Nadam(Optimizer):
    """Adam with Nesterov momentum and a momentum schedule (Dozat)."""

    hyper_names = ("beta1", "beta2", "epsilon", "schedule_decay")

    def __init__(self, learning_rate: float = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, schedule_decay: float = 0.004, **kwargs: Any) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.schedule_decay, self.m_schedule = schedule_decay, 1.0

    def create_state(self, index: Any, weight: Any) -> Any:
        return (_zeros_like(weight), _zeros_like(weight))

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        self._update_count(index)
        lr, wd, t = self._get_lr(index), self._get_wd(index), self._index_update_count[index]
        grad = grad * self.rescale_grad + wd * weight
        if self.clip_gradient is not None:
            grad = _nd.clip(grad, -self.clip_gradient, self.clip_gradient)
        momentum_t = self.beta1 * (1.0 - 0.5 * 0.96 ** (t * self.schedule_decay))
        momentum_next = self.beta1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * self.schedule_decay))
        self.m_schedule *= momentum_t
        schedule_next = self.m_schedule * momentum_next
        mean, var = state
        mean[:] = self.beta1 * mean + (1.0 - self.beta1) * grad
        var[:] = self.beta2 * var + (1.0 - self.beta2) * grad * grad
        blended = ((1.0 - momentum_t) * grad / (1.0 - self.m_schedule)
                   + momentum_next * mean / (1.0 - schedule_next))
        var_hat = var / (1.0 - self.beta2 ** t)
        weight[:] -= lr * blended / (_nd.sqrt(var_hat) + self.epsilon)


@register
class SGLD(Optimizer):
    """Stochastic gradient Langevin dynamics: half a gradient step plus Gaussian noise of
    variance ``lr`` (samples from the posterior rather than one optimum)."""

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        self._update_count(index)
        lr, wd, grad = self._get_lr(index), self._get_wd(index), self._scaled(grad)
        weight[:] += -lr / 2 * (grad + wd * weight)
        weight[:] += _nd.random.normal(0, math.sqrt(lr), shape=weight.shape,
                                       dtype=weight.dtype, ctx=weight.context)


@register
class DCASGD(Optimizer):
    """Delay-compensated asynchronous SGD (Zheng et al.): the gradient corrected by how
    far the weight moved since the one it was computed on."""

    hyper_names = ("momentum", "lamda")

    def __init__(self, momentum: float = 0.0, lamda: float = 0.04, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.momentum, self.lamda = momentum, lamda

    def create_state(self, index: Any, weight: Any) -> Any:
        return (_zeros_like(weight) if self.momentum else None, weight.copy())

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        self._update_count(index)
        lr, wd, grad = self._get_lr(index), self._get_wd(index), self._scaled(grad)
        momentum, previous = state
        step = -lr * (grad + wd * weight + self.lamda * grad * grad * (weight - previous))
        if momentum is not None:
            momentum[:] = self.momentum * momentum + step
            step = momentum
        previous[:] = weight
        weight[:] += step


@register
class LAMB(Optimizer):
    """Layer-wise adaptive moments (You et al.): Adam's step scaled per weight by the
    trust ratio ``||w|| / ||step||``. ``update`` also takes lists (MXNet's multi-tensor
    form), updated one after another."""

    hyper_names = ("beta1", "beta2", "epsilon", "lower_bound", "upper_bound",
                   "bias_correction")

    def __init__(self, learning_rate: float = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-6, lower_bound: float | None = None,
                 upper_bound: float | None = None, bias_correction: bool = True,
                 **kwargs: Any) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.lower_bound, self.upper_bound = lower_bound, upper_bound
        self.bias_correction = bias_correction

    def create_state(self, index: Any, weight: Any) -> Any:
        return (_zeros_like(weight), _zeros_like(weight))

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        if isinstance(index, (list, tuple)):
            for i, w, g, s in zip(index, weight, grad, state):
                self.update(i, w, g, s)
            return
        self._update_count(index)
        lr, wd, t = self._get_lr(index), self._get_wd(index), self._index_update_count[index]
        grad, (mean, var) = self._scaled(grad), state
        mean[:] = self.beta1 * mean + (1.0 - self.beta1) * grad
        var[:] = self.beta2 * var + (1.0 - self.beta2) * _nd.square(grad)
        mean_hat, var_hat = mean, var
        if self.bias_correction:
            mean_hat, var_hat = mean / (1.0 - self.beta1 ** t), var / (1.0 - self.beta2 ** t)
        step = mean_hat / (_nd.sqrt(var_hat) + self.epsilon) + wd * weight
        norm_w = float(weight.norm().asscalar())
        if self.lower_bound:
            norm_w = max(norm_w, self.lower_bound)
        if self.upper_bound:
            norm_w = min(norm_w, self.upper_bound)
        norm_step = float(step.norm().asscalar())
        ratio = 1.0 if norm_w == 0 or norm_step == 0 else norm_w / norm_step
        weight[:] -= lr * ratio * step

    def update_multi_precision(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        if isinstance(index, (list, tuple)):
            for i, w, g, s in zip(index, weight, grad, state):
                self.update_multi_precision(i, w, g, s)
            return
        super().update_multi_precision(index, weight, grad, state)


@register
class LARS(SGD):
    """Layer-wise adaptive rate scaling (You et al.): SGD whose rate is scaled per weight
    by ``eta * ||w|| / (||g|| + wd * ||w|| + eps)``."""

    hyper_names = ("momentum", "eta", "eps")

    def __init__(self, momentum: float = 0.0, lazy_update: bool = True, eta: float = 0.001,
                 eps: float = 0, momentum_correction: bool = True, **kwargs: Any) -> None:
        super().__init__(momentum=momentum, lazy_update=lazy_update, **kwargs)
        self.eta, self.eps, self.momentum_correction = eta, eps, momentum_correction

    def _get_lrs(self, indices: list) -> list[float]:
        return [lr * self._ratios.get(i, 1.0) for i, lr in zip(indices, super()._get_lrs(
            indices))]

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        norm_w = float(weight.norm().asscalar())
        norm_g = float((grad * self.rescale_grad).norm().asscalar())
        wd = self._get_wd(index)
        ratio = 1.0
        if norm_w > 0 and norm_g > 0:
            ratio = self.eta * norm_w / (norm_g + wd * norm_w + self.eps)
        self._ratios = {index: ratio}
        try:
            super().update(index, weight, grad, state)
        finally:
            self._ratios = {}

    _ratios: dict[Any, float] = {}


@register
class Test(Optimizer):
    """MXNet's optimizer for tests: ``w += grad * rescale_grad``; the state copies ``w``."""

    def create_state(self, index: Any, weight: Any) -> Any:
        return _zeros_like(weight)

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        weight[:] += grad * self.rescale_grad
        state[:] = weight


class Updater:
    """MXNet's ``mx.optimizer.Updater``: ``optimizer`` applied by key, as a key-value store
    applies it (``updater(key, grad, weight)`` writes ``weight``'s next value). A built-in
    rule runs as ONE engine op on numpy arrays (its state the optimizer's own, numpy);
    any other optimizer through ``update_multi_precision`` with its NDArray states, kept
    here by key. ``states`` shows both as NDArrays."""

    def __init__(self, optimizer: Optimizer) -> None:
        self.optimizer = optimizer
        self.nd_states: dict[Any, Any] = {}

    def __call__(self, key: Any, grad: Any, weight: Any) -> None:
        optimizer = self.optimizer
        if optimizer.fused_rule() is None:
            if key not in self.nd_states:
                self.nd_states[key] = optimizer.create_state_multi_precision(key, weight)
            optimizer.update_multi_precision(key, weight, grad, self.nd_states[key])
            return
        hyper = optimizer.step_hyper(key)  # the rates of this call, not of when it runs

        def update() -> None:
            weight._data = optimizer.apply(key, weight._data, grad._data, hyper)

        engine.current().push(update, [grad._var], [weight._var], "kv_update", weight._ctx)

    @property
    def states(self) -> dict[Any, Any]:
        """Each key's state as NDArrays (copies of the fast path's, taken once the pending
        updates ran); SGD's momentum an NDArray, Adam's a tuple of two."""
        nd.waitall()
        shown = {k: tuple(nd.array(a, dtype=a.dtype) for a in arrays)
                 for k, arrays in self.optimizer.states.items()}
        return {**{k: arrays[0] if len(arrays) == 1 else arrays
                   for k, arrays in shown.items()}, **self.nd_states}

    def set_states(self, states: dict[Any, Any], counts: dict[Any, int] | None = None) -> None:
        """Replace every key's state (``states`` as :attr:`states` shows them)."""
        nd.waitall()
        if self.optimizer.fused_rule() is None:
            self.nd_states = dict(states)
        else:
            self.optimizer.states = {k: [np.array(a.asnumpy()) for a in (
                v if isinstance(v, (tuple, list)) else (v,))] for k, v in states.items()}
        self.optimizer.counts = dict(counts or {})


def get_updater(optimizer: Optimizer) -> Updater:
    """MXNet's ``mx.optimizer.get_updater``."""
    return Updater(optimizer)


# -- the fast path's numpy rules -----------------------------------------------------------

def _rescaled(g: np.ndarray, rescale: float, clip_gradient: float | None, out: np.ndarray
              ) -> np.ndarray:
    np.multiply(g, rescale, out=out)
    if clip_gradient is not None:
        np.clip(out, -clip_gradient, clip_gradient, out=out)
    return out


def sgd_update(w: np.ndarray, g: np.ndarray, states: list, learning_rate: float,
               momentum: float, wd: float, rescale: float, clip_gradient: float | None = None,
               **unused: Any) -> np.ndarray:
    """The new weights, in a fresh aligned array (``step``: one temporary, reused for the
    result; NOTE [Aligned weights] in gluon/parameter.py)."""
    step = _rescaled(g, rescale, clip_gradient, aligned_empty(w.shape, w.dtype))
    step *= learning_rate
    if wd:
        step += (learning_rate * wd) * w
    if momentum:
        states[0] *= momentum
        states[0] -= step
        return np.add(w, states[0], out=step)
    return np.subtract(w, step, out=step)


def adam_update(w: np.ndarray, g: np.ndarray, states: list, learning_rate: float,
                beta1: float, beta2: float, epsilon: float, wd: float, rescale: float,
                t: int, clip_gradient: float | None = None, **unused: Any) -> np.ndarray:
    """The new weights, computed in the one aligned array returned (``step``). The decay
    is added before clipping, as MXNet's ``adam_update`` does."""
    grad = np.multiply(g, rescale)
    if wd:
        grad += wd * w
    if clip_gradient is not None:
        np.clip(grad, -clip_gradient, clip_gradient, out=grad)
    mean, var = states
    mean *= beta1
    mean += (1 - beta1) * grad
    var *= beta2
    var += (1 - beta2) * grad * grad
    # a Python float (np.sqrt would give a float64 scalar, and float64 temporaries)
    lr_t = learning_rate * math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)
    step = np.sqrt(var, out=aligned_empty(w.shape, w.dtype))
    np.divide(mean, np.add(step, epsilon, out=step), out=step)  # m / (sqrt(v) + eps)
    return np.subtract(w, np.multiply(step, lr_t, out=step), out=step)


RULES: dict[str, Callable[..., np.ndarray]] = {"sgd": sgd_update, "adam": adam_update}
_STATE_COUNT = {"sgd": 1, "adam": 2}
