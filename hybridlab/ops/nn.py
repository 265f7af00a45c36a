"""Layer operators: activations (``sigmoid``, ``LeakyReLU``, ``Activation``) and ``Dropout``.

What this module teaches
------------------------
Most activations are composites of elementwise ops, and their gradients come for free.
Two details are about numerics, not algebra:

* ``sigmoid`` is a primitive. Written as ``1 / (1 + exp(-x))`` it overflows for very
  negative x, and the composite's gradient becomes ``0 * inf = nan``; the kernel here
  only ever calls ``exp`` on non-positive numbers.
* ``softrelu`` (``log(1 + exp(x))``) stays a composite, rewritten as
  ``relu(x) + log1p(exp(-|x|))``: the same function, and no exponent is ever positive.

``Activation(x, act_type=...)`` is MXNet's one-op-for-all front end; in hybridlab it
just calls the op it names, so a saved graph contains ``relu`` or ``sigmoid`` nodes.

``Dropout`` is the composite ``data * _dropout_mask(data)``. The mask op is random
(``pure=False``: never merged or folded) and decides whether to drop when it *runs*
(``RunContext.training``), not when a graph is traced, so one hybridized graph serves
both training and prediction, as in MXNet. Its gradient is the product rule's
``g * mask``; the mask itself gets none.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hybridlab.errors import AttributeValueError, ShapeError
from hybridlab.ops import _infer
from hybridlab.ops.registry import Attr, Aval, Kind, OpDef, RunContext, composite, register


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """``exp`` only ever sees non-positive numbers, so it cannot overflow."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


register(OpDef(
    name="sigmoid", kernel=_sigmoid, infer=_infer.same_as_first, kind=Kind.ELEMENTWISE,
    grad=lambda F, inputs, outputs, out_grads: [out_grads[0] * outputs[0] * (1.0 - outputs[0])],
    inplace_ok=True,
    doc="Logistic ``1 / (1 + exp(-x))``. A primitive, not a composite: built from ``exp`` it "
        "overflows for x < -88 (float32) and its gradient becomes ``0 * inf = nan``.",
))


def _leaky_relu(x: np.ndarray, act_type: str, slope: float) -> np.ndarray:
    negative = slope * x if act_type == "leaky" else slope * np.expm1(np.minimum(x, 0))
    return np.where(x > 0, x, negative).astype(x.dtype, copy=False)


def _leaky_relu_grad(F, inputs, outputs, out_grads, act_type, slope):
    x, out, g = inputs[0], outputs[0], out_grads[0]
    negative_slope = slope if act_type == "leaky" else out + slope
    return [g * F.where(x > 0, F.ones_like(x), F.zeros_like(x) + negative_slope)]


register(OpDef(
    name="LeakyReLU", kernel=_leaky_relu, infer=_infer.same_as_first, grad=_leaky_relu_grad,
    kind=Kind.ELEMENTWISE, inplace_ok=True,
    attrs={"act_type": Attr("str", "leaky", ("leaky", "elu")), "slope": Attr("float", 0.25)},
    doc="``x`` if x > 0, else ``slope * x`` (leaky) or ``slope * (exp(x) - 1)`` (elu).",
))


@composite("softrelu")
def softrelu(F, data, name=None):
    """``log(1 + exp(x))``, computed as ``relu(x) + log1p(exp(-|x|))`` so it never overflows."""
    return F.broadcast_add(F.relu(data), F.log1p(F.exp(F.negative(F.abs(data)))), name=name)


@composite("softsign")
def softsign(F, data, name=None):
    """``x / (1 + |x|)``."""
    return F.broadcast_div(data, F.abs(data) + 1.0, name=name)


_ACT_TYPES = ("relu", "sigmoid", "tanh", "softrelu", "softsign")


@composite("Activation")
def activation(F, data, act_type, name=None):
    """MXNet's ``Activation(data, act_type)``: relu, sigmoid, tanh, softrelu or softsign."""
    if act_type not in _ACT_TYPES:
        raise AttributeValueError(f"Activation: unknown act_type {act_type!r}; use one of "
                                  f"{', '.join(map(repr, _ACT_TYPES))}")
    return getattr(F, act_type)(data, name=name)


def _dropout_mask(x: np.ndarray, p: float, mode: str, axes, rt: RunContext) -> np.ndarray:
    """Ones while predicting; while training 0 with probability p, else 1 / (1 - p)."""
    shape = _mask_infer(Aval(x.shape, x.dtype), p, mode, axes)[0].shape
    if p == 0 or not (rt.training or mode == "always"):
        return np.ones(shape, x.dtype)
    keep = rt.rng.random(shape) >= p
    return (keep / (1.0 - p)).astype(x.dtype)


