"""Elementwise and broadcasting operators: kernel, shape rule, gradient, kind.

What this module teaches
------------------------
Most of a network's operators work one element at a time. Each is one :class:`OpDef`:
a numpy kernel, a shape rule, and a gradient -- a vector-Jacobian product (VJP) written
with registry operators through ``F`` (``nd`` on the imperative tape, ``sym`` in a
backward graph). A VJP receives ``inputs``, ``outputs`` and ``out_grads`` and returns one
gradient per input; it never looks at shapes, because a Symbol may not know them yet.

Invariants
----------
* Binary tensor ops broadcast like numpy (MXNet only broadcast in ``broadcast_*`` ops;
  hybridlab broadcasts everywhere). The gradient of an input that was broadcast is
  summed back to its shape with ``sum_like`` -- the one place broadcasting shows up in
  backward.
* Kernels return exactly the dtype ``infer`` promises (the registry's kernel contract):
  ``float32 + 2.5`` stays ``float32``, ``sqrt`` of int32 is int32 (truncated, as in
  MXNet), ``int32 + float32`` is float32 (:func:`_infer.promote`), comparisons return
  0/1 in the inputs' dtype (as MXNet does), never ``bool``.
* ``ufunc`` is set only where calling the numpy ufunc *is* the kernel, so fused code may
  call it with ``out=``.
* An op whose gradient is zero almost everywhere (comparisons, ``sign``, ``floor``)
  returns ``None``: "no gradient flows here".
"""

from __future__ import annotations

from numbers import Number
from typing import Any

import numpy as np

from hybridlab.errors import ShapeError
from hybridlab.ops import _infer, registry
from hybridlab.ops.registry import Attr, Aval, Kind, OpDef, composite, register


def _sum_back(F: Any, grads: Any, inputs: list[Any]) -> list[Any]:
    """Sum each gradient back to the shape of its (possibly broadcast) input."""
    return [None if g is None else F.sum_like(g, x) for g, x in zip(grads, inputs)]


def _keep_dtype(fn: Any) -> Any:
    """``fn(a, b)`` in the promoted dtype of the inputs (``int / int`` stays int)."""
    def kernel(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        result: np.ndarray = fn(lhs, rhs)
        dtype = lhs.dtype if lhs.dtype == rhs.dtype else _infer.promote(lhs.dtype, rhs.dtype)
        return result if result.dtype == dtype else result.astype(dtype)
    return kernel


def _same_dtype(fn: Any) -> Any:
    """``fn(x)`` in x's dtype: ``sqrt`` of int32 is int32, as in MXNet (numpy gives float64)."""
    def kernel(x: np.ndarray) -> np.ndarray:
        result: np.ndarray = fn(x)
        return result if result.dtype == x.dtype else result.astype(x.dtype)
    return kernel


def _binary(name: str, fn: Any, grad: Any, aliases: Any = (), doc: str = "", ufunc: Any = None,
            kernel_out: Any = None) -> OpDef:
    def infer(a: Aval, b: Aval) -> list[Aval]:
        return _infer.broadcast(a, b, op_name=name)

    return register(OpDef(
        name=name, kernel=_keep_dtype(fn), infer=infer, grad=grad, kind=Kind.BROADCAST,
        inputs=("lhs", "rhs"), ufunc=ufunc, kernel_out=kernel_out, inplace_ok=True,
        aliases=aliases, doc=doc,
    ))


def _arith(name: str, ufunc: Any, vjp: Any, aliases: Any, doc: str) -> Any:
    """A broadcasting arithmetic op; ``vjp(F, g, lhs, rhs, out)`` gives both input grads."""
    def grad(F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any]) -> list[Any]:
        return _sum_back(F, vjp(F, out_grads[0], *inputs, outputs[0]), inputs)
    return _binary(name, ufunc, grad, aliases, doc, ufunc=ufunc)


_arith("broadcast_add", np.add, lambda F, g, a, b, out: [g, g],
       ("broadcast_plus",), "``lhs + rhs`` with broadcasting.")
_arith("broadcast_sub", np.subtract, lambda F, g, a, b, out: [g, F.negative(g)],
       ("broadcast_minus",), "``lhs - rhs`` with broadcasting.")
_arith("broadcast_mul", np.multiply, lambda F, g, a, b, out: [g * b, g * a],
       (), "``lhs * rhs`` with broadcasting.")
