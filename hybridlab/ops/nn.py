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

``Activation``, ``Dropout`` and ``BatchNorm`` are *layer operators* (``OpDef.lower``):
a graph keeps each as one node, MXNet's, so an exported file and a drawing show
``Activation(act_type='relu')``; the compiler's first pass lowers it to primitives
(``relu``; ``data * _dropout_mask(data)``; means, a square root and broadcasts).

``Dropout`` lowers to ``data * _dropout_mask(data)``. The mask op is random
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
from hybridlab.ops.registry import (
    Attr,
    Aval,
    Kind,
    OpDef,
    RunContext,
    composite,
    register,
    register_layer,
)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """``exp`` only ever sees non-positive numbers, so it cannot overflow."""
    e = np.exp(-np.abs(x))
    result: np.ndarray = np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)
    return result


register(OpDef(
    name="sigmoid", kernel=_sigmoid, infer=_infer.same_as_first, kind=Kind.ELEMENTWISE,
    grad=lambda F, inputs, outputs, out_grads: [out_grads[0] * outputs[0] * (1.0 - outputs[0])],
    inplace_ok=True,
    doc="Logistic ``1 / (1 + exp(-x))``. A primitive, not a composite: built from ``exp`` it "
        "overflows for x < -88 (float32) and its gradient becomes ``0 * inf = nan``.",
))


_SELU_ALPHA, _SELU_LAMBDA = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
_GELU_C1, _GELU_C3 = 0.7978845608028654, 0.044715  # sqrt(2/pi); MXNet's tanh approximation


def gamma_shape(x: Any, gamma: Any) -> tuple[int, ...]:
    """prelu's ``gamma`` lined up with ``x``: one slope, one per channel (axis 1), or an
    array of x's leading axes (broadcast over the rest)."""
    shape = tuple(gamma.shape)
    if len(shape) == 1 and len(x.shape) > 1 and shape[0] in (1, x.shape[1]):
        shape = (shape[0],) + (1,) * (len(x.shape) - 2)
    elif len(shape) > len(x.shape) or any(n not in (1, m) for n, m in zip(shape, x.shape)):
        raise ShapeError(f"LeakyReLU: prelu's gamma {gamma.shape} fits neither data {x.shape}'s "
                         f"channels (axis 1) nor its leading axes")
    else:
        shape += (1,) * (len(x.shape) - len(shape))
    return shape


def _leaky_relu(x: np.ndarray, gamma: np.ndarray | None = None, *, act_type: str, slope: float
                ) -> np.ndarray:
    if act_type == "prelu":  # slopes learned per channel (a gamma input, MXNet's PReLU)
        return np.where(x > 0, x, x * gamma.reshape(gamma_shape(x, gamma))  # type: ignore[union-attr]
                        ).astype(x.dtype, copy=False)
    if act_type == "gelu":
        inner = _GELU_C1 * (x + _GELU_C3 * x * x * x)
        return (0.5 * x * (1 + np.tanh(inner))).astype(x.dtype, copy=False)  # type: ignore[no-any-return]
    if act_type == "selu":
        elu = np.where(x > 0, x, _SELU_ALPHA * np.expm1(np.minimum(x, 0)))
        return (_SELU_LAMBDA * elu).astype(x.dtype, copy=False)
    negative = slope * x if act_type == "leaky" else slope * np.expm1(np.minimum(x, 0))
    return np.where(x > 0, x, negative).astype(x.dtype, copy=False)


def _prelu_grad(g: np.ndarray, x: np.ndarray, gamma: np.ndarray) -> tuple[np.ndarray, ...]:
    lined = gamma.reshape(gamma_shape(x, gamma))
    full = (1,) * (x.ndim - lined.ndim) + lined.shape  # (every axis, for the sum below)
    summed = (g * np.minimum(x, 0)).sum(axis=tuple(i for i, n in enumerate(full)
                                                   if n == 1 and x.shape[i] != 1))
    return (np.where(x > 0, g, g * lined).astype(g.dtype, copy=False),
            summed.reshape(gamma.shape).astype(gamma.dtype, copy=False))


