"""MXNet's optimizer update operators (``sgd_update``, ``adam_update``, ...).

What this module teaches
------------------------
An optimizer step is arithmetic on a weight, its gradient and some *state* (momentum,
running averages). MXNet wrote each rule as one operator that overwrites the weight (its
``out``) and its states in place. Here each kernel is a pure function returning the new
weight and the new states, as every kernel does; ``nd``'s front end for these operators
(``ndarray.py``, :data:`STATE_INPUTS`) then writes the states back into the arrays it was
given, so MXNet code calling ``nd.adam_update(w, g, mean, var, out=w, lr=...)`` sees its
arrays change exactly as in MXNet. (The ``Trainer`` keeps its own update code.)

Invariants
----------
* The gradient is first rescaled and clipped: ``clip(rescale_grad * grad, clip_gradient)``
  (a negative ``clip_gradient`` means no clipping), as in MXNet's ``optimizer_op-inl.h``;
  Adam, FTML and RMSProp add the weight decay *before* clipping, ``clip(rescale_grad *
  grad + wd * weight)``, as MXNet 1.9.1's kernels do (:func:`_decayed`).
* No gradient: these are the end of a step, not part of a model.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from hybridlab.ops.registry import Attr, Aval, Kind, OpDef, register

STATE_INPUTS: dict[str, tuple[int, ...]] = {}  # op name -> the inputs it updates in place


def _clipped(grad: np.ndarray, rescale_grad: float, clip: float) -> np.ndarray:
    scaled = grad * rescale_grad
    return np.clip(scaled, -clip, clip) if clip >= 0 else scaled


def _update(name: str, inputs: tuple[str, ...], rule: Callable[..., tuple[Any, ...]], doc: str,
            **attrs: Attr) -> None:
    """Register ``rule(weight, grad, *states, **attrs) -> (weight, *states)``."""
    states = tuple(range(2, len(inputs)))
    STATE_INPUTS[name] = states

    def kernel(*arrays: np.ndarray, **kw: Any) -> Any:
        results = tuple(np.asarray(r, arrays[0].dtype) for r in rule(*arrays, **kw))
        return results if states else results[0]

    register(OpDef(
        name=name, kernel=kernel, grad=None, kind=Kind.OPAQUE, inputs=inputs,
        num_outputs=1 + len(states), infer=lambda *avals, **kw: [Aval(a.shape, a.dtype) for a
                                                                 in (avals[0], *avals[2:])],
        attrs={"lr": Attr("float"), "wd": Attr("float", 0.0), "rescale_grad": Attr("float", 1.0),
               "clip_gradient": Attr("float", -1.0), **attrs}, doc=doc))


def _decayed(g: Any, w: Any, rescale_grad: float, wd: float, clip: float) -> Any:
    """``clip(rescale_grad * grad + wd * weight)``: the decay inside the clip."""
    grad = g * rescale_grad + wd * w
    return np.clip(grad, -clip, clip) if clip >= 0 else grad


def _sgd(w: Any, g: Any, lr: float, wd: float, rescale_grad: float, clip_gradient: float,
         lazy_update: bool) -> tuple[Any, ...]:
    return ((1 - lr * wd) * w - lr * _clipped(g, rescale_grad, clip_gradient),)


def _sgd_mom(w: Any, g: Any, mom: Any, lr: float, wd: float, rescale_grad: float,
             clip_gradient: float, momentum: float, lazy_update: bool) -> tuple[Any, ...]:
    mom = momentum * mom - lr * wd * w - lr * _clipped(g, rescale_grad, clip_gradient)
    return w + mom, mom


def _signsgd(w: Any, g: Any, lr: float, wd: float, **unused: Any) -> tuple[Any, ...]:
    return ((1 - lr * wd) * w - lr * np.sign(g),)


def _signum(w: Any, g: Any, mom: Any, lr: float, wd: float, rescale_grad: float,
            clip_gradient: float, momentum: float, wd_lh: float) -> tuple[Any, ...]:
    step = (1 - momentum) * (wd * w + _clipped(g, rescale_grad, clip_gradient))
    mom = momentum * mom - step
    return (1 - lr * wd_lh) * w + lr * np.sign(mom), mom


def _nag(w: Any, g: Any, mom: Any, lr: float, wd: float, rescale_grad: float,
         clip_gradient: float, momentum: float) -> tuple[Any, ...]:
    step = lr * (_clipped(g, rescale_grad, clip_gradient) + wd * w)
    mom = momentum * mom - step  # (MXNet's state: the rate and the sign inside)
    return w + momentum * mom - step, mom


def _adam(w: Any, g: Any, mean: Any, var: Any, lr: float, wd: float, rescale_grad: float,
          clip_gradient: float, beta1: float, beta2: float, epsilon: float,
          lazy_update: bool) -> tuple[Any, ...]:
    grad = _decayed(g, w, rescale_grad, wd, clip_gradient)
    mean = beta1 * mean + (1 - beta1) * grad
    var = beta2 * var + (1 - beta2) * grad * grad
    return w - lr * mean / (np.sqrt(var) + epsilon), mean, var


def _rmsprop(w: Any, g: Any, n: Any, lr: float, wd: float, rescale_grad: float,
             clip_gradient: float, gamma1: float, epsilon: float, clip_weights: float
             ) -> tuple[Any, ...]:
    grad = _decayed(g, w, rescale_grad, wd, clip_gradient)
    n = (1 - gamma1) * grad * grad + gamma1 * n
    w = w - lr * grad / np.sqrt(n + epsilon)
    return (np.clip(w, -clip_weights, clip_weights) if clip_weights >= 0 else w), n


def _rmspropalex(w: Any, g: Any, n: Any, mean: Any, delta: Any, lr: float, wd: float,
                 rescale_grad: float, clip_gradient: float, gamma1: float, gamma2: float,
                 epsilon: float, clip_weights: float) -> tuple[Any, ...]:
    grad = _decayed(g, w, rescale_grad, wd, clip_gradient)
    n = (1 - gamma1) * grad * grad + gamma1 * n
    mean = (1 - gamma1) * grad + gamma1 * mean
    delta = gamma2 * delta - lr * grad / np.sqrt(n - mean * mean + epsilon)
    w = w + delta
    return (np.clip(w, -clip_weights, clip_weights) if clip_weights >= 0 else w), n, mean, delta


def _ftrl(w: Any, g: Any, z: Any, n: Any, lr: float, wd: float, rescale_grad: float,
          clip_gradient: float, lamda1: float, beta: float) -> tuple[Any, ...]:
    grad = _clipped(g, rescale_grad, clip_gradient)
    z = z + grad - (np.sqrt(n + grad * grad) - np.sqrt(n)) * w / lr
    n = n + grad * grad
    w = (np.sign(z) * lamda1 - z) / ((beta + np.sqrt(n)) / lr + wd) * (np.abs(z) > lamda1)
    return w, z, n


def _ftml(w: Any, g: Any, d: Any, v: Any, z: Any, lr: float, wd: float, rescale_grad: float,
          clip_gradient: float, clip_grad: float, beta1: float, beta2: float, epsilon: float,
          t: int) -> tuple[Any, ...]:
    grad = _decayed(g, w, rescale_grad, wd, clip_grad if clip_grad >= 0 else clip_gradient)
    v = beta2 * v + (1 - beta2) * grad * grad
    d_t = (1 - beta1 ** t) / lr * (np.sqrt(v / (1 - beta2 ** t)) + epsilon)
    z = beta1 * z + (1 - beta1) * grad - (d_t - beta1 * d) * w
    return -z / d_t, d_t, v, z


_LAZY, _MOMENTUM = Attr("bool", True), Attr("float", 0.0)
_update("sgd_update", ("weight", "grad"), _sgd, "``w -= lr * (grad + wd * w)``.",
        lazy_update=_LAZY)
_update("sgd_mom_update", ("weight", "grad", "mom"), _sgd_mom, "SGD with momentum.",
        momentum=_MOMENTUM, lazy_update=_LAZY)
_update("signsgd_update", ("weight", "grad"), _signsgd, "``w -= lr * sign(grad)`` (+ decay).")
_update("signum_update", ("weight", "grad", "mom"), _signum, "Sign of the momentum.",
        momentum=_MOMENTUM, wd_lh=Attr("float", 0.0))
_update("nag_mom_update", ("weight", "grad", "mom"), _nag, "Nesterov momentum.",
        momentum=_MOMENTUM)
_update("adam_update", ("weight", "grad", "mean", "var"), _adam, "Adam (no bias correction: "
        "MXNet's optimizer folds it into lr).", beta1=Attr("float", 0.9),
        beta2=Attr("float", 0.999), epsilon=Attr("float", 1e-8), lazy_update=_LAZY)
_update("rmsprop_update", ("weight", "grad", "n"), _rmsprop, "RMSProp (Tieleman & Hinton).",
        gamma1=Attr("float", 0.95), epsilon=Attr("float", 1e-8),
        clip_weights=Attr("float", -1.0))
_update("rmspropalex_update", ("weight", "grad", "n", "g", "delta"), _rmspropalex,
        "RMSProp as in Graves 2013.", gamma1=Attr("float", 0.95), gamma2=Attr("float", 0.9),
        epsilon=Attr("float", 1e-8), clip_weights=Attr("float", -1.0))
_update("ftrl_update", ("weight", "grad", "z", "n"), _ftrl, "FTRL-proximal.",
        lamda1=Attr("float", 0.01), beta=Attr("float", 1.0))
_update("ftml_update", ("weight", "grad", "d", "v", "z"), _ftml, "FTML (Zheng & Kwok 2017).",
        clip_grad=Attr("float", -1.0), beta1=Attr("float", 0.6), beta2=Attr("float", 0.999),
        epsilon=Attr("float", 1e-8), t=Attr("int"))