_arith("broadcast_div", np.divide, lambda F, g, a, b, out: [g / b, F.negative(g * out / b)],
       (), "``lhs / rhs`` with broadcasting.")
def _elemwise(name: str, ufunc: np.ufunc, vjp: Any, broadcast: str,
              aliases: tuple[str, ...]) -> None:
    """MXNet's ``elemwise_*`` (what Symbol's ``+ - * /`` call): two inputs of one shape."""
    def infer(lhs: Aval, rhs: Aval) -> list[Aval]:
        if tuple(lhs.shape) != tuple(rhs.shape):
            raise ShapeError(f"{name}: lhs {tuple(lhs.shape)} and rhs {tuple(rhs.shape)} must "
                             f"have one shape (a Symbol's + - * / do not broadcast, as in "
                             f"MXNet); use F.{broadcast}(lhs, rhs) to broadcast")
        return _infer.broadcast(lhs, rhs, op_name=name)

    register(OpDef(
        name=name, kernel=_keep_dtype(ufunc), infer=infer, kind=Kind.ELEMENTWISE,
        grad=lambda F, inputs, outputs, out_grads: vjp(F, out_grads[0], *inputs, outputs[0]),
        inputs=("lhs", "rhs"), ufunc=ufunc, inplace_ok=True, aliases=aliases,
        doc=f"``{broadcast}`` of two inputs of one shape (MXNet's {name}; Symbol's operator)."))


_elemwise("elemwise_add", np.add, lambda F, g, a, b, out: [g, g], "broadcast_add",
          ("_plus", "_Plus", "_add"))
_elemwise("elemwise_sub", np.subtract, lambda F, g, a, b, out: [g, F.negative(g)],
          "broadcast_sub", ("_minus", "_Minus", "_sub"))
_elemwise("elemwise_mul", np.multiply, lambda F, g, a, b, out: [g * b, g * a],
          "broadcast_mul", ("_mul", "_Mul"))
_elemwise("elemwise_div", np.divide, lambda F, g, a, b, out: [g / b, F.negative(g * out / b)],
          "broadcast_div", ("_div", "_Div"))

_arith("broadcast_power", np.power,
       lambda F, g, a, b, out: [g * b * a ** (b - 1.0), g * out * F.log(a)],
       ("_power", "_Power"), "``lhs ** rhs`` with broadcasting (``rhs`` grad needs lhs > 0).")
def _integers(x: Any) -> bool:
    """Is ``x`` (an NDArray, or a Symbol whose type is known) of an integer dtype?"""
    dtype = _infer.known_dtype(x)
    return dtype is not None and dtype.kind in "iu"


_arith("broadcast_mod", np.mod,  # as MXNet: an integer modulo has a zero gradient
       lambda F, g, a, b, out: [None, None] if _integers(a) and _integers(b) else [
           g, F.negative(g * F.floor(a / b))],
       ("_mod", "_Mod"), "``lhs % rhs`` (sign of ``rhs``, like Python) with broadcasting.")
_arith("broadcast_maximum", np.maximum,
       lambda F, g, a, b, out: [g * (a >= b), g * (a < b)],
       ("_maximum", "_Maximum"), "Elementwise larger of ``lhs`` and ``rhs`` (ties go to lhs).")
_arith("broadcast_minimum", np.minimum,
       lambda F, g, a, b, out: [g * (a <= b), g * (a > b)],
       ("_minimum", "_Minimum"), "Elementwise smaller of ``lhs`` and ``rhs`` (ties go to lhs).")

_COMPARISONS = {  # name -> numpy function; the result is 0/1 in the inputs' dtype
    "equal": np.equal, "not_equal": np.not_equal, "greater": np.greater,
    "greater_equal": np.greater_equal, "lesser": np.less, "lesser_equal": np.less_equal,
    "logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor,
}
for _name, _fn in _COMPARISONS.items():
    _binary(f"broadcast_{_name}", _fn, lambda F, inputs, outputs, out_grads: [None, None],
            aliases=(f"_{_name}",), doc=f"1 where ``lhs {_name} rhs`` else 0, broadcasting.",
            kernel_out=registry.ufunc_out(_fn))