def _mask_infer(x: Aval, p: float, mode: str, axes: tuple[int, ...]) -> list[Aval]:
    """The mask has length 1 along ``axes``: one draw shared along them (variational)."""
    if not 0 <= p < 1:
        raise AttributeValueError(f"Dropout: p={p} must be in [0, 1): the probability of "
                                  f"dropping an element")
    shared = {a % len(x.shape) for a in axes if -len(x.shape) <= a < len(x.shape)}
    return [Aval(tuple(1 if i in shared else n for i, n in enumerate(x.shape)), x.dtype)]


register(OpDef(
    name="_dropout_mask", kernel=_dropout_mask, infer=_mask_infer,
    grad=None, kind=Kind.OPAQUE, pure=False, needs_context=True,
    attrs={"p": Attr("float", 0.5, low=0, high=1),
           "mode": Attr("str", "training", ("training", "always")),
           "axes": Attr("shape", ())},
    doc="Training: 0 with probability ``p``, else ``1 / (1 - p)``. Prediction: all ones."))


def _batch_norm(x, gamma, beta, moving_mean, moving_var, *, eps, momentum, fix_gamma,
                use_global_stats, output_mean_var, axis, cudnn_off, rt: RunContext):
    """Normalise each channel along ``axis``: with the moving statistics when predicting
    (or ``use_global_stats``), with the batch's own while training."""
    along = [1] * x.ndim
    along[axis % x.ndim] = -1  # a per-channel vector, broadcast along the channel axis
    if rt.training and not use_global_stats:
        others = tuple(i for i in range(x.ndim) if i != axis % x.ndim)
        mean, var = x.mean(axis=others), x.var(axis=others)
    else:
        mean, var = moving_mean, moving_var
    scale = (np.ones_like(gamma) if fix_gamma else gamma) / np.sqrt(var + eps)
    out = (x - mean.reshape(along)) * scale.reshape(along) + beta.reshape(along)
    return out.astype(x.dtype, copy=False)


def _batch_norm_infer(x: Aval, *stats: Aval, axis: int, **unused: Any) -> list[Aval]:
    """The data's aval; each of gamma, beta and the moving statistics must hold one value
    per channel along ``axis`` (a running_var of another shape would broadcast silently)."""
    channels = x.shape[axis % len(x.shape)] if x.shape else 0
    for name, stat in zip(("gamma", "beta", "moving_mean", "moving_var"), stats):
        if tuple(stat.shape) != (channels,):
            raise ShapeError(f"BatchNorm: {name} has shape {tuple(stat.shape)}, but the data "
                             f"{tuple(x.shape)} has {channels} channels along axis {axis}: "
                             f"it needs shape ({channels},)")
    return [x]


register(OpDef(
    name="BatchNorm", kernel=_batch_norm, infer=_batch_norm_infer, kind=Kind.OPAQUE,
    needs_context=True, inputs=("data", "gamma", "beta", "moving_mean", "moving_var"),
    attrs={"eps": Attr("float", 1e-3), "momentum": Attr("float", 0.9),
           "fix_gamma": Attr("bool", True), "use_global_stats": Attr("bool", False),
           "output_mean_var": Attr("bool", False), "axis": Attr("int", 1),
           "cudnn_off": Attr("bool", False)},
    grad=None, grad_missing="BatchNorm as read from an MXNet file runs forward only (its "
    "moving statistics are auxiliary states it does not update here); to train, build the "
    "network with gluon.nn.BatchNorm, whose layer computes and updates them",
    doc="MXNet's BatchNorm as files written by MXNet hold it: per channel along ``axis``, "
        "``(x - mean) / sqrt(var + eps) * gamma + beta``; the moving statistics when "
        "predicting, the batch's while training (``fix_gamma``: gamma taken as 1)."))


@composite("Dropout")
def dropout(F, data, p=0.5, mode="training", axes=(), cudnn_off=False, name=None):
    """Zero each element with probability ``p`` while training, scaling the rest by 1/(1-p).

    ``axes``: drop whole slices, sharing one draw along these axes (variational dropout).
    ``cudnn_off`` (in files written by MXNet) changes nothing on a CPU.
    """
    mask = F._dropout_mask(data, p=p, mode=mode, axes=axes)
    return F.broadcast_mul(data, mask, name=name)