register(OpDef(
    name="_prelu_grad", kernel=_prelu_grad, num_outputs=2, kind=Kind.OPAQUE,
    infer=lambda g, x, gamma: [Aval(x.shape, g.dtype), Aval(gamma.shape, gamma.dtype)],
    inputs=("grad", "data", "gamma"), grad=None, grad_missing="prelu has no second order",
    doc="prelu's gradients: for the data (``gamma`` where x <= 0) and for ``gamma``."))


def _leaky_relu_grad(F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any],
                     act_type: Any, slope: Any) -> list[Any]:
    x, out, g = inputs[0], outputs[0], out_grads[0]
    if act_type == "prelu":
        grads = F._prelu_grad(g, x, inputs[1])
        return [grads[0], grads[1]]
    if act_type == "gelu":  # d/dx 0.5 x (1 + t), t = tanh(c1 (x + c3 x^3))
        t = F.tanh((x + x * x * x * _GELU_C3) * _GELU_C1)
        slope_of_t = (1.0 - t * t) * (x * x * (3 * _GELU_C3) + 1.0) * _GELU_C1
        return [g * ((t + 1.0) * 0.5 + x * slope_of_t * 0.5)]
    scale = _SELU_LAMBDA if act_type == "selu" else 1.0
    negative_slope = (slope if act_type == "leaky" else out + _SELU_ALPHA * _SELU_LAMBDA
                      if act_type == "selu" else out + slope)
    return [g * F.where(x > 0, F.ones_like(x) * scale, F.zeros_like(x) + negative_slope)]


register(OpDef(
    name="LeakyReLU", kernel=_leaky_relu, grad=_leaky_relu_grad,
    infer=lambda x, gamma=None, **attrs: [x] if gamma is None or gamma_shape(x, gamma) else [],
    # opaque, not elementwise: prelu's gamma has another shape (a pass trusting "one shape"
    # would size or transpose it as the data); a missing gamma is one slope per channel
    kind=Kind.OPAQUE, inplace_ok=lambda attrs: attrs["act_type"] != "prelu",
    infer_params=lambda x, *, act_type, **_: {"gamma": x.shape[1:2]} if act_type == "prelu"
    else {},
    attrs={"act_type": Attr("str", "leaky", ("leaky", "elu", "selu", "gelu", "prelu")),
           "slope": Attr("float", 0.25)},
    inputs=lambda attrs: ("data", "gamma") if attrs["act_type"] == "prelu" else ("data",),
    doc="``x`` if x > 0, else ``slope * x`` (leaky) or ``slope * (exp(x) - 1)`` (elu); "
        "``selu`` and ``gelu`` (MXNet's tanh approximation) ignore ``slope``; ``prelu`` "
        "multiplies by a ``gamma`` input: one slope, one per channel, or per leading axes.",
))


@composite("softrelu")
def softrelu(F: Any, data: Any, name: Any = None) -> Any:
    """``log(1 + exp(x))``, computed as ``relu(x) + log1p(exp(-|x|))`` so it never overflows."""
    return F.broadcast_add(F.relu(data), F.log1p(F.exp(F.negative(F.abs(data)))), name=name)


@composite("softsign")
def softsign(F: Any, data: Any, name: Any = None) -> Any:
    """``x / (1 + |x|)``."""
    return F.broadcast_div(data, F.abs(data) + 1.0, name=name)


_ACT_TYPES = ("relu", "sigmoid", "tanh", "softrelu", "softsign")


def _activation(F: Any, data: Any, act_type: Any) -> Any:
    return getattr(F, act_type)(data)