def _scalar(name: str, ufunc: np.ufunc, grad: Any, doc: str, zero_grad: bool = False,
            reflected: bool = False, int_scalar: bool = True) -> OpDef:
    """``data (op) scalar`` (``scalar (op) data`` when ``reflected``) with a numpy ufunc.

    As in MXNet the scalar takes the data's dtype first (``int32 + 2.5`` adds 2). A Python
    float meeting a float array already does (numpy's NEP 50), so only integer data pays
    for the conversion; ``int_scalar=False`` keeps it a float (``2.0 ** -1`` on ints).
    """
    def operands(x: np.ndarray, scalar: float) -> tuple[Any, ...]:
        s = scalar if x.dtype.kind == "f" or not int_scalar else np.asarray(scalar, x.dtype)
        return (s, x) if reflected else (x, s)

    def kernel(x: np.ndarray, scalar: float) -> np.ndarray:
        result: np.ndarray = ufunc(*operands(x, scalar)).astype(x.dtype, copy=False)
        return result

    def kernel_out(x: np.ndarray, out: np.ndarray, scalar: float) -> np.ndarray:
        result: np.ndarray = ufunc(*operands(x, scalar), out=out, casting="unsafe")
        return result

    def vjp(F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any], scalar: Any
        ) -> list[Any]:
        return [None] if zero_grad else [grad(F, out_grads[0], inputs[0], outputs[0], scalar)]

    return register(OpDef(
        name=name, kernel=kernel, kernel_out=kernel_out, infer=_infer.same_as_first, grad=vjp,
        kind=Kind.ELEMENTWISE, attrs={"scalar": Attr("float")}, inplace_ok=True, doc=doc,
    ))


_scalar("_plus_scalar", np.add, lambda F, g, x, out, s: g, "``data + scalar``")
_scalar("_minus_scalar", np.subtract, lambda F, g, x, out, s: g, "``data - scalar``")
_scalar("_rminus_scalar", np.subtract, lambda F, g, x, out, s: F.negative(g),
        "``scalar - data``", reflected=True)
_scalar("_mul_scalar", np.multiply, lambda F, g, x, out, s: g * s, "``data * scalar``")
_scalar("_div_scalar", np.divide, lambda F, g, x, out, s: g / s, "``data / scalar``")
_scalar("_rdiv_scalar", np.divide, lambda F, g, x, out, s: F.negative(g * out / x),
        "``scalar / data``", reflected=True)
_scalar("_power_scalar", np.power, lambda F, g, x, out, s: g * s * x ** (s - 1.0),
        "``data ** scalar``")
_scalar("_rpower_scalar", np.power, lambda F, g, x, out, s: g * out * float(np.log(s)),
        "``scalar ** data`` (scalar > 0)", reflected=True, int_scalar=False)
_scalar("_mod_scalar", np.mod, lambda F, g, x, out, s: g, "``data % scalar``")
_scalar("_rmod_scalar", np.mod,
        lambda F, g, x, out, s: F.negative(g * F.floor(F._rdiv_scalar(x, scalar=s))),
        "``scalar % data``", reflected=True)
_scalar("_maximum_scalar", np.maximum, lambda F, g, x, out, s: g * (x >= s),
        "``max(data, scalar)``")
_scalar("_minimum_scalar", np.minimum, lambda F, g, x, out, s: g * (x <= s),
        "``min(data, scalar)``")
for _name, _fn in _COMPARISONS.items():
    _scalar(f"_{_name}_scalar", _fn, None, f"1 where ``data {_name} scalar`` else 0.", True)


def _unary(name: str, kernel: Any, grad: Any, doc: str, ufunc: Any = None, aliases: Any = (),
           kernel_out: Any = None) -> OpDef:
    """``grad(F, g, x, out)`` is the input's gradient; ``grad=None`` means zero."""
    def vjp(F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any]) -> list[Any]:
        return [None if grad is None else grad(F, out_grads[0], inputs[0], outputs[0])]

    return register(OpDef(
        name=name, kernel=_same_dtype(kernel), infer=_infer.same_as_first, grad=vjp,
        kind=Kind.ELEMENTWISE, inplace_ok=True, ufunc=ufunc, kernel_out=kernel_out,
        aliases=aliases, doc=doc,
    ))


