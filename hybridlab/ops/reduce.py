"""Reductions (``sum``, ``mean``, ``max``, ...) and the softmax family.

What this module teaches
------------------------
A reduction collapses axes. Its gradient does the opposite: it spreads the output
gradient back over the collapsed axes (``_unreduce``). ``max``/``min`` send it only to
the elements that won; ``mean`` divides it by the number of elements averaged.

``softmax`` and ``log_softmax`` are layer operators (one node in a graph, lowered by
the compiler to the ops below): subtracting the row maximum before
``exp`` keeps every exponent <= 0, so nothing overflows -- the classic stability trick,
written with registry ops so its gradient comes for free.

Invariants (MXNet semantics)
----------------------------
* ``axis`` is an int, a tuple of ints or None (all axes); ``exclude=True`` reduces over
  every axis *not* listed.
* A reduction to a single number has shape ``(1,)``, never ``()``: MXNet 1.x has no 0-d
  arrays.
* ``argmax``/``argmin`` return indices as floats in the input's dtype, as MXNet does.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from hybridlab.errors import ShapeError
from hybridlab.ops import _infer
from hybridlab.ops.registry import Attr, Aval, Kind, OpDef, composite, register, register_layer

_AXIS_ATTRS = {"axis": Attr("axis", None), "keepdims": Attr("bool", False),
               "exclude": Attr("bool", False)}


def reduced_axes(op_name: str, shape: tuple[int, ...], axis: Any, exclude: bool = False) -> Any:
    """The sorted, non-negative axes that ``axis`` names in an array of ``shape``."""
    ndim = len(shape)
    everything = axis is None or axis == ()  # MXNet: axis=() also means all axes
    listed = range(ndim) if everything else (axis,) if isinstance(axis, int) else axis
    for a in listed:
        if not -ndim <= a < ndim:
            raise ShapeError(f"{op_name}: axis {a} is out of range for an input of shape "
                             f"{shape} ({ndim} dimensions: use -{ndim} .. {ndim - 1})")
    axes = sorted({a % ndim for a in listed})
    return tuple(a for a in range(ndim) if a not in axes) if exclude else tuple(axes)


def reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> Any:
    """The shape after reducing ``axes``; ``(1,)`` instead of ``()`` (MXNet semantics)."""
    if keepdims:
        return tuple(1 if i in axes else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in axes) or (1,)


def _reduction(name: str, numpy_fn: Any, grad: Any, doc: str, aliases: Any = (),
               writes_out: bool = False, extra: dict[str, Attr] | None = None) -> OpDef:
    """``writes_out``: ``numpy_fn`` takes ``out=`` and gives the same numbers with it (so
    the op gets a ``kernel_out``, and the compiler may place its result). ``extra``: more
    attributes, passed on to ``numpy_fn`` (``norm``'s ``ord``)."""
    def infer(x: Aval, axis: Any, keepdims: bool, exclude: bool, **more: Any) -> list[Aval]:
        axes = reduced_axes(name, x.shape, axis, exclude)
        dtype = np.dtype(more.get("out_dtype") or x.dtype)
        return [Aval(reduced_shape(x.shape, axes, keepdims), dtype)]

    def kernel(x: np.ndarray, axis: Any, keepdims: bool, exclude: bool, **more: Any
               ) -> np.ndarray:
        axes = reduced_axes(name, x.shape, axis, exclude)
        out = numpy_fn(x, axis=axes, keepdims=keepdims, **more)
        x_dtype = more.get("out_dtype") or x.dtype
        shape = reduced_shape(x.shape, axes, keepdims)
        result: np.ndarray = np.asarray(out, x_dtype).reshape(shape)
        return result

    def kernel_out(x: np.ndarray, out: np.ndarray, axis: Any, keepdims: bool, exclude: bool
        ) -> np.ndarray:
        axes = reduced_axes(name, x.shape, axis, exclude)
        kept = np.reshape(out, reduced_shape(x.shape, axes, True), copy=False)  # a view
        numpy_fn(x, axis=axes, keepdims=True, out=kept)
        return out

    return register(OpDef(name=name, kernel=kernel, infer=infer, grad=grad, kind=Kind.REDUCE,
                          kernel_out=kernel_out if writes_out else None,
                          attrs={**_AXIS_ATTRS, **(extra or {})}, aliases=aliases, doc=doc))


def _unreduce_out(g: np.ndarray, like: np.ndarray, *, out: np.ndarray, axis: Any, keepdims: bool,
                  exclude: bool, mean: bool) -> np.ndarray:
    axes = reduced_axes("_unreduce", like.shape, axis, exclude)
    spread = np.broadcast_to(g.reshape(reduced_shape(like.shape, axes, True)), like.shape)
    if not mean:
        np.copyto(out, spread)
        return out
    count = np.asarray(int(np.prod([like.shape[a] for a in axes])), g.dtype)
    # integers divide in float64, truncated into g's dtype (casting="unsafe"), like sqrt
    result: np.ndarray = np.divide(spread, count, out=out, casting="unsafe")
    return result


def _unreduce_kernel(g: np.ndarray, like: np.ndarray, **attrs: Any) -> np.ndarray:
    return _unreduce_out(g, like, out=np.empty(like.shape, g.dtype), **attrs)


register(OpDef(
    name="_unreduce", kernel=_unreduce_kernel, kernel_out=_unreduce_out,
    infer=lambda g, like, **attrs: [Aval(like.shape, g.dtype)],
    grad=lambda F, inputs, outputs, out_grads, mean, **axis: [
        (F.mean if mean else F.sum)(out_grads[0], **axis), None],
    kind=Kind.OPAQUE, inputs=("data", "like"), attrs={**_AXIS_ATTRS, "mean": Attr("bool", False)},
    doc="Spread ``data`` (a reduction of ``like``) back over the reduced axes; divide by "
        "the count if ``mean``. The VJP of ``sum`` and ``mean``.",
))


def _spread(F: Any, g: Any, x: Any, attrs: Any, mean: Any = False) -> Any:
    return F._unreduce(g, x, mean=mean, **attrs)


def _extreme_grad(F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any], **attrs: Any
        ) -> list[Any]:
    """Only the elements equal to the max (or min) receive the gradient."""
    x = inputs[0]
    winners = F.broadcast_equal(x, _spread(F, outputs[0], x, attrs))
    return [_spread(F, out_grads[0], x, attrs) * winners]


