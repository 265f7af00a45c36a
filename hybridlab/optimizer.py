"""Optimizers (``mx.optimizer``): how a weight moves, given its gradient.

What this module teaches
------------------------
An optimizer is a rule ``w_next = update(w, g, state)`` plus the hyperparameters it
reads (learning rate, momentum, weight decay) and the state it keeps per weight (SGD a
momentum, Adam two moments). Keeping it apart from the :class:`~hybridlab.gluon.Trainer`
lets two places apply the same rule: the Trainer, on each device's weights, and a
key-value store (``kv.set_optimizer``), once per key on the store's copy -- the
parameter server's "update on the server" (hybridlab/kvstore/). The rules work on
numpy arrays and run inside engine ops (or on a Dask worker), never on NDArrays.

SGD:   ``state = momentum*state - lr*(g + wd*w);  w += state``   (plain: ``w -= lr*(g+wd*w)``)
Adam:  ``m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g;  w -= lr_t * m / (sqrt(v) + eps)``
       with ``lr_t = lr*sqrt(1-b2**t)/(1-b1**t)`` (bias correction).
where ``g`` is the gradient times ``rescale_grad`` (the Trainer sets it to
``1/batch_size``). The new weights go into a fresh 64-byte-aligned buffer (NOTE [Aligned
weights] in gluon/parameter.py); the states change in place (they are the optimizer's own).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from hybridlab import engine
from hybridlab import ndarray as nd
from hybridlab.initializer import _number
from hybridlab.ndarray_io import aligned_empty

DEFAULTS = {
    "sgd": {"learning_rate": 0.01, "momentum": 0.0, "wd": 0.0, "rescale_grad": 1.0},
    "adam": {"learning_rate": 0.001, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "wd": 0.0,
             "rescale_grad": 1.0},
}
_STATE_COUNT = {"sgd": 1, "adam": 2}


class Optimizer:
    """``mx.optimizer.SGD(learning_rate=0.1, momentum=0.9)``: a rule and its hyperparameters.

    ``update(key, weight, grad)`` returns the next weight (numpy arrays) and keeps a state
    per ``key`` (and a step count per key, for Adam's bias correction).
    """

    name = ""

    def __init__(self, **hyper: Any) -> None:
        unknown = set(hyper) - set(DEFAULTS[self.name])
        if unknown:
            raise ValueError(f"{self.name}: unknown optimizer parameter(s) {sorted(unknown)}; "
                             f"known: {sorted(DEFAULTS[self.name])}")
        for key, value in hyper.items():
            check_number(f"{self.name} {key}", value)
        self.hyper: dict[str, Any] = {**DEFAULTS[self.name], **hyper}
        self.states: dict[Any, list[np.ndarray]] = {}
        self.counts: dict[Any, int] = {}
        # key -> what has ``lr_mult``/``wd_mult`` (a Parameter; the Trainer fills it, as
        # MXNet's Trainer fills ``param_dict``): that key's rates are multiplied by them
        self.param_dict: dict[Any, Any] = {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v}' for k, v in self.hyper.items())})"

    @property
    def learning_rate(self) -> float:
        return float(self.hyper["learning_rate"])

    def set_learning_rate(self, lr: float) -> None:
        self.hyper["learning_rate"] = check_number("learning_rate", lr)

    @property
    def rescale_grad(self) -> float:
        return float(self.hyper["rescale_grad"])

    @rescale_grad.setter
    def rescale_grad(self, value: float) -> None:
        self.hyper["rescale_grad"] = check_number("rescale_grad", value)

    def state(self, key: Any, weight: np.ndarray) -> list[np.ndarray]:
        """The state arrays of ``key``, made at its first update."""
        if key not in self.states:
            self.states[key] = [np.zeros(weight.shape, weight.dtype)
                                for _ in range(_STATE_COUNT[self.name])]
        return self.states[key]

    def _get_lr(self, key: Any) -> float:
        """``key``'s learning rate: the optimizer's times its parameter's ``lr_mult``."""
        return float(self.hyper["learning_rate"]) * getattr(self.param_dict.get(key),
                                                            "lr_mult", 1.0)

    def _get_wd(self, key: Any) -> float:
        """``key``'s weight decay: the optimizer's times its parameter's ``wd_mult``."""
        return float(self.hyper["wd"]) * getattr(self.param_dict.get(key), "wd_mult", 1.0)

    def step_hyper(self, key: Any) -> dict[str, Any]:
        """``key``'s hyperparameters as they are now: an update that runs later, inside the
        engine, must use the rates of the moment it was asked for (a ``x.lr_mult = 2`` or
        a new learning rate after ``step`` changes the next step, not this one)."""
        return {**self.hyper, "rescale": self.hyper["rescale_grad"],
                "learning_rate": self._get_lr(key), "wd": self._get_wd(key)}

    def update(self, key: Any, weight: np.ndarray, grad: np.ndarray,
               hyper: dict[str, Any] | None = None) -> np.ndarray:
        """The next value of ``weight`` (a new array) after one step with ``grad``, with
        ``hyper`` from :meth:`step_hyper` (taken now when not given)."""
        self.counts[key] = self.counts.get(key, 0) + 1
        hyper = {**(hyper or self.step_hyper(key)), "t": self.counts[key]}
        return RULES[self.name](weight, grad, self.state(key, weight), **hyper)


class SGD(Optimizer):
    """Stochastic gradient descent, with momentum and weight decay."""

    name = "sgd"


class Adam(Optimizer):
    """Adam (Kingma and Ba), with bias correction."""

    name = "adam"


class Updater:
    """MXNet's ``mx.optimizer.Updater``: ``optimizer`` applied by key, as a key-value store
    applies it (``updater(key, grad, weight)`` writes ``weight``'s next value, one engine
    op). ``states`` shows each key's state as MXNet does (SGD's momentum an NDArray,
    Adam's a tuple of two); the arrays themselves are the optimizer's (``optimizer.states``)."""

    def __init__(self, optimizer: Optimizer) -> None:
        self.optimizer = optimizer

    def __call__(self, key: Any, grad: Any, weight: Any) -> None:
        optimizer = self.optimizer
        hyper = optimizer.step_hyper(key)  # the rates of this call, not of when it runs

        def update() -> None:
            weight._data = optimizer.update(key, weight._data, grad._data, hyper)

        engine.current().push(update, [grad._var], [weight._var], "kv_update", weight._ctx)

    @property
    def states(self) -> dict[Any, Any]:
        """Each key's state as NDArrays (copies, taken once the pending updates ran)."""
        nd.waitall()
        shown = {k: tuple(nd.array(a, dtype=a.dtype) for a in arrays)
                 for k, arrays in self.optimizer.states.items()}
        return {k: arrays[0] if len(arrays) == 1 else arrays for k, arrays in shown.items()}

    def set_states(self, states: dict[Any, Any], counts: dict[Any, int] | None = None) -> None:
        """Replace every key's state (``states`` as :attr:`states` shows them)."""
        nd.waitall()
        self.optimizer.states = {k: [np.array(a.asnumpy()) for a in (
            v if isinstance(v, (tuple, list)) else (v,))] for k, v in states.items()}
        self.optimizer.counts = dict(counts or {})


def create(name: str | Optimizer, **hyper: Any) -> Optimizer:
    """``mx.optimizer.create('sgd', learning_rate=0.1)``; an Optimizer is returned as it is."""
    if isinstance(name, Optimizer):
        return name
    kinds = {cls.name: cls for cls in (SGD, Adam)}
    if not isinstance(name, str) or name.lower() not in kinds:
        raise ValueError(f"unknown optimizer {name!r}; hybridlab has {list(kinds)}")
    return kinds[name.lower()](**hyper)


def check_number(what: str, value: Any) -> Any:
    """A hyperparameter must be a real number, checked now: the update runs later, in the
    engine, where a string would fail far from the line that gave it."""
    return _number(value, f"Trainer: {what}", "{'learning_rate': 0.1}")


def sgd_update(w: np.ndarray, g: np.ndarray, states: list, learning_rate: float,
               momentum: float, wd: float, rescale: float, **unused: Any) -> np.ndarray:
    """The new weights, in a fresh aligned array (``step``: one temporary, reused for the
    result; NOTE [Aligned weights] in gluon/parameter.py)."""
    step = np.multiply(g, learning_rate * rescale, out=aligned_empty(w.shape, w.dtype))
    if wd:
        step += (learning_rate * wd) * w
    if momentum:
        states[0] *= momentum
        states[0] -= step
        return np.add(w, states[0], out=step)
    return np.subtract(w, step, out=step)


def adam_update(w: np.ndarray, g: np.ndarray, states: list, learning_rate: float,
                beta1: float, beta2: float, epsilon: float, wd: float, rescale: float,
                t: int, **unused: Any) -> np.ndarray:
    """The new weights, computed in the one aligned array returned (``step``)."""
    grad = g * rescale + wd * w if wd else g * rescale
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