_UFUNCS = {  # name -> (ufunc, VJP or None, doc)
    "negative": (np.negative, lambda F, g, x, out: F.negative(g), "``-x``"),
    "abs": (np.abs, lambda F, g, x, out: g * F.sign(x), "``|x|``"),
    "log": (np.log, lambda F, g, x, out: g / x, "natural logarithm"),
    "log2": (np.log2, lambda F, g, x, out: g / (x * float(np.log(2))), "base-2 logarithm"),
    "log10": (np.log10, lambda F, g, x, out: g / (x * float(np.log(10))), "base-10 logarithm"),
    "log1p": (np.log1p, lambda F, g, x, out: g / (x + 1.0), "``log(1 + x)``, exact for tiny x"),
    "expm1": (np.expm1, lambda F, g, x, out: g * (out + 1.0), "``e ** x - 1``, exact for tiny x"),
    "sqrt": (np.sqrt, lambda F, g, x, out: g * 0.5 / out, "square root"),
    "rsqrt": (lambda x: 1 / np.sqrt(x), lambda F, g, x, out: g * out * out * out * -0.5,
              "``1 / sqrt(x)``"),
    "square": (np.square, lambda F, g, x, out: g * x * 2.0, "``x * x``"),
    "tanh": (np.tanh, lambda F, g, x, out: g * (1.0 - out * out), "hyperbolic tangent"),
    "sin": (np.sin, lambda F, g, x, out: g * F.cos(x), "sine"),
    "cos": (np.cos, lambda F, g, x, out: F.negative(g * F.sin(x)), "cosine"),
    "reciprocal": (np.reciprocal, lambda F, g, x, out: F.negative(g * out * out), "``1 / x``"),
    "tan": (np.tan, lambda F, g, x, out: g * (1.0 + out * out), "tangent"),
    "arcsin": (np.arcsin, lambda F, g, x, out: g / F.sqrt(1.0 - x * x), "inverse sine"),
    "arccos": (np.arccos, lambda F, g, x, out: F.negative(g / F.sqrt(1.0 - x * x)),
               "inverse cosine"),
    "arctan": (np.arctan, lambda F, g, x, out: g / (1.0 + x * x), "inverse tangent"),
    "sinh": (np.sinh, lambda F, g, x, out: g * F.cosh(x), "hyperbolic sine"),
    "cosh": (np.cosh, lambda F, g, x, out: g * F.sinh(x), "hyperbolic cosine"),
    # differentiated again, this gives the true -x / (1 + x^2)^(3/2); MXNet 1.9.1's
    # second-order rule drops the minus sign (README: deviations)
    "arcsinh": (np.arcsinh, lambda F, g, x, out: g / F.sqrt(x * x + 1.0),
                "inverse hyperbolic sine"),
    "arccosh": (np.arccosh, lambda F, g, x, out: g / F.sqrt(x * x - 1.0),
                "inverse hyperbolic cosine"),
    "arctanh": (np.arctanh, lambda F, g, x, out: g / (1.0 - x * x), "inverse hyperbolic tangent"),
    "cbrt": (np.cbrt, lambda F, g, x, out: g / (out * out * 3.0), "cube root"),
    "degrees": (np.degrees, lambda F, g, x, out: g * float(180 / np.pi), "radians to degrees"),
    "radians": (np.radians, lambda F, g, x, out: g * float(np.pi / 180), "degrees to radians"),
    "sign": (np.sign, None, "-1, 0 or 1 (gradient zero)"),
    "logical_not": (np.logical_not, None, "1 where ``x`` is 0, else 0 (gradient zero)"),
    "floor": (np.floor, None, "round down (gradient zero)"),
    "ceil": (np.ceil, None, "round up (gradient zero)"),
    "round": (np.round, None, "round half to even (gradient zero)"),
}
for _name, (_ufunc, _grad, _doc) in _UFUNCS.items():
    _unary(_name, _ufunc, _grad, f"Elementwise {_doc}.",
           ufunc=_ufunc if isinstance(_ufunc, np.ufunc) else None)
