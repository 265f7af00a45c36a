"""Matrix products: ``dot``, ``batch_dot``, ``FullyConnected``.

What this module teaches
------------------------
``dot`` follows MXNet: it contracts the *last* axis of ``lhs`` with the *first* axis of
``rhs`` (``np.tensordot(lhs, rhs, 1)``), so ``(B, T, K) . (K, H) -> (B, T, H)``;
``transpose_a``/``transpose_b`` reverse an operand's axes first. The gradient of a
product is again a product: for 2-D ``C = A B``, ``dA = g B^T`` and ``dB = A^T g``.
``batch_dot`` and ``FullyConnected`` write exactly that with registry ops;
``dot``'s N-D case needs axis bookkeeping, so it has one internal op per operand.

``FullyConnected`` is ``data . weight^T + bias`` with weight shape ``(num_hidden,
in_units)``. Its ``bias`` input exists only when ``no_bias=False``: the input names are
a function of the attributes.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from hybridlab.errors import ShapeError
from hybridlab.ops._infer import promote
from hybridlab.ops.registry import Attr, Aval, Kind, OpDef, register

# np.dot without its dispatcher, for plain numpy operands: NOTE [np.dot, not @] below.
# Public: the speed-up plot and the benchmark build their numpy floor with it too.
dot_c = getattr(np.dot, "_implementation", np.dot)
_TRANSPOSES = {"transpose_a": Attr("bool", False), "transpose_b": Attr("bool", False)}


def _flip(x: np.ndarray, flag: bool) -> np.ndarray:
    return x.transpose() if flag else x


def _dot_shape(a: tuple[int, ...], b: tuple[int, ...], transpose_a: bool, transpose_b: bool
               ) -> tuple[int, ...]:
    if not a or not b:
        raise ShapeError(f"dot: needs arrays with at least one axis, got shapes {a} and {b}; "
                         f"multiply by a scalar with * instead")
    a, b = (a[::-1] if transpose_a else a), (b[::-1] if transpose_b else b)
    if a[-1] != b[0]:
        raise ShapeError(
            f"dot: the last axis of lhs {a} must match the first axis of rhs {b} (after "
            f"transpose_a={transpose_a}, transpose_b={transpose_b}); if rhs is stored as "
            f"(out, in), pass transpose_b=True")
    return a[:-1] + b[1:] or (1,)


def _dot(lhs: np.ndarray, rhs: np.ndarray, transpose_a: bool, transpose_b: bool) -> np.ndarray:
    a, b = _flip(lhs, transpose_a), _flip(rhs, transpose_b)
    # np.dot contracts a's last axis with b's first when b has at most 2 axes (and skips
    # tensordot's Python-level reshaping); beyond that only tensordot has MXNet's meaning
    if b.ndim > 2:
        out = np.tensordot(a, b, 1)
        out = out.reshape(_dot_shape(lhs.shape, rhs.shape, transpose_a, transpose_b))
    else:  # already the shape _dot_shape gives, but for 1-D . 1-D (a number, MXNet: (1,))
        out = dot_c(a, b)  # NOTE [np.dot, not @]: the C function, no dispatcher
        out = np.reshape(out, (1,)) if out.ndim == 0 else out
    return out if out.dtype == lhs.dtype == rhs.dtype else _in_dtype(out, lhs, rhs)


def _in_dtype(out: np.ndarray, lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """The product in the promoted dtype (``int32 . float32`` is float32, not float64)."""
    if lhs.dtype == rhs.dtype == out.dtype:
        return out
    return out.astype(promote(lhs.dtype, rhs.dtype), copy=False)


def _dot_out(lhs: np.ndarray, rhs: np.ndarray, *, out: np.ndarray, transpose_a: bool,
             transpose_b: bool) -> np.ndarray:
    """``dot`` written into ``out``: a matrix product goes straight there (BLAS)."""
    a, b = _flip(lhs, transpose_a), _flip(rhs, transpose_b)
    if a.ndim == 2 and b.ndim == 2:
        return np.matmul(a, b, out=out, casting="unsafe")
    np.copyto(out, _dot(lhs, rhs, transpose_a, transpose_b), casting="unsafe")
    return out


def _dot_grad_lhs(g: np.ndarray, lhs: np.ndarray, rhs: np.ndarray, transpose_a: bool,
                  transpose_b: bool) -> np.ndarray:
    a, b = _flip(lhs, transpose_a), _flip(rhs, transpose_b)
    g = g.reshape(a.shape[:-1] + b.shape[1:])  # undo the (1,) of a 1-D . 1-D product
    rest = list(range(1, b.ndim))
    return _flip(np.tensordot(g, b, (list(range(a.ndim - 1, g.ndim)), rest)), transpose_a)


def _dot_grad_rhs(g: np.ndarray, lhs: np.ndarray, rhs: np.ndarray, transpose_a: bool,
                  transpose_b: bool) -> np.ndarray:
    a, b = _flip(lhs, transpose_a), _flip(rhs, transpose_b)
    g = g.reshape(a.shape[:-1] + b.shape[1:])
    lead = list(range(a.ndim - 1))
    return _flip(np.tensordot(a, g, (lead, lead)), transpose_b)


def _dot_specialise(avals: list[Aval], out: bool, *, transpose_a: bool, transpose_b: bool
        ) -> Callable[..., np.ndarray] | None:
    """2-D operands of one dtype, no transposes: ``dot_c`` itself (NOTE [Specialised
    kernels] in graph/codegen.py), called with the arrays alone (else None: ``_dot``)."""
    a, b = avals
    if transpose_a or transpose_b or len(a.shape) != 2 or len(b.shape) != 2 or a.dtype != b.dtype:
        return None
    return dot_c  # dot_c(a, b) and dot_c(a, b, out=out): the same C function


_dot.specialise = _dot_specialise  # type: ignore[attr-defined]  # asked by graph/codegen.py


register(OpDef(
    name="dot", kernel=_dot, kernel_out=_dot_out, kind=Kind.OPAQUE, inputs=("lhs", "rhs"),
    attrs=_TRANSPOSES,
    infer=lambda a, b, **t: [Aval(_dot_shape(a.shape, b.shape, **t),
                                  promote(a.dtype, b.dtype))],
    grad=lambda F, inputs, outputs, out_grads, **t: [
        F._dot_grad_lhs(out_grads[0], *inputs, **t), F._dot_grad_rhs(out_grads[0], *inputs, **t)],
    doc="Contract the last axis of ``lhs`` with the first axis of ``rhs`` (matrix product)."))
for _which, (_name, _kernel) in enumerate((("_dot_grad_lhs", _dot_grad_lhs),
                                          ("_dot_grad_rhs", _dot_grad_rhs))):
    register(OpDef(
        name=_name, kernel=_kernel, kind=Kind.OPAQUE, attrs=_TRANSPOSES,
        grad=None, grad_missing="dot's backward has no second order (FullyConnected's has: "
                                "its gradient is written with dot)",
        inputs=("data", "lhs", "rhs"),
        infer=lambda g, *operands, _which=_which, **t: [Aval(operands[_which].shape, g.dtype)],
        doc=f"``dot``'s gradient for its input {_which} (0: lhs, 1: rhs); no second order."))


def _batch_dot_shape(a: Aval, b: Aval, transpose_a: bool, transpose_b: bool) -> list[Aval]:
    sa, sb = a.shape, b.shape
    if len(sa) != 3 or len(sb) != 3:
        raise ShapeError(f"batch_dot: needs two 3-D inputs (batch, rows, cols), got {sa}, {sb}")
    n, i, k = sa[0], *(sa[:0:-1] if transpose_a else sa[1:])
    m, k2, j = sb[0], *(sb[:0:-1] if transpose_b else sb[1:])
    if n != m or k != k2:
        raise ShapeError(f"batch_dot: shapes {sa} and {sb} do not fit (transpose_a="
                         f"{transpose_a}, transpose_b={transpose_b}); batch sizes and inner "
                         f"dimensions must agree")
    return [Aval((n, i, j), promote(a.dtype, b.dtype))]


def _batch_dot_grad(F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any],
                    transpose_a: bool, transpose_b: bool) -> list[Any]:
    """The 2-D rule dA = g B^T, dB = A^T g, with the transposes folded in."""
    a, b, g = inputs[0], inputs[1], out_grads[0]
    if transpose_a:
        grad_a = F.batch_dot(b, g, transpose_a=transpose_b, transpose_b=True)
    else:
        grad_a = F.batch_dot(g, b, transpose_b=not transpose_b)
    if transpose_b:
        grad_b = F.batch_dot(g, a, transpose_a=True, transpose_b=transpose_a)
    else:
        grad_b = F.batch_dot(a, g, transpose_a=not transpose_a)
    return [grad_a, grad_b]


register(OpDef(
    name="batch_dot", kind=Kind.OPAQUE, inputs=("lhs", "rhs"), attrs=_TRANSPOSES,
    kernel=lambda a, b, transpose_a, transpose_b: _in_dtype(np.matmul(
        a.swapaxes(1, 2) if transpose_a else a, b.swapaxes(1, 2) if transpose_b else b), a, b),
    infer=_batch_dot_shape, grad=_batch_dot_grad,
    doc="One matrix product per batch entry: ``(n, i, k) . (n, k, j) -> (n, i, j)``."))


def _fc_infer(x: Aval, w: Aval, b: Aval | None = None, *, num_hidden: int, no_bias: bool,
              flatten: bool) -> list[Aval]:
    in_units = int(np.prod(x.shape[1:])) if flatten else x.shape[-1]
    if w.shape != (num_hidden, in_units) or (b is not None and b.shape != (num_hidden,)):
        raise ShapeError(
            f"FullyConnected: data {x.shape} (flatten={flatten}: {in_units} input units) needs "
            f"weight ({num_hidden}, {in_units}) and bias ({num_hidden},), got weight {w.shape}"
            f"{'' if b is None else f' and bias {b.shape}'}")
    lead = x.shape[:1] if flatten else x.shape[:-1]
    return [Aval(lead + (num_hidden,), promote(x.dtype, w.dtype))]


def _rows(x: np.ndarray, flatten: bool) -> np.ndarray:
    return x.reshape(x.shape[0], -1) if flatten and x.ndim != 2 else x


def _fc(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, *, num_hidden: int,
        no_bias: bool, flatten: bool) -> np.ndarray:
    rows = _rows(x, flatten)
    out = dot_c(rows, w.T) if rows.ndim == 2 else rows @ w.T  # NOTE [np.dot, not @]
    if out.dtype != x.dtype or x.dtype != w.dtype:  # (a hot path: skip the call if equal)
        out = _in_dtype(out, x, w)
    if b is not None:
        out += b  # out is a fresh array: add the bias in place, no second allocation
    result: np.ndarray = out
    return result


def _fc_out(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, *, out: np.ndarray,
            num_hidden: int, no_bias: bool, flatten: bool) -> np.ndarray:
    """``FullyConnected`` written into ``out``: the product, then the bias added in place."""
    np.matmul(_rows(x, flatten), w.T, out=out, casting="unsafe")
    if b is not None:
        np.add(out, b, out=out, casting="unsafe")
    return out


# NOTE: [Specialised kernels] (see graph/codegen.py) ``_fc`` handles every case -- data to
# flatten, promoted dtypes, no bias -- and pays for its tests and keyword attributes on
# every call, a visible share of a small layer's time at batch 1 (ARCHITECTURE.md,
# "Performance notes").
# When the compiler knows that the data is 2-D, that there is a bias and that every input
# has one dtype, the tests have known answers, and the program calls one of these
# instead. ``_fc`` stays the reference: a test checks that both give the same bits.
#
# NOTE: [np.dot, not @] for 2-D operands ``np.dot`` and ``@`` (``np.matmul``) compute the
# same product with the same BLAS call, but ``np.dot`` reaches BLAS with less work around
# it: faster at batch 1 for a small layer, and as fast or faster at batch 64 and 1024.
# ``np.matmul`` stays where ``np.dot`` has another meaning (N-D data) or cannot write
# into ``out`` (a dtype cast on the way). And ``np.dot`` itself first runs a
# Python-level *dispatcher* asking whether an argument overrides it
# (``__array_function__``, NEP 18); a kernel's operands are plain numpy arrays, so these
# kernels call the C function behind it, ``np.dot._implementation``: the same function,
# the same bits, without the dispatcher's Python call (measured: "Performance notes").
def _fc_2d(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = dot_c(x, w.T)
    out += b
    result: np.ndarray = out
    return result


def _fc_2d_out(x: np.ndarray, w: np.ndarray, b: np.ndarray, *, out: np.ndarray) -> np.ndarray:
    dot_c(x, w.T, out=out)  # ``out`` has the product's dtype and is C-contiguous
    np.add(out, b, out=out)
    return out


def _fc_specialise(avals: list[Aval], out: bool, *, num_hidden: int, no_bias: bool, flatten: bool
        ) -> Callable[..., np.ndarray] | None:
    """The kernel for 2-D data, a bias, and one dtype throughout (else None: ``_fc``)."""
    if no_bias or len(avals[0].shape) != 2 or any(a.dtype != avals[0].dtype for a in avals):
        return None
    return _fc_2d_out if out else _fc_2d


_fc.specialise = _fc_specialise  # type: ignore[attr-defined]  # asked by graph/codegen.py


def _fc_grad(F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any], *,
             num_hidden: int, no_bias: bool, flatten: bool) -> list[Any]:
    """dx = g . W (reshaped like x); dW = g^T . x and db = sum(g), with x, g as 2-D rows
    (with ``flatten`` the output, so g, is 2-D already: no reshape to run)."""
    x, w, g = inputs[0], inputs[1], out_grads[0]
    rows = F.Flatten(x) if flatten else F.reshape(x, shape=(-1, 0), reverse=True)
    g_rows = g if flatten else F.reshape(g, shape=(-1, 0), reverse=True)
    grads = [F.reshape_like(F.dot(g, w), x), F.dot(g_rows, rows, transpose_a=True)]
    return grads if no_bias else grads + [F.sum(g_rows, axis=0)]


def _fc_back(inputs: list[Any], outputs: list[Any], *, num_hidden: int, no_bias: bool,
             flatten: bool) -> list[Any]:
    """The output's leading sizes are the data's: its batch (``flatten``), or every axis
    but the last."""
    out, data = outputs[0], inputs[0]
    if out is None or data is None or len(out) < 1:
        return inputs
    if flatten:
        return [(out[0], *data[1:]), *inputs[1:]]
    if len(data) != len(out):
        return inputs
    return [(*out[:-1], data[-1]), *inputs[1:]]


register(OpDef(
    name="FullyConnected", kernel=_fc, kernel_out=_fc_out, infer=_fc_infer, grad=_fc_grad,
    infer_back=_fc_back,
    kind=Kind.OPAQUE,
    infer_params=lambda x, *, num_hidden, flatten, **_: {
        "weight": (num_hidden, int(np.prod(x.shape[1:])) if flatten else x.shape[-1]),
        "bias": (num_hidden,)},
    inputs=lambda attrs: ("data", "weight") if attrs["no_bias"] else ("data", "weight", "bias"),
    attrs={"num_hidden": Attr("int", low=1), "no_bias": Attr("bool", False),
           "flatten": Attr("bool", True)},
    doc="``data . weight^T + bias``; weight is ``(num_hidden, in_units)``. ``flatten=True`` "
        "first collapses every axis of data but the first; ``flatten=False`` applies to the "
        "last axis."))