_reduction("sum", np.sum, lambda F, inputs, outputs, out_grads, **attrs: [
    _spread(F, out_grads[0], inputs[0], attrs)], "Sum over ``axis``.", ("sum_axis",),
    writes_out=True)
_reduction("mean", np.mean, lambda F, inputs, outputs, out_grads, **attrs: [
    _spread(F, out_grads[0], inputs[0], attrs, mean=True)], "Mean over ``axis``.")
_reduction("max", np.max, _extreme_grad, "Maximum over ``axis``.", ("max_axis",), True)
_reduction("min", np.min, _extreme_grad, "Minimum over ``axis``.", ("min_axis",), True)
_reduction("prod", np.prod, lambda F, inputs, outputs, out_grads, **attrs: [
    _spread(F, out_grads[0] * outputs[0], inputs[0], attrs) / inputs[0]],
    "Product over ``axis`` (its gradient divides by the input: no zeros).")
_reduction("nansum", np.nansum, lambda F, inputs, outputs, out_grads, **attrs: [
    _spread(F, out_grads[0], inputs[0], attrs) * F.broadcast_equal(inputs[0], inputs[0])],
    "Sum over ``axis``, NaNs counted as 0 (they get no gradient).")
_reduction("nanprod", np.nanprod, lambda F, inputs, outputs, out_grads, **attrs: [F.where(
    F.broadcast_equal(inputs[0], inputs[0]),
    _spread(F, out_grads[0] * outputs[0], inputs[0], attrs) / inputs[0],
    F.zeros_like(inputs[0]))], "Product over ``axis``, NaNs counted as 1.")