def _exp_out(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    # NOTE: numpy's float32 exp (SIMD) may be 1 ulp off (exp(1) = 2.718282); computed in
    # float64 and rounded once it is MXNet's correctly rounded 2.7182817
    wide = np.float64 if x.dtype in (np.float32, np.float16) else None
    result: np.ndarray = np.exp(x, out=out, dtype=wide, casting="unsafe")
    return result


_unary("exp", lambda x: _exp_out(x, np.empty_like(x)), lambda F, g, x, out: g * out,
       "Elementwise ``e ** x``.", kernel_out=_exp_out)
_unary("_copy", np.positive, lambda F, g, x, out: g, "A copy of ``x``.", np.positive,
       ("identity",))
# A copy to another device (``x.copyto(mx.cpu(1))``; MXNet's ``_copyto``): the bytes are
# really copied, as a transfer would, and it stays its own task (opaque: never fused), so a
# Gantt chart of the engine's trace shows the copies beside the compute.
register(OpDef(name="_copyto", kernel=lambda x: np.array(x, copy=True), infer=_infer.same_as_first,
               grad=lambda F, inputs, outputs, out_grads: [out_grads[0]], kind=Kind.OPAQUE,
               doc="A copy of ``x`` on another device (``copyto``, ``as_in_context``)."))
_unary("relu", lambda x: np.maximum(x, 0, dtype=x.dtype), lambda F, g, x, out: F._relu_grad(g, x),
       "Rectified linear unit ``max(x, 0)``.", kernel_out=lambda x, out: np.maximum(x, 0, out=out))
_unary("zeros_like", np.zeros_like, None, "Zeros with the shape and dtype of ``x``.")
_unary("ones_like", np.ones_like, None, "Ones with the shape and dtype of ``x``.")


register(OpDef(
    name="clip", kernel=lambda x, a_min, a_max: np.clip(x, a_min, a_max).astype(x.dtype),
    kernel_out=lambda x, out, a_min, a_max: np.clip(x, a_min, a_max, out=out, casting="unsafe"),
    infer=_infer.same_as_first, kind=Kind.ELEMENTWISE, inplace_ok=True,
    grad=lambda F, inputs, outputs, out_grads, a_min, a_max: [
        out_grads[0] * (inputs[0] >= a_min) * (inputs[0] <= a_max)],
    attrs={"a_min": Attr("float"), "a_max": Attr("float")},
    doc="Limit values to ``[a_min, a_max]``; the gradient is zero outside.",
))
def _row_condition(c: Any, x: Any) -> tuple[int, ...]:
    """MXNet's ``where`` with a 1-D condition as long as ``x``'s first axis picks whole rows
    (numpy would match its last axis): the condition's shape, lined up with ``x``'s."""
    if len(c.shape) == 1 and len(x.shape) > 1 and c.shape[0] == x.shape[0]:
        return (c.shape[0],) + (1,) * (len(x.shape) - 1)
    return tuple(c.shape)


register(OpDef(
    name="where", kernel=lambda c, x, y: np.where(  # type: ignore[attr-defined]  # (numpy's stubs)
        c.reshape(_row_condition(c, x)) != 0, x, y).astype(_infer.promote(x.dtype, y.dtype),
                                                            copy=False),
    infer=lambda c, x, y: [Aval(_infer.broadcast(Aval(_row_condition(c, x), c.dtype), x, y,
                                                 op_name="where")[0].shape,
                                _infer.broadcast(x, y, op_name="where")[0].dtype)],
    grad=lambda F, inputs, outputs, out_grads: [None, *_sum_back(F, [
        F.where(inputs[0], out_grads[0], F.zeros_like(out_grads[0])),
        F.where(inputs[0], F.zeros_like(out_grads[0]), out_grads[0])], inputs[1:])],
    kind=Kind.BROADCAST, inputs=("condition", "x", "y"),
    doc="``x`` where ``condition`` is non-zero, else ``y`` (broadcasting). The symbolic "
        "replacement for a Python ``if`` on values.",
))


# ---------------------------------------------------------------------------------------
# Composites: written only with F.*, so they need no kernel and no gradient of their own.
# ---------------------------------------------------------------------------------------


def _is_scalar(value: float) -> bool:
    return isinstance(value, (Number, np.number))


def _front_end(name_: str, tensor_op: str, scalar_op: str, reflected_op: str, doc: str) -> Any:
    """MXNet's ``nd.maximum(lhs, rhs)`` style functions: either side may be a number."""
    def dispatch(F: Any, lhs: Any, rhs: Any, name: Any = None) -> Any:
        if _is_scalar(lhs) and _is_scalar(rhs):  # two numbers: a number, as in MXNet
            number: Any = getattr(np, _NUMPY_NAMES.get(name_, name_))(lhs, rhs).item()
            return int(number) if isinstance(number, bool) else number
        if _is_scalar(rhs):
            return getattr(F, scalar_op)(lhs, scalar=rhs, name=name)
        if _is_scalar(lhs):
            return getattr(F, reflected_op)(rhs, scalar=lhs, name=name)
        return getattr(F, tensor_op)(lhs, rhs, name=name)

    dispatch.__doc__ = doc + " Either side may be a Python number."
    composite(name_)(dispatch)


# the numpy function of a front end, for two numbers, where the names differ
_NUMPY_NAMES = {"modulo": "mod", "lesser": "less", "lesser_equal": "less_equal"}
_FRONT_ENDS = {  # front end -> (tensor op, scalar op, op for ``number (op) tensor``)
    "add": ("broadcast_add", "_plus_scalar", "_plus_scalar"),
    "subtract": ("broadcast_sub", "_minus_scalar", "_rminus_scalar"),
    "multiply": ("broadcast_mul", "_mul_scalar", "_mul_scalar"),
    "divide": ("broadcast_div", "_div_scalar", "_rdiv_scalar"),
    "power": ("broadcast_power", "_power_scalar", "_rpower_scalar"),
    "modulo": ("broadcast_mod", "_mod_scalar", "_rmod_scalar"),
    "maximum": ("broadcast_maximum", "_maximum_scalar", "_maximum_scalar"),
    "minimum": ("broadcast_minimum", "_minimum_scalar", "_minimum_scalar"),
    "equal": ("broadcast_equal", "_equal_scalar", "_equal_scalar"),
    "not_equal": ("broadcast_not_equal", "_not_equal_scalar", "_not_equal_scalar"),
    "greater": ("broadcast_greater", "_greater_scalar", "_lesser_scalar"),
    "greater_equal": ("broadcast_greater_equal", "_greater_equal_scalar", "_lesser_equal_scalar"),
    "lesser": ("broadcast_lesser", "_lesser_scalar", "_greater_scalar"),
    "lesser_equal": ("broadcast_lesser_equal", "_lesser_equal_scalar", "_greater_equal_scalar"),
    **{f"logical_{k}": (f"broadcast_logical_{k}", f"_logical_{k}_scalar",
                        f"_logical_{k}_scalar") for k in ("and", "or", "xor")},
}
for _name, (_tensor, _scalar_op, _reflected) in _FRONT_ENDS.items():
    _front_end(_name, _tensor, _scalar_op, _reflected, f"``{_name}(lhs, rhs)``.")


def _copy_into(out: np.ndarray, x: np.ndarray) -> np.ndarray:
    np.copyto(out, x, casting="unsafe")
    return out


def _cast_grad(F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any], **attrs: Any
        ) -> list[Any]:
    return [F._cast_like(out_grads[0], inputs[0])] + [None] * (len(inputs) - 1)


