"""The Trainer: apply an optimizer to a set of Parameters after ``backward()``.

What this module teaches
------------------------
After ``loss.backward()`` every parameter holds a gradient of the *summed* loss.
``trainer.step(batch_size)`` rescales it by ``1/batch_size`` (so the learning rate
does not depend on the batch size) and updates each parameter in place.

A step is pushed to the engine as **one operation** that reads every gradient and writes
every weight and optimizer state (MXNet's fused ``sgd_mom_update``/``adam_update``,
applied to the whole group of parameters at once as its ``multi_sgd_update`` does): it
is ordered after the backward pass that wrote the gradients and before any later forward
pass that reads a weight, without the Python waiting. One push per step, not one per
parameter: a push costs microseconds of bookkeeping, a small network's update less.
The new weights go into a fresh aligned buffer that the weight's NDArray then holds (NOTE
[Immutable buffers] in ndarray.py: ``w.detach()`` may share the old one, which must
keep its values); the optimizer states are the Trainer's own and change in place.

SGD:   ``state = momentum*state - lr*(g + wd*w);  w += state``   (plain: ``w -= lr*(g+wd*w)``)
Adam:  ``m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g;  w -= lr_t * m / (sqrt(v) + eps)``
       with ``lr_t = lr*sqrt(1-b2**t)/(1-b1**t)`` (bias correction).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from hybridlab import engine
from hybridlab.gluon.parameter import Parameter, ParameterDict, aligned_empty
from hybridlab.initializer import _number

_STATE_COUNT = {"sgd": 1, "adam": 2}
_DEFAULTS = {
    "sgd": {"learning_rate": 0.01, "momentum": 0.0, "wd": 0.0},
    "adam": {"learning_rate": 0.001, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "wd": 0.0},
}


class Trainer:
    """``Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1, 'momentum': 0.9})``."""

    def __init__(self, params: ParameterDict | list | dict, optimizer: str,
                 optimizer_params: dict | None = None, kvstore: Any = "device",
                 compression_params: Any = None, update_on_kvstore: bool | None = None
                 ) -> None:
        name = optimizer.lower()
        if name not in _DEFAULTS:
            raise ValueError(f"unknown optimizer {optimizer!r}; hybridlab has {list(_DEFAULTS)}")
        if not (kvstore is None or kvstore in ("device", "local")) or compression_params \
                or update_on_kvstore not in (None, True, False):
            raise ValueError(f"Trainer: kvstore={kvstore!r}, compression_params="
                             f"{compression_params!r}, update_on_kvstore={update_on_kvstore!r}: "
                             f"on one device hybridlab takes kvstore 'device', 'local' or None "
                             f"and no compression")
        # one device: no kvstore is made and the Trainer updates itself (MXNet does the same)
        given = dict(optimizer_params or {})
        self._scheduler = given.pop("lr_scheduler", None)
        if self._scheduler is not None and not callable(self._scheduler):
            raise TypeError(f"Trainer: lr_scheduler must be an mx.lr_scheduler object, got "
                            f"{self._scheduler!r}")
        unknown = set(given) - set(_DEFAULTS[name]) - {"rescale_grad"}
        if unknown:
            raise ValueError(f"{name}: unknown optimizer parameter(s) {sorted(unknown)}; "
                             f"known: {sorted(_DEFAULTS[name])}")
        for key, value in given.items():
            _check_number(f"{name} {key}", value)
        self._optimizer = name
        self._hyper = {**_DEFAULTS[name], **given}
        values = params.values() if isinstance(params, (ParameterDict, dict)) else params
        self._params: list[Parameter] = [p for p in values if p.grad_req != "null"]
        self._states: dict[str, list[np.ndarray]] = {}
        self._steps = 0

    @property
    def learning_rate(self) -> float:
        """The rate of the next step (the scheduler's, when one was given)."""
        if self._scheduler is not None:
            return self._scheduler(self._steps)
        return self._hyper["learning_rate"]

    def set_learning_rate(self, lr: float) -> None:
        if self._scheduler is not None:
            raise UserWarning("Trainer: an lr_scheduler sets the learning rate; change the "
                              "scheduler instead of calling set_learning_rate")
        self._hyper["learning_rate"] = _check_number("learning_rate", lr)

    def step(self, batch_size: int, ignore_stale_grad: bool = False) -> None:
        """One update of every parameter, with gradients scaled by ``1/batch_size``."""
        self.allreduce_grads()
        self.update(batch_size, ignore_stale_grad)

    def allreduce_grads(self) -> None:
        """Sum each gradient over the devices: with one device there is nothing to sum."""

    def update(self, batch_size: int, ignore_stale_grad: bool = False) -> None:
        """The update alone (``step`` = ``allreduce_grads`` + ``update``). Each parameter's
        learning rate and weight decay are multiplied by its ``lr_mult``/``wd_mult``."""
        if _check_number("step(batch_size)", batch_size) <= 0:
            raise ValueError(f"step(batch_size): the number of samples the gradients were "
                             f"summed over must be positive, got {batch_size!r}")
        self._steps += 1
        rescale = self._hyper.get("rescale_grad", 1.0) / batch_size
        hyper = {**self._hyper, "rescale": rescale, "t": self._steps}
        if self._scheduler is not None:
            hyper["learning_rate"] = self._scheduler(self._steps)
        weights = [param.data() for param in self._params]
        grads = [param.grad() for param in self._params]
        states = [self._state(param, weight) for param, weight in zip(self._params, weights)]
        mults = [(param.lr_mult, param.wd_mult) for param in self._params]
        kernel = _bind(self._optimizer, weights, grads, states, mults, hyper)
        engine.current().push(kernel, reads=[grad._var for grad in grads],
                              writes=[weight._var for weight in weights],
                              name=f"multi_{self._optimizer}_update")

    def _state(self, param: Parameter, weight: Any) -> list[np.ndarray]:
        """The optimizer's arrays for ``param``, made at its first step (SGD keeps a
        momentum, Adam two moments)."""
        if param.name not in self._states:
            self._states[param.name] = [np.zeros(weight.shape, weight.dtype)
                                        for _ in range(_STATE_COUNT[self._optimizer])]
        return self._states[param.name]

    def zero_grad(self) -> None:
        for param in self._params:
            param.zero_grad()

    def save_states(self, fname: str) -> None:
        """Save the optimizer's state (momenta, Adam's moments, the step count) with
        ``nd.save`` -- not MXNet's pickle: hybridlab never unpickles a file."""
        from hybridlab import ndarray
        ndarray.waitall()  # the states change inside the engine's update ops
        arrays = {"__steps__": ndarray.array([self._steps], dtype="int64")}
        for name, states in self._states.items():
            arrays.update({f"{name}:{i}": ndarray.array(a) for i, a in enumerate(states)})
        ndarray.save(fname, arrays)

    def load_states(self, fname: str) -> None:
        """Restore what :meth:`save_states` wrote (the same parameters' names)."""
        from hybridlab import ndarray
        loaded = ndarray.load(fname)
        if not isinstance(loaded, dict) or "__steps__" not in loaded:
            raise ValueError(f"{fname}: not a file of Trainer.save_states")
        ndarray.waitall()
        self._steps = int(loaded.pop("__steps__").asscalar())
        self._states = {}
        for key in sorted(loaded, key=lambda k: int(k.rsplit(":", 1)[1])):
            self._states.setdefault(key.rsplit(":", 1)[0], []).append(loaded[key].asnumpy())


def _check_number(what: str, value: Any) -> Any:
    """A hyperparameter must be a real number, checked now: the update runs later, in the
    engine, where a string would fail far from the line that gave it."""
    return _number(value, f"Trainer: {what}", "{'learning_rate': 0.1}")


def _bind(optimizer: str, weights: list, grads: list, states: list, mults: list,
          hyper: dict) -> Callable:
    """The engine op: each weight's next buffer from its gradient's."""
    update = _sgd_update if optimizer == "sgd" else _adam_update
    lr, wd = hyper.pop("learning_rate"), hyper.pop("wd")

    def kernel() -> None:
        for weight, grad, state, (lr_mult, wd_mult) in zip(weights, grads, states, mults):
            weight._data = update(weight._data, grad._data, state, learning_rate=lr * lr_mult,
                                  wd=wd * wd_mult, **hyper)

    return kernel


def _sgd_update(w: np.ndarray, g: np.ndarray, states: list, learning_rate: float,
                momentum: float, wd: float, rescale: float, **unused: Any) -> np.ndarray:
    """The new weights, in a fresh aligned array (``step``: one temporary, reused for the
    result; NOTE [Aligned weights] in parameter.py)."""
    step = np.multiply(g, learning_rate * rescale, out=aligned_empty(w.shape, w.dtype))
    if wd:
        step += (learning_rate * wd) * w
    if momentum:
        states[0] *= momentum
        states[0] -= step
        return np.add(w, states[0], out=step)
    return np.subtract(w, step, out=step)


def _adam_update(w: np.ndarray, g: np.ndarray, states: list, learning_rate: float,
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
