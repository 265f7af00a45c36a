"""MXNet 1.x's ``linalg`` operators: ``gemm2``, the Cholesky factorisation ``potrf`` and the LQ
factorisation ``gelqf``.

What this module teaches
------------------------
Most operators cannot fail on their *data*: a shape is checked when the op is pushed, so
an ``add`` that was accepted will run. A factorisation is different. ``potrf`` computes
the lower-triangular ``L`` with ``A = L L^T``, which exists only when ``A`` is symmetric
positive definite -- something no shape rule can know. So ``nd.linalg.potrf(A)`` is
pushed and returns at once, and its failure appears later, at the sync point that needs
the result (lesson 03 shows it). Both operators work on the last two axes; leading axes
are a batch, as in MXNet (``axis=-2`` only).

``gemm2(A, B)`` is ``alpha * op(A) op(B)`` (``op`` transposes when asked). Its gradient is
again ``gemm2``. ``potrf``'s gradient needs triangular solves, so it is one internal
operator, ``_linalg_potrf_backward``, with MXNet's formula
``dA = 0.5 * L^-T copyLTU(L^T dL) L^-1`` (``copyLTU`` mirrors the lower triangle).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from hybridlab.errors import ShapeError
from hybridlab.ops.registry import Attr, Aval, Kind, OpDef, composite, register

_GEMM_ATTRS = {"transpose_a": Attr("bool", False), "transpose_b": Attr("bool", False),
               "alpha": Attr("float", 1.0), "axis": Attr("int", -2)}


def _rows(shape: tuple[int, ...], axis: int, name: str = "gemm2") -> tuple[int, ...]:
    """``shape`` with its rows' ``axis`` moved to the second-to-last place (MXNet's
    ``axis``: the matrices' rows may lie on any axis but the last, the columns')."""
    if not -len(shape) <= axis < len(shape) or axis % len(shape) == len(shape) - 1:
        raise ShapeError(f"linalg.{name}: axis={axis} must be an axis of shape {shape} other "
                         f"than the last (the columns'); the default is -2")
    return tuple(np.moveaxis(np.broadcast_to(0, shape), axis, -2).shape)


def _matrices(name: str, *avals: Aval) -> None:
    for aval in avals:
        if len(aval.shape) < 2:
            raise ShapeError(f"linalg.{name}: needs matrices (at least 2 axes), got shape "
                             f"{aval.shape}")
    batches = {aval.shape[:-2] for aval in avals}
    if len(batches) > 1:
        raise ShapeError(f"linalg.{name}: leading (batch) axes must agree, got "
                         f"{[a.shape for a in avals]}")


def _t(x: np.ndarray, flag: bool = True) -> np.ndarray:
    return np.swapaxes(x, -1, -2) if flag else x


def _work(x: np.ndarray) -> np.ndarray:
    """numpy's LAPACK has no float16: factorise in float32 (the result is cast back)."""
    return x.astype(np.float32) if x.dtype == np.float16 else x


def _gemm2_infer(a: Aval, b: Aval, *, transpose_a: bool, transpose_b: bool, alpha: float, axis: Any
        ) -> list[Aval]:
    if axis != -2:
        a, b = (Aval(_rows(x.shape, axis), x.dtype) for x in (a, b))
        out = _gemm2_infer(a, b, transpose_a=transpose_a, transpose_b=transpose_b, alpha=alpha,
                           axis=-2)[0]
        return [Aval(tuple(np.moveaxis(np.broadcast_to(0, out.shape), -2, axis).shape),
                     out.dtype)]
    _matrices("gemm2", a, b)
    rows, inner = a.shape[-1:-3:-1] if transpose_a else a.shape[-2:]
    inner2, cols = b.shape[-1:-3:-1] if transpose_b else b.shape[-2:]
    if inner != inner2:
        raise ShapeError(f"linalg.gemm2: op(A) is {rows}x{inner} but op(B) is {inner2}x{cols} "
                         f"(transpose_a={transpose_a}, transpose_b={transpose_b})")
    return [Aval((*a.shape[:-2], rows, cols), a.dtype)]