register(OpDef(
    name="Cast", kernel=lambda x, dtype: x.astype(dtype), grad=_cast_grad,
    kernel_out=lambda x, out, dtype: _copy_into(out, x),
    infer=lambda x, dtype: [Aval(x.shape, np.dtype(dtype))], kind=Kind.ELEMENTWISE,
    attrs={"dtype": Attr("dtype")}, aliases=("cast",), doc="Convert to ``dtype``."))
def _amp_dtype(x: Any, dtype: Any) -> Any:
    """AMP casts only between float16 and float32; other dtypes pass unchanged (as MXNet)."""
    return np.dtype(dtype) if x.dtype in (np.float16, np.float32) else np.dtype(x.dtype)


register(OpDef(
    name="amp_cast", kernel=lambda x, dtype: x.astype(_amp_dtype(x, dtype)), grad=_cast_grad,
    infer=lambda x, dtype: [Aval(x.shape, _amp_dtype(x, dtype))], kind=Kind.ELEMENTWISE,
    attrs={"dtype": Attr("dtype")},
    doc="``Cast`` for mixed precision: float16/float32 data becomes ``dtype``, any other "
        "dtype passes unchanged."))
register(OpDef(
    name="_cast_like", kernel=lambda x, like: x.astype(like.dtype), grad=_cast_grad,
    infer=lambda x, like: [Aval(x.shape, like.dtype)], kind=Kind.OPAQUE,
    inputs=("data", "like"), doc="Convert ``data`` to the dtype of ``like`` (``Cast``'s VJP)."))


def _add_n_infer(*xs: Aval, num_args: int) -> list[Aval]:
    _infer.check_count("add_n", xs, num_args)
    if len({x.shape for x in xs}) != 1:
        raise ShapeError(f"add_n: all inputs must have one shape, got {[x.shape for x in xs]}")
    return [Aval(xs[0].shape, _infer.promote(*(x.dtype for x in xs)))]