def _norm(x: np.ndarray, axis: Any, keepdims: bool, ord: int, out_dtype: Any) -> np.ndarray:
    if ord == 1:
        return np.sum(np.abs(x), axis, keepdims=keepdims)  # type: ignore[no-any-return]
    return np.sqrt(np.sum(x * x, axis, keepdims=keepdims))  # type: ignore[no-any-return]


def _norm_grad(F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any],
               ord: int, out_dtype: Any, **attrs: Any) -> list[Any]:
    x = inputs[0]
    if ord == 1:
        return [_spread(F, out_grads[0], x, attrs) * F.sign(x)]
    return [_spread(F, out_grads[0] / outputs[0], x, attrs) * x]


_reduction("norm", _norm, _norm_grad, "The L1 (``ord=1``) or L2 (``ord=2``, the default) norm "
           "over ``axis`` (all axes by default), in ``out_dtype`` if given.",
           extra={"ord": Attr("int", 2, (1, 2)), "out_dtype": Attr("dtype", None)})


def _arg_reduction(name: str, numpy_fn: Any, doc: str) -> OpDef:
    def infer(x: Aval, axis: Any, keepdims: bool) -> list[Aval]:
        axes = reduced_axes(name, x.shape, axis)
        return [Aval(reduced_shape(x.shape, axes, keepdims and axis is not None), x.dtype)]

    def kernel(x: np.ndarray, axis: Any, keepdims: bool) -> np.ndarray:
        shape = infer(Aval(x.shape, x.dtype), axis, keepdims)[0].shape
        result: np.ndarray = numpy_fn(x, axis=axis).astype(x.dtype).reshape(shape)
        return result

    return register(OpDef(
        name=name, kernel=kernel, infer=infer, grad=None, kind=Kind.REDUCE, doc=doc,
        attrs={"axis": Attr("index", None), "keepdims": Attr("bool", False)}))


_arg_reduction("argmax", np.argmax, "Index of the largest value along ``axis`` (as a float; "
               "no gradient).")
_arg_reduction("argmin", np.argmin, "Index of the smallest value along ``axis`` (as a float; "
               "no gradient).")


def _shift(F: Any, data: Any, axis: Any, temperature: Any) -> Any:
    """``x / temperature - max``: the largest exponent becomes 0, so ``exp`` cannot overflow."""
    scaled = data if temperature in (None, 1.0) else F._div_scalar(data, scalar=temperature)
    return F.broadcast_sub(scaled, F.max(scaled, axis=axis, keepdims=True))


def _softmax(F: Any, data: Any, length: Any = None, *, axis: Any, temperature: Any,
             dtype: Any = None, use_length: bool = False) -> Any:
    if dtype is None and _infer.known_dtype(data) == np.float16:  # MXNet's safe accumulation:
        # float16 computed in float32 (a float16 sum of 500 terms, and the gradient's
        # difference of two such sums, would lose the third digit)
        wide = _softmax(F, F.Cast(data, dtype="float32"), length, axis=axis,
                        temperature=temperature, use_length=use_length)
        return F.Cast(wide, dtype="float16")
    data = data if dtype is None else F.Cast(data, dtype=dtype)
    if use_length:  # -inf past each row's length: its exponent, and weight, is 0
        data = F.broadcast_add(data, F._length_mask(data, length, axis=axis))
    exps = F.exp(_shift(F, data, axis, temperature))
    return F.broadcast_div(exps, F.sum(exps, axis=axis, keepdims=True))


def _length_infer(x: Aval, length: Aval, axis: int) -> list[Aval]:
    if not -len(x.shape) <= axis < len(x.shape) or length.shape != tuple(
            n for i, n in enumerate(x.shape) if i != axis % len(x.shape)):
        raise ShapeError(f"softmax: length of shape {length.shape} must have data's shape "
                         f"{x.shape} without axis {axis} (one length per softmax)")
    return [x]