def _gemm2_grad(F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any],
                transpose_a: bool, transpose_b: bool, alpha: float, axis: int) -> list[Any]:
    """C = alpha op(A) op(B): dop(A) = alpha g op(B)^T, dop(B) = alpha op(A)^T g."""
    a, b, g = inputs[0], inputs[1], out_grads[0]
    if transpose_a:  # (the same formulas on any rows' axis: every matrix moves alike)
        grad_a = F.linalg.gemm2(b, g, transpose_a=transpose_b, transpose_b=True, alpha=alpha,
                                axis=axis)
    else:
        grad_a = F.linalg.gemm2(g, b, transpose_b=not transpose_b, alpha=alpha, axis=axis)
    if transpose_b:
        grad_b = F.linalg.gemm2(g, a, transpose_a=True, transpose_b=transpose_a, alpha=alpha,
                                axis=axis)
    else:
        grad_b = F.linalg.gemm2(a, g, transpose_a=not transpose_a, alpha=alpha, axis=axis)
    return [grad_a, grad_b]


register(OpDef(
    name="linalg_gemm2", kind=Kind.OPAQUE, inputs=("A", "B"), attrs=_GEMM_ATTRS,
    kernel=lambda a, b, transpose_a, transpose_b, alpha, axis: np.moveaxis((alpha * np.matmul(
        _t(np.moveaxis(a, axis, -2), transpose_a), _t(np.moveaxis(b, axis, -2), transpose_b))
    ).astype(a.dtype, copy=False), -2, axis),
    infer=_gemm2_infer, grad=_gemm2_grad, aliases=("linalg.gemm2",),
    doc="``alpha * op(A) op(B)`` on the last two axes (leading axes are a batch; ``axis`` "
        "puts the rows on another axis)."))


@composite("linalg_gemm", aliases=("linalg.gemm", "_linalg_gemm"))
def _gemm(F: Any, A: Any, B: Any, C: Any, transpose_a: bool = False, transpose_b: bool = False,
          alpha: float = 1.0, beta: float = 1.0, axis: int = -2, name: Any = None) -> Any:
    """``alpha * op(A) op(B) + beta * C`` (MXNet's ``linalg.gemm``; ``gemm2`` without C)."""
    product = F.linalg.gemm2(A, B, transpose_a=transpose_a, transpose_b=transpose_b,
                             alpha=alpha, axis=axis)
    return F.elemwise_add(product, F._mul_scalar(C, scalar=beta), name=name)


def _square_infer(name: str) -> Callable[..., list[Aval]]:
    def infer(a: Aval) -> list[Aval]:
        _matrices(name, a)
        if a.shape[-1] != a.shape[-2]:
            raise ShapeError(f"linalg.{name}: needs square matrices, got shape {a.shape}")
        return [Aval(a.shape, a.dtype)]
    return infer


def _potrf(a: np.ndarray) -> np.ndarray:
    """Lower Cholesky factor; raises when ``a`` is not symmetric positive definite.

    It factorises the symmetric part ``(A + A^T) / 2`` -- ``A`` itself for the symmetric
    matrices it is meant for -- so that its value and its (symmetric) gradient agree for
    any input, instead of silently ignoring the upper triangle.
    """
    try:
        return np.linalg.cholesky(0.5 * (_work(a) + _t(_work(a)))).astype(a.dtype, copy=False)
    except np.linalg.LinAlgError:
        raise ValueError("linalg.potrf: the matrix is not positive definite, so it has no "
                         "Cholesky factor (check that it is symmetric with positive "
                         "eigenvalues, e.g. A = B B^T + eps I)") from None