def _add_n(*xs: np.ndarray, num_args: int) -> np.ndarray:
    """One result buffer (the first input, cast: a copy), every other input added into it."""
    total = xs[0].astype(_infer.promote(*(x.dtype for x in xs)))
    for x in xs[1:]:
        np.add(total, x, out=total)
    return total


register(OpDef(
    name="add_n", kernel=_add_n, infer=_add_n_infer,
    grad=lambda F, inputs, outputs, out_grads, num_args: [out_grads[0]] * len(inputs),
    kind=Kind.ELEMENTWISE, inputs=("*args",), aliases=("ElementWiseSum",),
    attrs={"num_args": Attr("int", 0, low=0)},
    doc="The sum of any number of arrays of one shape (how gradients are accumulated)."))

# The two identities MXNet uses to shape gradients: BlockGrad passes values and stops the
# gradient; make_loss passes values and starts one (``grad_scale`` whatever comes from above).
_unary("BlockGrad", np.positive, None, "``x``, with a zero gradient (MXNet's BlockGrad).",
       np.positive, ("stop_gradient",))


def _like_rhs_infer(lhs: Aval, rhs: Aval) -> list[Aval]:
    if lhs.shape != rhs.shape:
        raise ShapeError(f"_identity_with_attr_like_rhs: lhs {lhs.shape} must have rhs's "
                         f"shape {rhs.shape} (the operator is that constraint)")
    return [lhs]


# MXNet's shape constraint: ``lhs`` itself, which must have ``rhs``'s shape, so shape
# inference learns either from the other (elementwise: one shape); only ``lhs`` has a gradient
register(OpDef(
    name="_identity_with_attr_like_rhs", kernel=lambda lhs, rhs: lhs.copy(),
    kernel_out=lambda lhs, rhs, out: _copy_into(out, lhs), infer=_like_rhs_infer,
    grad=lambda F, inputs, outputs, out_grads: [out_grads[0], F.zeros_like(inputs[1])],
    kind=Kind.ELEMENTWISE, inputs=("lhs", "rhs"),
    doc="``lhs``, constrained to ``rhs``'s shape (MXNet's shape-inference helper)."))
register(OpDef(
    name="MakeLoss", kernel=lambda x, **attrs: x.copy(), infer=_infer.same_as_first,
    grad=lambda F, inputs, outputs, out_grads, grad_scale, **unused: [
        F.ones_like(inputs[0]) * grad_scale],
    kind=Kind.OPAQUE, aliases=("make_loss",),
    attrs={"grad_scale": Attr("float", 1.0), "valid_thresh": Attr("float", 0.0),
           "normalization": Attr("str", "null", ("null", "batch", "valid"))},
    doc="``x`` as a loss: its gradient is ``grad_scale`` (ones), whatever arrives from above."))


def _relu_grad(g: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``g`` where ``x > 0``, 0 elsewhere -- and NaN where x is NaN, as MXNet's relu_grad
    (``g * (x > 0)`` would hide a NaN that reached the layer)."""
    return np.where(x > 0, g, np.where(np.isnan(x), x, 0)).astype(g.dtype, copy=False)


def _relu_grad_out(g: np.ndarray, x: np.ndarray, out: np.ndarray) -> np.ndarray:
    np.multiply(g, x > 0, out=out)  # out may be g's own buffer (inplace_ok)
    nan = np.isnan(x)
    if nan.any():
        out[nan] = np.nan
    return out


register(OpDef(
    name="_relu_grad", kernel=_relu_grad, infer=lambda g, x: [g], kind=Kind.ELEMENTWISE,
    inputs=("grad", "data"), inplace_ok=True, kernel_out=_relu_grad_out,
    # linear in ``grad``; in ``data`` its derivative is zero wherever it exists (MXNet's too)
    grad=lambda F, inputs, outputs, out_grads: [F._relu_grad(out_grads[0], inputs[1]),
                                                F.zeros_like(inputs[1])],
    doc="relu's VJP: ``grad`` where ``data > 0``, NaN where data is NaN, else 0."))


register(OpDef(
    name="cast_storage", kernel=lambda x, stype: x.copy(), infer=_infer.same_as_first,
    grad=lambda F, inputs, outputs, out_grads, stype: [out_grads[0]], kind=Kind.OPAQUE,
    attrs={"stype": Attr("str", "default", ("default",))},
    doc="MXNet's storage conversion; hybridlab stores every array dense ('default'), so "
        "this is a copy, and 'csr' or 'row_sparse' is refused."))