register_layer(
    "Activation", _activation, _infer.same_as_first, Kind.ELEMENTWISE,
    attrs={"act_type": Attr("str", choices=_ACT_TYPES)},
    doc="MXNet's ``Activation(data, act_type)``: relu, sigmoid, tanh, softrelu or softsign. "
        "A layer operator: graphs keep it whole, the compiler lowers it to the op it names.")


def _dropout_mask(x: np.ndarray, p: float, mode: str, axes: Any, rt: RunContext) -> np.ndarray:
    """Ones while predicting; while training 0 with probability p, else 1 / (1 - p)."""
    shape = _mask_infer(Aval(x.shape, x.dtype), p, mode, axes)[0].shape
    if p == 0 or not (rt.training or mode == "always"):
        return np.ones(shape, x.dtype)
    if p == 1:  # as MXNet: everything dropped, scaled by 1 / (1 - p) = inf, and 0 * inf is NaN
        return np.full(shape, np.nan if x.dtype.kind == "f" else 0, x.dtype)
    keep = rt.rng.random(shape) >= p  # type: ignore[union-attr]  # (needs_context: rt has an rng)
    return (keep / (1.0 - p)).astype(x.dtype)


def _mask_infer(x: Aval, p: float, mode: str, axes: tuple[int, ...]) -> list[Aval]:
    """The mask has length 1 along ``axes``: one draw shared along them (variational)."""
    if not 0 <= p <= 1:
        raise AttributeValueError(f"Dropout: p={p} must be in [0, 1]: the probability of "
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


def _batch_norm(F: Any, data: Any, gamma: Any, beta: Any, moving_mean: Any, moving_var: Any, *,
                training: bool, eps: float, momentum: float, fix_gamma: bool,
                use_global_stats: bool, output_mean_var: bool, axis: int, cudnn_off: bool) -> Any:
    """Per channel along ``axis``: ``(x - mean) / sqrt(var + eps) * gamma + beta``, with
    the batch's statistics while training (unless ``use_global_stats``), else the moving
    ones; with ``output_mean_var`` also, one per channel, the mean used and the inverse
    standard deviation ``1 / sqrt(var + eps)`` -- MXNet's second and third outputs (the
    third is not the variance: ``var = 1 / invstd**2 - eps`` gives it back).

    Written without the data's number of dimensions, so that a graph traced without
    shapes lowers too: a (C,) statistic broadcasts along the channel axis once it is
    reshaped to (C, 1, ..., 1), one 1 per axis after the channels; a negative axis says
    how many, a positive one becomes -2 by merging the axes after the channels (reshape
    codes ``0 ... 0, -1``, which copy nothing).
    """
    def reshape(x: np.ndarray, *shape: Any) -> Any:
        return F.Reshape(x, shape=shape)  # (F.Reshape: every front end has it)

    view, at = (data, axis) if axis < 0 else (reshape(data, *(0,) * (axis + 1), -1), -2)
    ones = (1,) * (-at - 1)
    if training and not use_global_stats:
        mean = F.mean(view, axis=at, exclude=True, keepdims=True)
        var = F.mean(F.square(F.broadcast_sub(view, mean)), axis=at, exclude=True,
                     keepdims=True)
    else:
        mean, var = reshape(moving_mean, -1, *ones), reshape(moving_var, -1, *ones)
    scale = F.ones_like(gamma) if fix_gamma else gamma
    std = F.sqrt(var + eps)
    scale = F.broadcast_div(reshape(scale, -1, *ones), std)
    out = F.broadcast_add(F.broadcast_mul(F.broadcast_sub(view, mean), scale),
                          reshape(beta, -1, *ones))
    if view is not data:
        out = F.reshape_like(out, data)
    if not output_mean_var:
        return out
    return out, reshape(mean, -1), reshape(F.reciprocal(std), -1)


def variance_from_invstd(F: Any, invstd: Any, eps: float) -> Any:
    """The variance behind BatchNorm's third output, ``1 / invstd**2 - eps`` (what the
    moving variance moves towards)."""
    return F.reciprocal(F.square(invstd)) - eps


def _batch_norm_infer(x: Aval, *stats: Aval, axis: int, output_mean_var: bool,
                      **unused: Any) -> list[Aval]:
    """The data's aval (and the per-channel mean and inverse std with ``output_mean_var``);
    gamma, beta and the moving statistics must hold one value per channel along ``axis``
    (a running_var of another shape would broadcast silently)."""
    if not -len(x.shape) <= axis < len(x.shape):
        raise ShapeError(f"BatchNorm: axis={axis} is the channel axis, but the data has "
                         f"shape {tuple(x.shape)}; give (batch, channels, ...) data")
    channels = x.shape[axis % len(x.shape)]
    for name, stat in zip(("gamma", "beta", "moving_mean", "moving_var"), stats):
        if tuple(stat.shape) != (channels,):
            raise ShapeError(f"BatchNorm: {name} has shape {tuple(stat.shape)}, but the data "
                             f"{tuple(x.shape)} has {channels} channels along axis {axis}: "
                             f"it needs shape ({channels},)")
    per_channel = Aval((channels,), x.dtype)
    return [x, per_channel, per_channel] if output_mean_var else [x]


register_layer(
    "BatchNorm", _batch_norm, _batch_norm_infer, needs_context=True, moves_statistics=True,
    inputs=("data", "gamma", "beta", "moving_mean", "moving_var"),
    num_outputs=lambda attrs: 3 if attrs["output_mean_var"] else 1,
    infer_params=lambda data, axis, **unused: {
        name: (data.shape[axis % len(data.shape)],)
        for name in ("gamma", "beta", "moving_mean", "moving_var")},
    attrs={"eps": Attr("float", 1e-3), "momentum": Attr("float", 0.9),
           "fix_gamma": Attr("bool", True), "use_global_stats": Attr("bool", False),
           "output_mean_var": Attr("bool", False), "axis": Attr("int", 1),
           "cudnn_off": Attr("bool", False)},
    doc="MXNet's BatchNorm: per channel along ``axis``, ``(x - mean) / sqrt(var + eps) * "
        "gamma + beta`` -- the batch's statistics while training, the moving ones (auxiliary "
        "states) when predicting or with ``use_global_stats``; ``fix_gamma`` takes gamma as "
        "1. The operator returns the statistics it used (``output_mean_var``); run "
        "imperatively while training it moves ``moving_mean``/``moving_var`` in place, as "
        "MXNet's does (in a compiled graph ``gluon.nn.BatchNorm`` moves them from the outputs).")


def _dropout(F: Any, data: Any, p: Any, mode: Any, axes: Any, cudnn_off: Any) -> Any:
    """``data * mask``: the mask op decides at run time whether to drop (see above)."""
    return F.broadcast_mul(data, F._dropout_mask(data, p=p, mode=mode, axes=axes))


def _dropout_infer(x: Aval, p: float, mode: str, axes: tuple[int, ...],
                   cudnn_off: bool) -> list[Aval]:
    _mask_infer(x, p, mode, axes)  # checks p
    return [x]


register_layer(
    "Dropout", _dropout, _dropout_infer, pure=False,
    attrs={"p": Attr("float", 0.5, low=0, high=1),
           "mode": Attr("str", "training", ("training", "always")),
           "axes": Attr("shape", ()), "cudnn_off": Attr("bool", False)},
    doc="Zero each element with probability ``p`` while training, scaling the rest by "
        "1/(1-p); ``axes`` drops whole slices, one draw shared along them (variational "
        "dropout); ``cudnn_off`` (in files written by MXNet) changes nothing on a CPU.")


# --- SoftmaxOutput: what classic MXNet networks end in ----------------------------------
def _class_axis(x: np.ndarray, multi_output: bool, preserve_shape: bool) -> np.ndarray:
    """The scores as (rows, classes, ...): classes on axis 1 (``multi_output``), on the
    last axis (``preserve_shape``), else everything after the batch axis."""
    if multi_output:
        return x
    if preserve_shape:
        return np.moveaxis(x, -1, 1)
    return x.reshape(len(x), -1)


def _softmax_output(data: np.ndarray, label: np.ndarray, *, multi_output: bool,
                    preserve_shape: bool, **unused: Any) -> np.ndarray:
    x = _class_axis(data, multi_output, preserve_shape)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    p = np.moveaxis(p, 1, -1) if preserve_shape and not multi_output else p
    result: np.ndarray = p.reshape(data.shape).astype(data.dtype, copy=False)
    return result


def _softmax_output_grad(prob: np.ndarray, label: np.ndarray, *, grad_scale: float,
                         ignore_label: float, multi_output: bool, use_ignore: bool,
                         preserve_shape: bool, normalization: str, smooth_alpha: float,
                         **unused: Any) -> np.ndarray:
    """``(softmax - one_hot(label)) * grad_scale``, normalised: the cross-entropy gradient,
    whatever gradient arrives from above (MXNet's rule: the loss is built in)."""
    if label.shape == prob.shape and label.size != label.shape[0]:  # soft labels:
        return ((prob - label) * grad_scale).astype(prob.dtype, copy=False)  # type: ignore[no-any-return]
    p = _class_axis(prob, multi_output, preserve_shape)
    classes = p.shape[1]
    labels = label.reshape(p.shape[:1] + p.shape[2:]).astype(np.int64)
    target = np.moveaxis(np.eye(classes, dtype=prob.dtype)[np.clip(labels, 0, classes - 1)],
                         -1, 1)
    if smooth_alpha:
        target = target * (1 - smooth_alpha) + (1 - target) * smooth_alpha / (classes - 1)
    grad = p - target
    valid = np.ones(labels.shape, bool)
    if use_ignore:
        valid = labels != int(ignore_label)
        grad = grad * np.expand_dims(valid, 1)
    scale = grad_scale / {"null": 1, "batch": len(p),
                          "valid": max(int(valid.sum()), 1)}[normalization]
    if multi_output and normalization != "valid":  # MXNet also divides by the positions
        scale /= max(int(np.prod(p.shape[2:])), 1)  # per row (H*W) unless it counts valid
    grad = grad * scale
    grad = np.moveaxis(grad, 1, -1) if preserve_shape and not multi_output else grad
    result: np.ndarray = grad.reshape(prob.shape).astype(prob.dtype, copy=False)
    return result


def _label_shape(data: Aval, multi_output: bool, preserve_shape: bool) -> tuple[int, ...]:
    shape = tuple(data.shape)
    if multi_output:
        return shape[:1] + shape[2:]
    return shape[:-1] if preserve_shape else shape[:1]


def _softmax_output_infer(data: Aval, label: Aval, multi_output: bool, preserve_shape: bool,
                          **unused: Any) -> list[Aval]:
    wanted = _label_shape(data, multi_output, preserve_shape)
    soft = tuple(label.shape) == tuple(data.shape)  # a probability per class (MXNet too)
    if len(data.shape) < 2 or (int(np.prod(label.shape)) != int(np.prod(wanted)) and not soft):
        raise ShapeError(f"SoftmaxOutput: data {tuple(data.shape)} needs (batch, classes, "
                         f"...) scores and a label of shape {wanted} (one class index per "
                         f"row), got label {tuple(label.shape)}")
    return [data]


_SOFTMAX_OUTPUT_ATTRS = {
    "grad_scale": Attr("float", 1.0), "ignore_label": Attr("float", -1.0),
    "multi_output": Attr("bool", False), "use_ignore": Attr("bool", False),
    "preserve_shape": Attr("bool", False),
    "normalization": Attr("str", "null", ("null", "batch", "valid")),
    "out_grad": Attr("bool", False), "smooth_alpha": Attr("float", 0.0, low=0, high=1)}

register(OpDef(
    name="SoftmaxOutput", kernel=_softmax_output, infer=_softmax_output_infer,
    grad=lambda F, inputs, outputs, out_grads, **attrs: [
        F._softmax_output_grad(outputs[0], inputs[1], **attrs), None],
    kind=Kind.OPAQUE, inputs=("data", "label"), attrs=_SOFTMAX_OUTPUT_ATTRS,
    aliases=("Softmax",),
    infer_params=lambda data, multi_output, preserve_shape, **unused: {
        "label": _label_shape(data, multi_output, preserve_shape)},
    doc="The softmax of the scores (classes on axis 1, or the last with ``preserve_shape``) "
        "whose gradient is the cross-entropy's, ``(softmax - one_hot(label)) * grad_scale``, "
        "whatever arrives from above: the loss is built into the output layer, as in the "
        "networks classic MXNet trained with ``Module``."))

register(OpDef(
    name="_softmax_output_grad", kernel=_softmax_output_grad,
    infer=lambda prob, label, **attrs: [prob], kind=Kind.OPAQUE, inputs=("prob", "label"),
    attrs=_SOFTMAX_OUTPUT_ATTRS, grad=None,
    grad_missing="the second derivative of SoftmaxOutput is not written",
    doc="SoftmaxOutput's gradient from its output and the labels (backward only)."))


# NOTE [LRN by a window sum] Local response normalisation divides each value by a power of
# the sum of squares over ``nsize`` neighbouring channels. The one new kernel is that
# channel-window sum; it is its own adjoint (a symmetric box filter with zero padding), so
# its gradient is itself and LRN is a layer operator over primitives: no second formula.
def _channel_window_sum(x: np.ndarray, nsize: int) -> np.ndarray:
    half = nsize // 2
    padded = np.zeros((x.shape[0], x.shape[1] + 2 * half + 1, *x.shape[2:]), x.dtype)
    np.cumsum(x, axis=1, out=padded[:, half + 1:half + 1 + x.shape[1]])
    padded[:, half + 1 + x.shape[1]:] = padded[:, half + x.shape[1]:half + 1 + x.shape[1]]
    return padded[:, nsize:nsize + x.shape[1]] - padded[:, :x.shape[1]]


def _window_infer(x: Aval, nsize: int) -> list[Aval]:
    if len(x.shape) < 2:
        raise ShapeError(f"LRN needs data with a channel axis (N, C, ...), got {x.shape}")
    if nsize % 2 == 0:
        raise ShapeError(f"LRN: nsize={nsize} must be odd, so the window is centred on each "
                         f"channel (as ONNX and MXNet's GPU kernel require)")
    return [x]


register(OpDef(
    name="_channel_window_sum", kernel=_channel_window_sum, infer=_window_infer,
    kind=Kind.OPAQUE, attrs={"nsize": Attr("int", low=1)},
    grad=lambda F, inputs, outputs, out_grads, nsize: [
        F._channel_window_sum(out_grads[0], nsize=nsize)],
    doc="Sum over ``nsize`` neighbouring channels (axis 1, zero beyond the edges); "
        "NOTE [LRN by a window sum]."))


def _lrn(F: Any, data: Any, alpha: float, beta: float, knorm: float, nsize: int) -> Any:
    window = F._channel_window_sum(F.square(data), nsize=nsize)
    return data * (window * (alpha / nsize) + knorm) ** (-beta)


register_layer(
    "LRN", _lrn, lambda x, **attrs: _window_infer(x, attrs["nsize"]), Kind.OPAQUE,
    attrs={"alpha": Attr("float", 1e-4), "beta": Attr("float", 0.75),
           "knorm": Attr("float", 2.0), "nsize": Attr("int", low=1)},
    doc="MXNet's local response normalisation across channels: ``x / (knorm + alpha / "
        "nsize * sum of x**2 over nsize channels) ** beta`` (ONNX's LRN with bias=knorm).")