def _potrf_backward(g: np.ndarray, lower_in: np.ndarray) -> np.ndarray:
    lower = _work(lower_in)
    product = np.tril(_t(lower) @ g)
    mirrored = product + _t(np.tril(product, -1))  # copyLTU: symmetric from the lower part
    eye = np.broadcast_to(np.eye(lower.shape[-1], dtype=lower.dtype), lower.shape)
    inverse = np.linalg.solve(lower, eye)  # L^-1 (a triangular solve)
    result: np.ndarray = (0.5 * _t(inverse) @ mirrored @ inverse).astype(lower_in.dtype, copy=False)
    return result


register(OpDef(
    name="linalg_potrf", kind=Kind.OPAQUE, inputs=("A",), kernel=_potrf,
    infer=_square_infer("potrf"), aliases=("linalg.potrf",),
    grad=lambda F, inputs, outputs, out_grads: [
        F._linalg_potrf_backward(out_grads[0], outputs[0])],
    doc="The Cholesky factor ``L`` (lower triangular) with ``A = L L^T``; fails when ``A`` "
        "is not symmetric positive definite."))
register(OpDef(
    name="_linalg_potrf_backward", kind=Kind.OPAQUE, inputs=("data", "L"),
    kernel=_potrf_backward, infer=lambda g, lower: [Aval(lower.shape, lower.dtype)],
    grad=None, grad_missing="potrf's gradient has no second order in hybridlab",
    doc="``potrf``'s gradient: ``0.5 * L^-T copyLTU(L^T dL) L^-1``."))


def _gelqf_infer(a: Aval) -> list[Aval]:
    _matrices("gelqf", a)
    rows, cols = a.shape[-2:]
    if rows > cols:
        raise ShapeError(f"linalg.gelqf: needs at most as many rows as columns, got shape "
                         f"{a.shape}; factorise the transpose instead")
    return [Aval(a.shape, a.dtype), Aval((*a.shape[:-1], rows), a.dtype)]


def _gelqf(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``A = L Q``: the QR factorisation of ``A^T`` read transposed (``Q`` has orthonormal
    rows, ``L`` is lower triangular), LAPACK's signs as MXNet's ``gelqf``."""
    q, r = np.linalg.qr(_t(_work(a)))
    return _t(q).astype(a.dtype), _t(r).astype(a.dtype)


def _gelqf_backward(dq: np.ndarray, dl: np.ndarray, q_in: np.ndarray, lower_in: np.ndarray
                    ) -> np.ndarray:
    q, lower = _work(q_in), _work(lower_in)
    m = _t(lower) @ _work(dl) - _work(dq) @ _t(q)
    mirrored = np.tril(m) + _t(np.tril(m, -1))  # copyLTU
    return np.linalg.solve(_t(lower), _work(dq) + mirrored @ q).astype(q_in.dtype)


register(OpDef(
    name="_linalg_gelqf", kind=Kind.OPAQUE, inputs=("A",), kernel=_gelqf, infer=_gelqf_infer,
    num_outputs=2, aliases=("linalg.gelqf", "linalg_gelqf"),
    grad=lambda F, inputs, outputs, out_grads: [
        F._linalg_gelqf_backward(out_grads[0], out_grads[1], outputs[0], outputs[1])],
    doc="The LQ factorisation ``A = L Q`` of a wide matrix: ``(Q, L)``, ``Q`` with "
        "orthonormal rows and ``L`` lower triangular."))
register(OpDef(
    name="_linalg_gelqf_backward", kind=Kind.OPAQUE, inputs=("dQ", "dL", "Q", "L"),
    kernel=_gelqf_backward, infer=lambda dq, dl, q, lower: [Aval(q.shape, q.dtype)],
    grad=None, grad_missing="gelqf's gradient has no second order in hybridlab",
    doc="``gelqf``'s gradient: ``L^-T (dQ + copyLTU(L^T dL - dQ Q^T) Q)``."))