def _length_mask(x: np.ndarray, length: np.ndarray, axis: int) -> np.ndarray:
    at = axis % x.ndim
    positions = np.arange(x.shape[at]).reshape([-1 if i == at else 1 for i in range(x.ndim)])
    return np.where(positions < np.expand_dims(length, at), 0, -np.inf).astype(x.dtype)


register(OpDef(
    name="_length_mask", kernel=_length_mask, infer=_length_infer, kind=Kind.OPAQUE,
    grad=lambda F, inputs, outputs, out_grads, axis: [None, None], inputs=("data", "length"),
    attrs={"axis": Attr("int", -1)},
    doc="0 at the first ``length`` positions along ``axis``, -inf after (softmax's "
        "``use_length``: added to its input, it gives the positions past the length no weight)."))


def _log_softmax(F: Any, data: Any, *, axis: Any, temperature: Any, dtype: Any = None) -> Any:
    if dtype is None and _infer.known_dtype(data) == np.float16:  # as softmax's
        wide = _log_softmax(F, F.Cast(data, dtype="float32"), axis=axis, temperature=temperature)
        return F.Cast(wide, dtype="float16")
    shifted = _shift(F, data if dtype is None else F.Cast(data, dtype=dtype), axis, temperature)
    return F.broadcast_sub(shifted, F.log(F.sum(F.exp(shifted), axis=axis, keepdims=True)))


def _softmax_infer(name: str) -> Callable[..., list[Aval]]:
    def infer(x: Aval, length: Aval | None = None, *, axis: int, temperature: float | None,
              dtype: Any = None, use_length: bool = False) -> list[Aval]:
        if not -len(x.shape) <= axis < len(x.shape):
            raise ShapeError(f"{name}: axis {axis} is out of range for shape {tuple(x.shape)}")
        if length is not None:
            _length_infer(x, length, axis)
        return [x if dtype is None else Aval(x.shape, np.dtype(dtype))]
    return infer


_SOFTMAX_ATTRS = {"axis": Attr("int", -1), "temperature": Attr("any", None),
                  "dtype": Attr("dtype", None)}  # the output's (and the computation's)
register_layer("softmax", _softmax, _softmax_infer("softmax"),
               attrs={**_SOFTMAX_ATTRS, "use_length": Attr("bool", False)},
               inputs=lambda attrs: ("data", "length") if attrs["use_length"] else ("data",),
               doc="``exp(x) / sum(exp(x))`` along ``axis``, shifted by the maximum so it "
                   "never overflows; ``use_length``: only the first ``length`` values of "
                   "each row count (a layer operator: lowered by the compiler).")
register_layer("log_softmax", _log_softmax, _softmax_infer("log_softmax"), attrs=_SOFTMAX_ATTRS,
               doc="``x - log(sum(exp(x)))`` along ``axis``, stable: every exponent is <= 0 "
                   "(a layer operator: lowered by the compiler).")


@composite("softmin")
def softmin(F: Any, data: Any, axis: int = -1, temperature: Any = None, dtype: Any = None,
            name: Any = None) -> Any:
    """MXNet's ``softmin``: ``softmax(-x)`` (the smallest value gets the largest weight)."""
    return F.softmax(F.negative(data), axis=axis, temperature=temperature, dtype=dtype,
                     name=name)


@composite("SoftmaxActivation")
def softmax_activation(F: Any, data: Any, mode: str = "instance", name: Any = None) -> Any:
    """MXNet's older ``SoftmaxActivation``: ``mode='instance'`` a softmax along the last
    axis (MXNet's data seen as rows of its last axis), ``'channel'`` along axis 1."""
    if mode not in ("instance", "channel"):
        raise ValueError(f"SoftmaxActivation: mode={mode!r}; use 'instance' or 'channel'")
    return F.softmax(data, axis=1 if mode == "channel" else -1, name=name)
