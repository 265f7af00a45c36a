"""One table over the registry: every OpDef is checked the same three ways.

For each row: the kernel against a plain-numpy reference (float32 inputs), ``infer``
against the real output shape and dtype, and the gradient rule (run through the eager
namespace, so it uses registry ops only) against central differences of
``sum(output * random cotangent)`` with float64 inputs. An op without a gradient says so
in its row (``grad=False``). A new op without a row fails ``test_every_op_has_a_row``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pytest

import hybridlab as mx
from hybridlab.graph import ir
from hybridlab.ops import COMPOSITES, OPS, Aval, Kind, eager, get
from hybridlab.ops.conv_algorithms import G, winograd_filter
from hybridlab.ops.eager import Tensor


def _tanh_of_product() -> ir.Graph:
    """The sub-program of a fused group ``tanh(in0 * in1)``, as fuse_elementwise makes."""
    a, b = ir.var("in0"), ir.var("in1")
    product = ir.call("broadcast_mul", [a.out(), b.out()])
    return ir.Graph.from_outputs([ir.call("tanh", [product.out()]).out()], [a, b])


def _scan_body() -> ir.Graph:
    """A loop's step: ``new = tanh(row * state)``, the output and the next state."""
    row, state = ir.var("row"), ir.var("state")
    new = ir.call("tanh", [ir.call("broadcast_mul", [row.out(), state.out()]).out()]).out()
    return ir.Graph.from_outputs([new, new], [row, state])


def _scan_ref(data, state):
    rows = []
    for row in data:
        state = np.tanh(row * state)
        rows.append(state)
    return np.stack(rows), state


def _halving() -> tuple[ir.Graph, ir.Graph]:
    """A while_loop's cond (``sum(v) > 1``) and func (``v / 2``, no per-step output)."""
    v = ir.var("v")
    total = ir.call("sum", [v.out()])
    cond = ir.Graph.from_outputs([ir.call("_greater_scalar", [total.out()],
                                          {"scalar": 1.0}).out()], [v])
    return cond, ir.Graph.from_outputs([ir.call("_div_scalar", [v.out()],
                                                {"scalar": 2.0}).out()], [v])


def _halving_ref(v):
    for _ in range(6):
        if not v.sum() > 1:
            break
        v = v / 2
    return v


@dataclass
class Row:
    """How to test one op: input shapes, attributes, a numpy reference, a gradient."""

    op: str
    shapes: list[tuple[int, ...]]
    ref: Callable[..., Any] | None  # plain numpy; None only with ``checked_by``
    attrs: dict[str, Any] = field(default_factory=dict)
    grad: bool = True  # False: the op declares no gradient (grad=None or all None)
    low: float = -2.0  # inputs are uniform in [low, high) ...
    high: float = 2.0
    ints: dict[int, int] = field(default_factory=dict)  # ... except input i: ints in [0, n)
    checked_by: str = ""  # internal backward ops: whose gradient check exercises them
    make: Callable[[list], list] | None = None  # turns the random inputs into valid ones

    @property
    def id(self) -> str:
        return f"{self.op}-{self.attrs}" if self.attrs else self.op


def _window_sum_ref(x, nsize):
    """The sum over ``nsize`` neighbouring channels (axis 1), zero beyond the edges."""
    half = nsize // 2
    padded = np.pad(x, [(0, 0), (half, half)] + [(0, 0)] * (x.ndim - 2))
    return sum(padded[:, k:k + x.shape[1]] for k in range(nsize))


def _conv_ref(x, w, b=None, stride=(1, 1), pad=(0, 0), dilate=(1, 1)):
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    kh, kw = w.shape[2:]
    oh = (xp.shape[2] - (kh - 1) * dilate[0] - 1) // stride[0] + 1
    ow = (xp.shape[3] - (kw - 1) * dilate[1] - 1) // stride[1] + 1
    out = np.zeros((x.shape[0], w.shape[0], oh, ow), x.dtype)
    for i in range(oh):
        for j in range(ow):
            top, left = i * stride[0], j * stride[1]
            patch = xp[:, :, top:top + (kh - 1) * dilate[0] + 1:dilate[0],
                       left:left + (kw - 1) * dilate[1] + 1:dilate[1]]
            out[:, :, i, j] = np.einsum("nckl,fckl->nf", patch, w)
    return out if b is None else out + b.reshape(1, -1, 1, 1)


def _unwinograd(u):
    """The (K, C, 3, 3) filters whose transform ``G g G^T`` is ``u`` (16, K, C): G has full
    column rank, so its pseudo-inverse undoes it exactly."""
    back = np.linalg.pinv(G)
    return np.einsum("ia,abkc,jb->kcij", back, u.reshape(4, 4, *u.shape[1:]), back)


def _deconv_ref(x, w, b, stride, pad, adj):
    """Each input pixel adds ``weight`` times itself into its window of the output."""
    kh, kw = w.shape[2:]
    oh = (x.shape[2] - 1) * stride[0] + kh + adj[0]  # before the padding is cut off
    ow = (x.shape[3] - 1) * stride[1] + kw + adj[1]
    out = np.zeros((x.shape[0], w.shape[1], oh, ow))
    for i in range(x.shape[2]):
        for j in range(x.shape[3]):
            out[:, :, i * stride[0]:i * stride[0] + kh, j * stride[1]:j * stride[1] + kw] += \
                np.einsum("nc,cfkl->nfkl", x[:, :, i, j], w)
    out = out[:, :, pad[0]:oh - pad[0], pad[1]:ow - pad[1]]
    return out + b.reshape(1, -1, 1, 1)


def _pool_ref(x, kernel, stride, pad=(0, 0), reduce=np.max, fill=-np.inf, out_size=None):
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0] + 2), (pad[1], pad[1] + 2)),
                constant_values=fill)
    oh, ow = out_size or ((x.shape[2] + 2 * pad[0] - kernel[0]) // stride[0] + 1,
                          (x.shape[3] + 2 * pad[1] - kernel[1]) // stride[1] + 1)
    out = np.zeros(x.shape[:2] + (oh, ow), x.dtype)
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, :, i * stride[0]:i * stride[0] + kernel[0],
                       j * stride[1]:j * stride[1] + kernel[1]]
            out[:, :, i, j] = reduce(patch, axis=(2, 3))
    return out


def _mean_with_pad(patch, axis):
    area = patch.shape[2] * patch.shape[3]
    return np.sum(np.where(np.isinf(patch), 0, patch), axis=axis) / area


def _mean_of_real(patch, axis):
    real = ~np.isinf(patch)
    return np.sum(np.where(real, patch, 0), axis=axis) / real.sum(axis=axis)


def _scatter(shape, index, values, base=None):
    out = np.zeros(shape, values.dtype) if base is None else base.copy()
    out[index] = values
    return out


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _rnn_ref(mode, x, wi, wh, bi, bh, *rest, reverse=False, project=False, lengths=None):
    """One recurrent layer written step by step from the cell equations (MXNet's gate
    order): the reference for ``_rnn_layer``."""
    rest = list(rest)
    wr = rest.pop(0) if project else None
    h = rest.pop(0)
    c = rest.pop(0) if mode == "lstm" else None
    steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    out = np.zeros((x.shape[0], x.shape[1], h.shape[1]))
    for t in steps:
        xs, hs = x[t] @ wi.T + bi, h @ wh.T + bh
        if mode == "lstm":
            i, f, g, o = np.split(xs + hs, 4, axis=1)
            c_new = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
            h_new = _sigmoid(o) * np.tanh(c_new)
            h_new = h_new @ wr.T if project else h_new
        elif mode == "gru":
            (xr, xz, xn), (hr, hz, hn) = np.split(xs, 3, axis=1), np.split(hs, 3, axis=1)
            r, z = _sigmoid(xr + hr), _sigmoid(xz + hz)
            h_new, c_new = (1 - z) * np.tanh(xn + r * hn) + z * h, None
        else:
            h_new, c_new = (np.tanh(xs + hs) if mode == "rnn_tanh"
                            else np.maximum(xs + hs, 0)), None
        alive = np.ones((x.shape[1], 1), bool) if lengths is None else (t < lengths)[:, None]
        out[t] = np.where(alive, h_new, 0)
        h = np.where(alive, h_new, h)
        c = None if c is None else np.where(alive, c_new, c)
    return (out, h) if c is None else (out, h, c)


def _deformable_ref(x, offset, w, b):
    """A 3x3 deformable convolution (stride 1, no pad) tap by tap: each tap reads the
    bilinear mix of its four neighbours, 0 outside, the last row or column alone."""
    height, width = x.shape[2:]

    def read(n, c, h, v):
        if not (0 <= h < height and 0 <= v < width):
            return 0.0
        h0, v0 = int(np.floor(h)), int(np.floor(v))
        h1, v1 = min(h0 + 1, height - 1), min(v0 + 1, width - 1)
        a = 0.0 if h0 >= height - 1 else h - h0
        e = 0.0 if v0 >= width - 1 else v - v0
        return ((1 - a) * (1 - e) * x[n, c, h0, v0] + (1 - a) * e * x[n, c, h0, v1]
                + a * (1 - e) * x[n, c, h1, v0] + a * e * x[n, c, h1, v1])

    out = np.zeros((x.shape[0], w.shape[0], *offset.shape[2:]))
    for n, f, y, z in np.ndindex(out.shape):
        out[n, f, y, z] = b[f] + sum(
            w[f, c, i, j] * read(n, c, y + i + offset[n, 2 * (3 * i + j), y, z],
                                 z + j + offset[n, 2 * (3 * i + j) + 1, y, z])
            for c in range(x.shape[1]) for i in range(3) for j in range(3))
    return out


def _ctc_ref(data, label):
    """-log p(label) per sample by brute force: every path of T symbols (blank 0) whose
    repeats merged and blanks dropped read as the label (0 pads it)."""
    import itertools
    steps, batch, classes = data.shape
    probs = np.exp(data) / np.exp(data).sum(axis=2, keepdims=True)
    losses = []
    for n in range(batch):
        target = [int(v) for v in label[n] if v != 0]
        total = 0.0
        for path in itertools.product(range(classes), repeat=steps):
            read = [s for i, s in enumerate(path) if s != 0 and (i == 0 or s != path[i - 1])]
            if read == target:
                total += np.prod([probs[t, n, s] for t, s in enumerate(path)])
        losses.append(-np.log(total))
    return np.array(losses)


def _sequence_valid(x, lengths, axis=0):
    valid = np.arange(x.shape[axis])[:, None] < lengths[None, :]
    return valid if axis == 0 else valid.T


POS = {"low": 0.5, "high": 2.0}
B2 = [(2, 1, 3), (4, 1)]  # two shapes that broadcast to (2, 4, 3)

class _TableCube(mx.operator.CustomOp):  # the Python operator of the Custom rows
    def forward(self, is_train, req, in_data, out_data, aux):
        self.assign(out_data[0], req[0], in_data[0] ** 3)

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        self.assign(in_grad[0], req[0], 3 * in_data[0] ** 2 * out_grad[0])


@mx.operator.register("TableCube")
class _TableCubeProp(mx.operator.CustomOpProp):
    def create_operator(self, ctx, in_shapes, in_dtypes):
        return _TableCube()


ROWS: list[Row] = [
    Row("broadcast_add", B2, np.add),
    Row("broadcast_sub", B2, np.subtract),
    Row("broadcast_mul", B2, np.multiply),
    Row("broadcast_div", B2, np.divide, **POS),
    Row("broadcast_power", B2, np.power, **POS),
    Row("broadcast_mod", [(2, 3), (3,)], np.mod, **POS),
    Row("broadcast_maximum", B2, np.maximum),
    Row("broadcast_minimum", B2, np.minimum),
    Row("sum_like", [(2, 3, 4), (3, 1)], lambda x, like: x.sum(axis=(0, 2)).reshape(3, 1)),
    Row("broadcast_like", [(3, 1), (2, 3, 4)], lambda x, like: np.broadcast_to(x, like.shape)),
    Row("_plus_scalar", [(2, 3)], lambda x: x + 1.5, {"scalar": 1.5}),
    Row("_minus_scalar", [(2, 3)], lambda x: x - 1.5, {"scalar": 1.5}),
    Row("_rminus_scalar", [(2, 3)], lambda x: 1.5 - x, {"scalar": 1.5}),
    Row("_mul_scalar", [(2, 3)], lambda x: x * 1.5, {"scalar": 1.5}),
    Row("_div_scalar", [(2, 3)], lambda x: x / 1.5, {"scalar": 1.5}),
    Row("_rdiv_scalar", [(2, 3)], lambda x: 1.5 / x, {"scalar": 1.5}, **POS),
    Row("_power_scalar", [(2, 3)], lambda x: x ** 2.5, {"scalar": 2.5}, **POS),
    Row("_rpower_scalar", [(2, 3)], lambda x: 2.5 ** x, {"scalar": 2.5}),
    Row("_mod_scalar", [(2, 3)], lambda x: np.mod(x, 0.7), {"scalar": 0.7}),
    Row("_rmod_scalar", [(2, 3)], lambda x: np.mod(1.3, x), {"scalar": 1.3}, **POS),
    Row("_maximum_scalar", [(2, 3)], lambda x: np.maximum(x, 0.1), {"scalar": 0.1}),
    Row("_minimum_scalar", [(2, 3)], lambda x: np.minimum(x, 0.1), {"scalar": 0.1}),
    Row("_copy", [(2, 3)], lambda x: x.copy()),
    Row("_copyto", [(2, 3)], lambda x: x.copy()),
    Row("relu", [(2, 3)], lambda x: np.where(x > 0, x, 0)),
    Row("tan", [(2, 3)], np.tan, low=-1.0, high=1.0),
    Row("arcsin", [(2, 3)], np.arcsin, low=-0.9, high=0.9),
    Row("arccos", [(2, 3)], np.arccos, low=-0.9, high=0.9),
    Row("arctan", [(2, 3)], np.arctan),
    Row("sinh", [(2, 3)], np.sinh),
    Row("cosh", [(2, 3)], np.cosh),
    Row("arcsinh", [(2, 3)], np.arcsinh),
    Row("arccosh", [(2, 3)], np.arccosh, low=1.5, high=3.0),
    Row("arctanh", [(2, 3)], np.arctanh, low=-0.9, high=0.9),
    Row("cbrt", [(2, 3)], np.cbrt, low=0.5, high=2.0),
    Row("degrees", [(2, 3)], np.degrees),
    Row("radians", [(2, 3)], np.radians),
    Row("elemwise_add", [(2, 3), (2, 3)], np.add),
    Row("elemwise_sub", [(2, 3), (2, 3)], np.subtract),
    Row("elemwise_mul", [(2, 3), (2, 3)], np.multiply),
    Row("elemwise_div", [(2, 3), (2, 3)], np.divide, low=0.5, high=2.0),
    Row("cast_storage", [(2, 3)], lambda x: x.copy(), {"stype": "default"}),
    Row("_relu_grad", [(2, 3), (2, 3)], lambda g, x: np.where(x > 0, g, 0)),
    Row("BlockGrad", [(2, 3)], lambda x: x.copy(), grad=False),
    Row("MakeLoss", [(2, 3)], lambda x: x.copy(), grad=False),  # test_make_loss_starts_...
    Row("_identity_with_attr_like_rhs", [(2, 3), (2, 3)], lambda lhs, rhs: lhs.copy()),
    Row("sigmoid", [(2, 3)], _sigmoid),
    Row("zeros_like", [(2, 3)], np.zeros_like, grad=False),
    Row("ones_like", [(2, 3)], np.ones_like, grad=False),
    Row("clip", [(3, 4)], lambda x: np.minimum(np.maximum(x, -0.5), 0.5),
        {"a_min": -0.5, "a_max": 0.5}),
    Row("where", [(2, 3), (2, 3), (3,)], lambda c, x, y: np.where(c != 0, x, y), ints={0: 2}),
    Row("LeakyReLU", [(2, 3)], lambda x: np.where(x > 0, x, 0.25 * x)),
    Row("LeakyReLU", [(2, 3, 2), (3,)], lambda x, gamma: np.where(x > 0, x, x * gamma[:, None]),
        {"act_type": "prelu"}),
    Row("LeakyReLU", [(2, 3, 2), (2, 3)], lambda x, gamma: np.where(x > 0, x, x * gamma[..., None]),
        {"act_type": "prelu"}),
    Row("_prelu_grad", [(2, 3), (2, 3), (3,)], None, grad=False, checked_by="LeakyReLU prelu"),
    Row("LeakyReLU", [(2, 3)], lambda x: np.where(x > 0, x, 0.3 * (np.exp(x) - 1)),
        {"act_type": "elu", "slope": 0.3}),
    Row("LeakyReLU", [(2, 3)], lambda x: 1.0507009873554805 * np.where(
        x > 0, x, 1.6732632423543772 * np.expm1(x)), {"act_type": "selu"}),
    Row("LeakyReLU", [(2, 3)], lambda x: 0.5 * x * (1 + np.tanh(
        0.7978845608028654 * (x + 0.044715 * x ** 3))), {"act_type": "gelu"}),
    Row("norm", [(2, 3)], lambda x: np.abs(x).sum(axis=1), {"ord": 1, "axis": 1}),
    Row("norm", [(2, 3)], lambda x: np.sqrt((x.astype(np.float64) ** 2).sum(axis=0)),
        {"axis": 0, "out_dtype": "float64"}),
    Row("nansum", [(2, 3)], lambda x: x.sum(axis=1), {"axis": 1}),
    Row("topk", [(2, 5)], lambda x: -np.sort(-x, axis=1)[:, :2], {"k": 2, "ret_typ": "value"}),
    Row("topk", [(2, 5)], lambda x: np.argsort(x, axis=1)[:, :3].astype(np.float32),
        {"k": 3, "is_ascend": True}, grad=False),
    Row("topk", [(2, 3)], lambda x: (np.sort(x.reshape(-1))[:2], np.argsort(x.reshape(-1))[:2]),
        {"k": 2, "axis": None, "is_ascend": True, "ret_typ": "both"}),
    Row("_topk_backward", [(2, 2), (2, 5)], None, {"k": 2}, grad=False,
        checked_by="topk's gradient row"),
    Row("nanprod", [(2, 3)], lambda x: x.prod(axis=0), {"axis": 0}, low=0.5),
    # reductions
    Row("sum", [(2, 3, 4)], lambda x: x.sum(axis=(0, 2)), {"axis": (0, 2)}),
    Row("sum", [(2, 3, 4)], lambda x: x.sum(axis=1, keepdims=True), {"axis": 1, "keepdims": True}),
    Row("sum", [(2, 3, 4)], lambda x: x.sum(axis=(0, 2)), {"axis": 1, "exclude": True}),
    Row("mean", [(2, 3, 4)], lambda x: x.mean(axis=-1), {"axis": -1}),
    Row("max", [(2, 3, 4)], lambda x: x.max().reshape(1)),
    Row("max", [(2, 3, 4)], lambda x: x.max(axis=1, keepdims=True), {"axis": 1, "keepdims": True}),
    Row("min", [(2, 3, 4)], lambda x: x.min(axis=(1, 2)), {"axis": (1, 2)}),
    Row("prod", [(2, 3)], lambda x: x.prod(axis=0), {"axis": 0}, **POS),
    Row("norm", [(2, 3)], lambda x: np.sqrt((x * x).sum()).reshape(1)),
    Row("argmax", [(3, 4)], lambda x: x.argmax(axis=1).astype(x.dtype), {"axis": 1}, grad=False),
    Row("argmin", [(3, 4)], lambda x: x.argmin().astype(x.dtype).reshape(1), grad=False),
    Row("_unreduce", [(3,), (2, 3, 4)],
        lambda g, like: np.broadcast_to(g[None, :, None], like.shape),
        {"axis": (0, 2)}),
    Row("_unreduce", [(2, 1, 4), (2, 3, 4)], lambda g, like: np.broadcast_to(g, like.shape) / 3,
        {"axis": 1, "keepdims": True, "mean": True}),
    # shapes
    Row("Reshape", [(2, 3, 4)], lambda x: x.reshape(2, 12), {"shape": (0, -1)}),
    Row("Reshape", [(2, 3, 4)], lambda x: x.reshape(6, 2, 2), {"shape": (-3, -4, -1, 2)}),
    Row("Flatten", [(2, 3, 4)], lambda x: x.reshape(2, 12)),
    Row("expand_dims", [(2, 3)], lambda x: x[:, None], {"axis": 1}),
    Row("squeeze", [(2, 1, 3)], lambda x: x[:, 0], {"axis": 1}),
    Row("reshape_like", [(2, 6), (3, 4)], lambda x, like: x.reshape(3, 4)),
    Row("reshape_like", [(3, 10), (4, 2, 5)], lambda x, like: x.reshape(3, 2, 5),
        {"lhs_begin": -1, "rhs_begin": 1}),
    Row("transpose", [(2, 3, 4)], lambda x: x.transpose(1, 2, 0), {"axes": (1, 2, 0)}),
    Row("transpose", [(2, 3)], lambda x: x.T),
    Row("Concat", [(2, 3), (2, 2), (2, 1)], lambda *xs: np.concatenate(xs, 1)),
    Row("_concat_part", [(2, 5), (2, 3), (2, 2)], lambda g, a, b: g[:, 3:], {"dim": 1, "index": 1}),
    Row("SliceChannel", [(2, 6)], lambda x: tuple(np.split(x, 3, axis=1)), {"num_outputs": 3}),
    Row("SliceChannel", [(3, 2)], lambda x: tuple(x), {"num_outputs": 3, "axis": 0,
                                                       "squeeze_axis": True}),
    Row("SliceChannel", [(2, 3)], lambda x: x, {"num_outputs": 1}),  # one array, not a 1-tuple
    Row("tile", [(2, 3)], lambda x: np.tile(x, (2, 1, 2)), {"reps": (2, 1, 2)}),
    Row("_tile_grad", [(4, 3), (2, 3)], None, {"reps": (2, 1)}, checked_by="tile"),
    Row("repeat", [(2, 3)], lambda x: np.repeat(x, 2, axis=-1), {"repeats": 2, "axis": -1}),
    Row("repeat", [(2, 3)], lambda x: np.repeat(x, 3), {"repeats": 3}),
    Row("_repeat_grad", [(6,), (2, 3)], None, {"repeats": 1}, checked_by="repeat"),
    Row("Pad", [(2, 3)], lambda x: np.pad(x, ((0, 1), (2, 0)), constant_values=1.5),
        {"pad_width": (0, 1, 2, 0), "constant_value": 1.5}),
    Row("Pad", [(2, 3)], lambda x: np.pad(x, ((1, 1), (2, 2)), mode="reflect"),
        {"mode": "reflect", "pad_width": (1, 1, 2, 2)}),
    Row("Pad", [(2, 3)], lambda x: np.pad(x, ((1, 0), (0, 2)), mode="edge"),
        {"mode": "edge", "pad_width": (1, 0, 0, 2)}),
    Row("_pad_grad", [(3, 5), (2, 3)], None, {"pad_width": (0, 1, 2, 0)}, checked_by="Pad"),
    Row("slice_like", [(4, 5, 2), (3, 3)], lambda x, like: x[:3, :3], {"axes": (0, -2)}),
    Row("slice_like", [(4, 5), (3, 2)], lambda x, like: x[:3, :2]),
    Row("_slice_like_grad", [(3, 2), (4, 5)], None, checked_by="slice_like"),
    Row("split_v2", [(2, 6)], lambda x: tuple(np.split(x, [1, 4], axis=1)),
        {"indices_or_sections": (1, 4), "axis": 1}),
    Row("split_v2", [(3, 2)], lambda x: tuple(x), {"indices_or_sections": 3,
                                                  "squeeze_axis": True}),
    Row("shape_array", [(2, 3)], lambda x: np.array([2, 3]), grad=False),
    Row("size_array", [(2, 3)], lambda x: np.array([6]), grad=False),
    Row("broadcast_to", [(3, 1)], lambda x: np.broadcast_to(x, (2, 3, 4)), {"shape": (2, 0, 4)}),
    Row("broadcast_axis", [(1, 3, 1)], lambda x: np.broadcast_to(x, (2, 3, 4)),
        {"axis": (0, 2), "size": (2, 4)}),
    Row("SwapAxis", [(2, 3, 4)], lambda x: x.transpose(2, 1, 0), {"dim1": 0, "dim2": -1}),
    Row("reverse", [(2, 3, 4)], lambda x: x[::-1, :, ::-1], {"axis": (0, 2)}),
    Row("Cast", [(2, 3)], lambda x: x.astype(np.float64), {"dtype": "float64"}),
    Row("_length_mask", [(2, 4, 3), (2, 3)], lambda x, n: np.where(
        np.arange(4)[None, :, None] < n[:, None, :], 0, -np.inf), {"axis": 1}, grad=False,
        ints={1: 5}),
    Row("amp_cast", [(2, 3)], lambda x: x.astype(np.float16), {"dtype": "float16"}),
    Row("_cast_like", [(2, 3), (1,)], lambda x, like: x.astype(like.dtype)),
    # indexing
    Row("slice", [(4, 5)], lambda x: x[1:3, ::2], {"begin": (1, None), "end": (3, None),
                                                    "step": (None, 2)}),
    Row("slice_axis", [(4, 5)], lambda x: x[:, -3:], {"axis": 1, "begin": -3, "end": None}),
    Row("_slice_grad", [(2, 3), (4, 5)],
        lambda g, like: _scatter(like.shape, (slice(1, 3), slice(None, None, 2)), g),
        {"begin": (1, None), "end": (3, None), "step": (None, 2)}),
    Row("_slice_grad", [(4, 3), (4, 5)],  # slice_axis's backward: begin/end for one axis
        lambda g, like: _scatter(like.shape, (slice(None), slice(-3, None)), g),
        {"axis": 1, "begin": (-3,), "end": (None,)}),
    Row("_slice_assign", [(4, 5), (2, 3)],
        lambda x, v: _scatter(x.shape, (slice(1, 3), slice(None, None, 2)), v, x),
        {"begin": (1, None), "end": (3, None), "step": (None, 2)}),
    Row("_slice_assign_scalar", [(4, 5)],
        lambda x: _scatter(x.shape, (slice(0, 2),), np.full((2, 5), 7.0), x),
        {"scalar": 7.0, "begin": (0,), "end": (2,)}),
    Row("broadcast_like", [(1, 3), (2, 5)], lambda x, like: np.broadcast_to(x, (5, 3)),
        {"lhs_axes": (0,), "rhs_axes": (1,)}),
    Row("pick", [(3, 4), (3,)], lambda x, i: x[np.arange(3), i.astype(int)], ints={1: 4}),
    Row("_pick_grad", [(3,), (3, 4), (3,)],
        lambda g, x, i: np.eye(4)[i.astype(int)] * g[:, None], ints={2: 4}),
    Row("batch_take", [(3, 4), (3,)], lambda a, i: a[np.arange(3), i.astype(int)], ints={1: 4},
        grad=False),
    Row("take", [(5, 3), (2, 4)], lambda a, i: a[i.astype(int)], ints={1: 5}),
    Row("_take_grad", [(2, 4, 3), (5, 3), (2, 4)], None, ints={2: 5}, checked_by="take"),
    Row("one_hot", [(3,)], lambda i: np.eye(4)[i.astype(int)], {"depth": 4}, ints={0: 4},
        grad=False),
    # creation and random
    Row("_zeros", [], lambda: np.zeros((2, 3)), {"shape": (2, 3)}, grad=False),
    Row("_ones", [], lambda: np.ones((2, 3)), {"shape": (2, 3)}, grad=False),
    Row("_full", [], lambda: np.full((2, 3), 2.5), {"shape": (2, 3), "value": 2.5}, grad=False),
    Row("_eye", [], lambda: np.array([[0, 1, 0], [0, 0, 1]]), {"N": 2, "M": 3, "k": 1},
        grad=False),
    Row("_linspace", [], lambda: np.array([1.0, 1.5, 2.0, 2.5]),
        {"start": 1, "stop": 3, "num": 4, "endpoint": False}, grad=False),
    Row("_arange", [], lambda: np.array([1, 1, 3, 3, 5, 5]),
        {"start": 1, "stop": 7, "step": 2, "repeat": 2}, grad=False),
    Row("_random_normal", [], lambda: np.random.default_rng(0).normal(1, 2, (2, 3)),
        {"loc": 1, "scale": 2, "shape": (2, 3)}, grad=False),
    Row("_random_uniform", [], lambda: np.random.default_rng(0).uniform(-1, 1, (2, 3)),
        {"low": -1, "high": 1, "shape": (2, 3)}, grad=False),
    Row("_random_randint", [], lambda: np.random.default_rng(0).integers(2, 9, (5,)),
        {"low": 2, "high": 9, "shape": (5,)}, grad=False),
    Row("_random_gamma", [], lambda: np.random.default_rng(0).gamma(2, 0.5, (2, 3)),
        {"alpha": 2, "beta": 0.5, "shape": (2, 3)}, grad=False),
    Row("_random_exponential", [], lambda: np.random.default_rng(0).exponential(0.25, (2, 3)),
        {"lam": 4, "shape": (2, 3)}, grad=False),
    Row("_random_poisson", [], lambda: np.random.default_rng(0).poisson(3, (2, 3)),
        {"lam": 3, "shape": (2, 3)}, grad=False),
    Row("_random_negative_binomial", [],
        lambda: np.random.default_rng(0).negative_binomial(3, 0.4, (2, 3)),
        {"k": 3, "p": 0.4, "shape": (2, 3)}, grad=False),
    Row("_random_generalized_negative_binomial", [],
        lambda: (lambda r: r.poisson(r.gamma(1 / 0.5, 0.5 * 2, (2, 3))))(
            np.random.default_rng(0)), {"mu": 2, "alpha": 0.5, "shape": (2, 3)}, grad=False),
    Row("_shuffle", [(4, 3)], lambda x: np.random.default_rng(0).permutation(x, axis=0),
        grad=False),
    # all the mass on one category per row: every draw is that category
    Row("_sample_multinomial", [(2, 5)], lambda p: np.repeat(p.argmax(1)[:, None], 3, 1),
        {"shape": (3,)}, grad=False,
        make=lambda arrays: [np.eye(5, dtype=arrays[0].dtype)[[3, 1]]]),
    Row("_linalg_gelqf", [(2, 4, 5)], lambda a: tuple(np.swapaxes(f, -1, -2) for f in
                                                      np.linalg.qr(np.swapaxes(a, -1, -2)))),
    Row("_linalg_gelqf_backward", [(2, 3), (2, 2), (2, 3), (2, 2)], None, grad=False,
        checked_by="gelqf's row: its gradient check runs this",  # L invertible in any dtype
        make=lambda arrays: [*arrays[:3],
                             np.tril(arrays[3]) + 3 * np.eye(2, dtype=arrays[3].dtype)]),
    Row("Custom", [(2, 3)], lambda x: x ** 3, {"op_type": "TableCube"}),  # _TableCube below
    Row("_backward_Custom", [(2, 3), (2, 3), (2, 3)], lambda g, x, y: 3 * x ** 2 * g,
        {"op_type": "TableCube"}, grad=False),
    Row("_sample_unique_zipfian", [], None, {"range_max": 5, "shape": (2, 3)}, grad=False,
        checked_by="tests/test_random.py (distinct classes, and the draws they took)"),
    Row("_sample_multinomial_grad", [(2, 3), (2, 3), (2, 5)], None, grad=False,
        checked_by="tests/test_random.py (multinomial's log-probability gradient)"),
    Row("_foreach", [(4, 3), (3,)], _scan_ref,
        {"body": _scan_body(), "num_data": 1, "num_states": 1, "num_out_data": 1}),
    Row("_while_loop", [(3,)], _halving_ref, low=0.5, high=2.0, grad=False,
        attrs={"cond": _halving()[0], "func": _halving()[1], "num_vars": 1,
               "max_iterations": 6}),
    Row("_dropout_mask", [(2, 3)], np.ones_like, {"p": 0.5}, grad=False),
    Row("SoftmaxOutput", [(3, 4), (3,)], lambda x, label: _softmax(x), ints={1: 4},
        grad=False),  # its gradient is the cross-entropy's: test_softmax_output_gradient
    Row("SoftmaxOutput", [(2, 3, 2), (2, 2)], lambda x, label: _softmax(x, 1), ints={1: 3},
        attrs={"multi_output": True}, grad=False),
    Row("_softmax_output_grad", [(3, 4), (3,)], None, ints={1: 4}, grad=False,
        checked_by="test_softmax_output_gradient_is_the_cross_entropys"),
    Row("BatchNorm", [(2, 3, 4, 4), (3,), (3,), (3,), (3,)],  # predicting: moving statistics
        lambda x, g, b, m, v: (x - m[:, None, None]) / np.sqrt(v[:, None, None] + 1e-5)
        * g[:, None, None] + b[:, None, None], {"eps": 1e-5, "fix_gamma": False}, grad=False,
        make=lambda arrays: [*arrays[:4], np.abs(arrays[4]) + 0.5]),
    Row("_channel_window_sum", [(2, 5, 3)], lambda x: _window_sum_ref(x, 3), {"nsize": 3}),
    Row("LRN", [(2, 6, 2, 2)], lambda x: x / (2.0 + 0.1 / 5 * _window_sum_ref(x * x, 5)) ** 0.75,
        {"nsize": 5, "alpha": 0.1}, grad=False),  # through its lowering: test_lowering.py
    # linear algebra
    Row("dot", [(2, 3), (3, 4)], lambda a, b: a @ b),
    Row("dot", [(2, 3), (4, 3)], lambda a, b: a @ b.T, {"transpose_b": True}),
    Row("dot", [(3, 2), (3, 4)], lambda a, b: a.T @ b, {"transpose_a": True}),
    Row("dot", [(2, 3, 4), (4, 5)], lambda a, b: np.einsum("ijk,kl->ijl", a, b)),
    Row("dot", [(3,), (3, 2, 2)], lambda a, b: np.einsum("k,kij->ij", a, b)),
    Row("dot", [(3,), (3,)], lambda a, b: np.array([a @ b])),
    Row("_dot_grad_lhs", [(2, 4), (2, 3), (3, 4)], lambda g, a, b: g @ b.T, grad=False),
    Row("_dot_grad_rhs", [(2, 4), (2, 3), (3, 4)], lambda g, a, b: a.T @ g, grad=False),
    Row("linalg_gemm2", [(2, 3, 4), (2, 4, 5)], lambda a, b: 0.5 * a @ b, {"alpha": 0.5}),
    Row("linalg_gemm2", [(3, 2, 4), (4, 2, 5)],  # rows on axis 0, the batch on axis 1
        lambda a, b: np.moveaxis(np.moveaxis(a, 0, 1) @ np.moveaxis(b, 0, 1), 1, 0),
        {"axis": 0}),
    Row("linalg_gemm2", [(4, 3), (5, 4)], lambda a, b: a.T @ b.T,
        {"transpose_a": True, "transpose_b": True}),
    Row("linalg_potrf", [(2, 3, 3)], lambda a: np.linalg.cholesky(a),
        make=lambda arrays: [a @ a.transpose(0, 2, 1) + 3 * np.eye(3, dtype=a.dtype)
                             for a in arrays]),
    Row("_linalg_potrf_backward", [(2, 3, 3), (2, 3, 3)], None, grad=False,
        make=lambda arrays: [arrays[0], np.tril(arrays[1]) + 3 * np.eye(3, dtype=arrays[1].dtype)],
        checked_by="linalg_potrf"),
    Row("batch_dot", [(2, 3, 4), (2, 4, 5)], lambda a, b: a @ b),
    Row("batch_dot", [(2, 4, 3), (2, 4, 5)], lambda a, b: a.transpose(0, 2, 1) @ b,
        {"transpose_a": True}),
    Row("batch_dot", [(2, 3, 4), (2, 5, 4)], lambda a, b: a @ b.transpose(0, 2, 1),
        {"transpose_b": True}),
    Row("batch_dot", [(2, 4, 3), (2, 5, 4)],
        lambda a, b: a.transpose(0, 2, 1) @ b.transpose(0, 2, 1),
        {"transpose_a": True, "transpose_b": True}),
    Row("FullyConnected", [(2, 3, 2), (4, 6), (4,)], lambda x, w, b: x.reshape(2, 6) @ w.T + b,
        {"num_hidden": 4}),
    Row("FullyConnected", [(2, 3, 5), (4, 5)], lambda x, w: x @ w.T,
        {"num_hidden": 4, "no_bias": True, "flatten": False}),
    Row("add_n", [(2, 3)] * 3, lambda *xs: xs[0] + xs[1] + xs[2]),
    Row("_fused", [(2, 3), (2, 3)], lambda a, b: np.tanh(a * b),
        {"program": _tanh_of_product()}),
    # convolution and pooling
    Row("Convolution", [(2, 3, 5, 5), (4, 3, 3, 3), (4,)],
        lambda x, w, b: _conv_ref(x, w, b, stride=(2, 2), pad=(1, 1)),
        {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "num_filter": 4}),
    Row("Convolution", [(1, 2, 6, 5), (3, 2, 2, 2)],
        lambda x, w: _conv_ref(x, w, dilate=(2, 1)),
        {"kernel": (2, 2), "dilate": (2, 1), "num_filter": 3, "no_bias": True}),
    Row("Convolution", [(2, 3, 4, 4), (5, 3, 1, 1), (5,)],  # 1x1: the image is its matrix
        lambda x, w, b: _conv_ref(x, w, b), {"kernel": (1, 1), "num_filter": 5}),
    Row("Convolution", [(2, 4, 5, 5), (6, 2, 3, 3), (6,)],  # two groups (NOTE [Groups])
        lambda x, w, b: np.concatenate([_conv_ref(x[:, :2], w[:3], b[:3], pad=(1, 1)),
                                        _conv_ref(x[:, 2:], w[3:], b[3:], pad=(1, 1))], 1),
        {"kernel": (3, 3), "pad": (1, 1), "num_filter": 6, "num_group": 2}),
    Row("Convolution", [(1, 3, 4, 4), (3, 1, 2, 2)],  # depthwise: one group per channel
        lambda x, w: np.concatenate([_conv_ref(x[:, i:i + 1], w[i:i + 1]) for i in range(3)],
                                    1),
        {"kernel": (2, 2), "num_filter": 3, "num_group": 3, "no_bias": True}),
    # the other algorithms choose_convolutions picks (ops/conv_algorithms.py): Winograd's
    # weight input is the filter transform, so the reference recovers the 3x3 filters
    Row("_conv_winograd", [(2, 3, 5, 6), (4, 3, 3, 3), (4,)],
        lambda x, u, b: _conv_ref(x, _unwinograd(u), b, pad=(1, 1)),
        {"kernel": (3, 3), "pad": (1, 1), "num_filter": 4}, grad=False,
        make=lambda a: [a[0], winograd_filter(a[1]), a[2]]),
    Row("_conv_depthwise", [(2, 3, 6, 5), (3, 1, 3, 2), (3,)],
        lambda x, w, b: np.concatenate([_conv_ref(x[:, i:i + 1], w[i:i + 1], b[i:i + 1],
                                                  stride=(2, 1), pad=(1, 0))
                                        for i in range(3)], 1),
        {"kernel": (3, 2), "stride": (2, 1), "pad": (1, 0), "num_filter": 3, "num_group": 3},
        grad=False),
    Row("Deconvolution", [(2, 3, 3, 4), (3, 2, 3, 3), (2,)],
        lambda x, w, b: _deconv_ref(x, w, b, stride=(2, 2), pad=(1, 1), adj=(1, 0)),
        {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "adj": (1, 0), "num_filter": 2,
         "no_bias": False}),
    Row("_deconv_data_grad", [(2, 2, 6, 7), (3, 2, 3, 3)], None, grad=False,
        attrs={"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "num_filter": 2},
        checked_by="Deconvolution"),
    Row("_conv_data_grad", [(2, 4, 3, 3), (4, 3, 3, 3), (2, 3, 5, 5)], None, grad=False,
        attrs={"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "num_filter": 4},
        checked_by="Convolution"),
    Row("_conv_weight_grad", [(2, 4, 3, 3), (2, 3, 5, 5)], None, grad=False,
        attrs={"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "num_filter": 4},
        checked_by="Convolution"),
    Row("Pooling", [(2, 2, 4, 4)], lambda x: _pool_ref(x, (2, 2), (2, 2)),
        {"kernel": (2, 2), "stride": (2, 2)}),
    Row("Pooling", [(1, 2, 4, 5)], lambda x: _pool_ref(x, (3, 3), (1, 1), (1, 1), _mean_with_pad),
        {"kernel": (3, 3), "pad": (1, 1), "pool_type": "avg"}),
    Row("Pooling", [(1, 2, 4, 5)], lambda x: _pool_ref(x, (3, 3), (1, 1), (1, 1), _mean_of_real),
        {"kernel": (3, 3), "pad": (1, 1), "pool_type": "avg", "count_include_pad": False}),
    Row("Pooling", [(1, 2, 4, 5)], lambda x: _pool_ref(x, (3, 3), (1, 1), (1, 1)),
        {"kernel": (3, 3), "pad": (1, 1)}),
    Row("Pooling", [(1, 1, 5, 5)], lambda x: _pool_ref(x, (2, 2), (2, 2), out_size=(3, 3)),
        {"kernel": (2, 2), "stride": (2, 2), "pooling_convention": "full"}),
    Row("Pooling", [(2, 3, 3, 2)], lambda x: x.sum(axis=(2, 3), keepdims=True),
        {"global_pool": True, "pool_type": "sum"}),
    Row("_pooling_grad", [(2, 2, 2, 2), (2, 2, 4, 4)], None, grad=False,
        attrs={"kernel": (2, 2), "stride": (2, 2)}, checked_by="Pooling"),
]

_COMPARE = {"equal": np.equal, "not_equal": np.not_equal, "greater": np.greater,
            "greater_equal": np.greater_equal, "lesser": np.less, "lesser_equal": np.less_equal,
            "logical_and": np.logical_and, "logical_or": np.logical_or,
            "logical_xor": np.logical_xor}
for _name, _fn in _COMPARE.items():
    ROWS.append(Row(f"broadcast_{_name}", [(2, 3), (3,)], _fn, grad=False, ints={0: 3, 1: 3}))
    ROWS.append(Row(f"_{_name}_scalar", [(2, 3)], lambda x, fn=_fn: fn(x, 1.0),
                    {"scalar": 1.0}, grad=False, ints={0: 3}))

_UNARY = {
    "negative": (np.negative, {}), "abs": (np.abs, {}), "exp": (np.exp, {}),
    "log": (np.log, POS), "log2": (np.log2, POS), "log10": (np.log10, POS),
    "rsqrt": (lambda x: 1 / np.sqrt(x), POS), "log1p": (np.log1p, POS), "expm1": (np.expm1, {}),
    "sqrt": (np.sqrt, POS), "square": (np.square, {}), "tanh": (np.tanh, {}),
    "sin": (np.sin, {}), "cos": (np.cos, {}), "reciprocal": (lambda x: 1 / x, POS),
}
for _name, (_fn, _domain) in _UNARY.items():
    ROWS.append(Row(_name, [(2, 3)], _fn, **_domain))
_LGAMMA = np.vectorize(math.lgamma)
ROWS += [
    Row("rcbrt", [(2, 3)], lambda x: 1 / np.cbrt(x), low=0.5, high=2.0),
    Row("gamma", [(2, 3)], np.vectorize(math.gamma), low=0.5, high=3.0),
    Row("gammaln", [(2, 3)], _LGAMMA, low=0.5, high=3.0),
    Row("digamma", [(2, 3)], lambda x: (_LGAMMA(x + np.float64(1e-5))
                                        - _LGAMMA(x - np.float64(1e-5))) / 2e-5,
        low=-2.5, high=3.0, grad=False),
    Row("_hypot", B2, np.hypot, low=0.5, high=2.0),
    Row("_hypot_scalar", [(2, 3)], lambda x: np.hypot(x, 1.5), {"scalar": 1.5}, low=0.5),
    Row("smooth_l1", [(2, 3)], lambda x: np.where(np.abs(x) < 0.25, 2 * x * x,
                                                  np.abs(x) - 0.125), {"scalar": 2.0}),
]
# recurrent layers (T=3, N=2, C=4, H=3) and the sequence operators
_T, _N, _C, _H = 3, 2, 4, 3


def _rnn_row(mode, **attrs):
    gates = {"lstm": 4, "gru": 3}.get(mode, 1)
    project = attrs.get("projection_size")
    hidden = project or _H
    shapes = [(_T, _N, _C), (gates * _H, _C), (gates * _H, hidden), (gates * _H,),
              (gates * _H,)] + ([(hidden, _H)] if project else []) + [(_N, hidden)]
    shapes += [(_N, _H)] if mode == "lstm" else []
    ints = {}
    if attrs.get("use_sequence_length"):
        ints = {len(shapes): _T + 1}
        shapes.append((_N,))

    def ref(*arrays):
        lengths = arrays[-1] if ints else None
        given = arrays[:-1] if ints else arrays
        return _rnn_ref(mode, *given, reverse=attrs.get("reverse", False),
                        project=bool(project), lengths=lengths)

    return Row("_rnn_layer", shapes, ref, {"mode": mode, **attrs}, low=-1.0, high=1.0,
               ints=ints)


ROWS += [
    _rnn_row("lstm"),
    _rnn_row("lstm", reverse=True, projection_size=2),
    _rnn_row("gru", reverse=True),
    _rnn_row("gru", use_sequence_length=True),
    _rnn_row("rnn_tanh", use_sequence_length=True, reverse=True),
    _rnn_row("rnn_relu"),
    _rnn_row("lstm", use_sequence_length=True),
    Row("_rnn_layer_backward", [(_T, _N, _C), (_H, _C), (_H, _H), (_H,), (_H,), (_N, _H),
                                (_T, _N, _H), (_N, _H)], None, {"mode": "rnn_tanh"},
        grad=False, checked_by="_rnn_layer"),
    Row("SequenceMask", [(4, 3, 2), (3,)], lambda x, n: np.where(
        _sequence_valid(x, n)[:, :, None], x, -1.0), {"use_sequence_length": True,
                                                      "value": -1.0}, ints={1: 5}),
    Row("SequenceMask", [(3, 4), (3,)], lambda x, n: np.where(_sequence_valid(x, n, 1), x, 0),
        {"use_sequence_length": True, "axis": 1}, ints={1: 5}),
    Row("SequenceLast", [(4, 3, 2), (3,)], lambda x, n: x[n.astype(int) - 1, np.arange(3)],
        {"use_sequence_length": True}, make=lambda a: [a[0], np.array([1.0, 4.0, 2.0])],
        ints={1: 5}),
    Row("SequenceLast", [(3, 4, 2)], lambda x: x[:, -1], {"axis": 1}),
    Row("_sequence_last_grad", [(3, 2), (4, 3, 2)], None, grad=False,
        checked_by="SequenceLast"),
    Row("SequenceReverse", [(4, 3, 2), (3,)], lambda x, n: np.stack(
        [np.concatenate([x[:int(k), i][::-1], x[int(k):, i]]) for i, k in enumerate(n)], 1),
        {"use_sequence_length": True}, make=lambda a: [a[0], np.array([1.0, 4.0, 3.0])],
        ints={1: 5}),
    Row("SequenceReverse", [(4, 3)], lambda x: x[::-1]),
    Row("CTCLoss", [(4, 2, 3), (2, 2)], _ctc_ref, ints={1: 3},
        make=lambda a: [a[0], np.array([[1.0, 2.0], [2.0, 0.0]], a[1].dtype)]),
    Row("_ctc_loss_backward", [(4, 2, 3), (2, 2), (2,)], None, grad=False,
        make=lambda a: [a[0], np.array([[1.0, 2.0], [2.0, 0.0]], a[1].dtype), a[2]],
        checked_by="CTCLoss"),
    Row("_contrib_DeformableConvolution", [(1, 2, 4, 4), (1, 18, 2, 2), (2, 2, 3, 3), (2,)],
        _deformable_ref, {"kernel": (3, 3), "num_filter": 2}),
    Row("_backward_DeformableConvolution", [(1, 2, 4, 4), (1, 18, 2, 2), (2, 2, 3, 3), (2,),
                                            (1, 2, 2, 2)], None, {"kernel": (3, 3),
                                                                  "num_filter": 2},
        grad=False, checked_by="_contrib_DeformableConvolution"),
]
# the optimizer updates (MXNet's formulas, one step; the states given are any values)
_LR = {"lr": 0.1, "wd": 0.01, "rescale_grad": 0.5}
ROWS += [
    Row("sgd_update", [(3,)] * 2, lambda w, g: w - 0.1 * (0.5 * g + 0.01 * w), _LR, grad=False),
    Row("sgd_mom_update", [(3,)] * 3, lambda w, g, m: (
        w + (0.9 * m - 0.1 * (0.5 * g + 0.01 * w)), 0.9 * m - 0.1 * (0.5 * g + 0.01 * w)),
        {**_LR, "momentum": 0.9}, grad=False),
    Row("signsgd_update", [(3,)] * 2, lambda w, g: w - 0.1 * (np.sign(g) + 0.01 * w), _LR,
        grad=False),
    Row("signum_update", [(3,)] * 3, lambda w, g, m: (
        w + 0.1 * np.sign(0.9 * m - 0.1 * (0.5 * g + 0.01 * w)),
        0.9 * m - 0.1 * (0.5 * g + 0.01 * w)), {**_LR, "momentum": 0.9}, grad=False),
    Row("nag_mom_update", [(3,)] * 3, lambda w, g, m: (  # MXNet 1.9.1's NAGMomKernel
        w - 0.9 * m + 1.9 * (0.9 * m - 0.1 * (0.5 * g + 0.01 * w)),
        0.9 * m - 0.1 * (0.5 * g + 0.01 * w)), {**_LR, "momentum": 0.9}, grad=False),
    Row("adam_update", [(3,)] * 4, lambda w, g, m, v: (
        w - 0.1 * (0.9 * m + 0.1 * (0.5 * g + 0.01 * w))
        / (np.sqrt(0.999 * v + 0.001 * (0.5 * g + 0.01 * w) ** 2) + 1e-8),
        0.9 * m + 0.1 * (0.5 * g + 0.01 * w), 0.999 * v + 0.001 * (0.5 * g + 0.01 * w) ** 2),
        _LR, low=0.1, grad=False),
    Row("rmsprop_update", [(3,)] * 3, lambda w, g, n: (
        w - 0.1 * (0.5 * g + 0.01 * w) / np.sqrt(0.05 * (0.5 * g + 0.01 * w) ** 2 + 0.95 * n
                                                  + 1e-8),
        0.05 * (0.5 * g + 0.01 * w) ** 2 + 0.95 * n), _LR, low=0.1, grad=False),
    Row("rmspropalex_update", [(3,)] * 5, None, _LR, low=0.1, grad=False,
        checked_by="test_update_operators_write_their_states_in_place (tests/test_ndarray.py)"),
    Row("ftrl_update", [(3,)] * 4, None, _LR, low=0.1, grad=False,
        checked_by="test_update_operators_write_their_states_in_place (tests/test_ndarray.py)"),
    Row("ftml_update", [(3,)] * 5, None, {**_LR, "t": 2}, low=0.1, grad=False,
        checked_by="test_update_operators_write_their_states_in_place (tests/test_ndarray.py)"),
]
for _name, _fn in {"sign": np.sign, "floor": np.floor, "ceil": np.ceil,
                   "round": np.round, "rint": np.rint, "fix": np.fix, "trunc": np.trunc,
                   "logical_not": np.logical_not}.items():
    ROWS.append(Row(_name, [(2, 3)], _fn, grad=False))


def _inputs(row: Row, dtype, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = []
    for i, shape in enumerate(row.shapes):
        if i in row.ints:
            arrays.append(rng.integers(0, row.ints[i], shape).astype(dtype))
        else:
            arrays.append(rng.uniform(row.low, row.high, shape).astype(dtype))
    return row.make(arrays) if row.make else arrays


def _as_tuple(value) -> tuple:
    return value if isinstance(value, tuple) else (value,)


def test_every_op_has_a_row():
    ours = {name for name, op in OPS.items() if op.infer.__module__.startswith("hybridlab.ops")}
    # a layer operator (OpDef.lower) may have its row among the composites': its kernel
    # and gradient are its lowering's primitives, each checked in ROWS
    lowered = {name for name, _, _ in COMPOSITE_ROWS if OPS.get(name) and OPS[name].lower}
    missing = sorted(ours - {row.op for row in ROWS} - lowered)
    assert not missing, f"add a row to tests/ops/test_registry_table.py for: {missing}"


def test_every_op_has_a_doc():
    assert [name for name, op in OPS.items() if not op.doc] == []
    assert [name for name, c in COMPOSITES.items() if not c.doc] == []


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.id)
def test_kernel_matches_numpy_and_infer(row: Row):
    op = get(row.op)
    arrays = _inputs(row, np.float32)
    result = getattr(eager, row.op)(*arrays, **row.attrs)
    outputs = _as_tuple(result)
    attrs = op.parse_attrs(row.attrs)
    expected = op.infer(*(Aval(a.shape, a.dtype) for a in arrays), **attrs)
    assert len(outputs) == op.output_count(attrs) == len(expected)
    # the kernel contract: a tuple only when there are several outputs (nd's runner relies on it)
    assert isinstance(result, tuple) == (op.output_count(attrs) > 1), row.op
    for out, aval in zip(outputs, expected):
        assert (out.data.shape, out.data.dtype) == (aval.shape, aval.dtype)
    if row.ref is None:
        assert row.checked_by, f"{row.op}: a row without a reference must say what checks it"
        return
    reference = _as_tuple(row.ref(*arrays))
    for out, ref in zip(outputs, reference):
        np.testing.assert_allclose(out.data, ref, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.id)
def test_kind_and_ufunc_tell_the_truth(row: Row):
    """Passes trust ``kind`` and ``ufunc`` without looking at kernels: check both here."""
    op = get(row.op)
    arrays = _inputs(row, np.float32)
    shapes = [a.shape for a in arrays]
    outputs = _as_tuple(getattr(eager, row.op)(*arrays, **row.attrs))
    out_shape = outputs[0].data.shape
    if op.kind == Kind.ELEMENTWISE:
        assert all(s == out_shape for s in shapes), f"{row.op}: elementwise but reshapes"
    if op.kind == Kind.BROADCAST:
        assert all(np.broadcast_shapes(s, out_shape) == out_shape for s in shapes)
    if op.kind == Kind.REDUCE:
        assert int(np.prod(out_shape)) <= int(np.prod(shapes[0]))
    if op.ufunc is not None:
        assert op.ufunc.nin == len(arrays) and not op.attrs
        np.testing.assert_array_equal(op.ufunc(*arrays), outputs[0].data)


def _objective(row: Row, arrays, cotangents) -> float:
    outputs = _as_tuple(getattr(eager, row.op)(*arrays, **row.attrs))
    return sum(float((out.data * ct).sum()) for out, ct in zip(outputs, cotangents))


def _numeric_grad(row: Row, arrays, cotangents, which: int, eps: float = 1e-6) -> np.ndarray:
    grad = np.zeros_like(arrays[which])
    for index in np.ndindex(grad.shape):
        plus = [a.copy() for a in arrays]
        minus = [a.copy() for a in arrays]
        plus[which][index] += eps
        minus[which][index] -= eps
        grad[index] = (_objective(row, plus, cotangents)
                       - _objective(row, minus, cotangents)) / (2 * eps)
    return grad


@pytest.mark.parametrize("normalization, use_ignore", [("null", False), ("batch", False),
                                                        ("valid", True)])
def test_softmax_output_gradient_is_the_cross_entropys(normalization, use_ignore):
    """SoftmaxOutput's backward ignores the gradient from above: it is the derivative of
    ``-sum(log softmax(x)[label])`` (divided by the batch or the valid rows), with rows
    whose label is ``ignore_label`` getting none."""
    x = np.random.default_rng(4).normal(size=(5, 4))
    label = np.array([0.0, 3.0, 1.0, 2.0, 1.0])
    attrs = {"normalization": normalization, "use_ignore": use_ignore, "ignore_label": 1,
             "grad_scale": 2.0}
    op = get("SoftmaxOutput")
    out = eager.SoftmaxOutput(x, label, **attrs)
    grad = op.grad(eager, [Tensor(x), Tensor(label)], [out], [Tensor(np.ones_like(x))],
                   **op.parse_attrs(attrs))
    kept = label != 1 if use_ignore else np.ones(5, bool)

    def loss(x):
        return -np.log(_softmax(x)[np.arange(5), label.astype(int)])[kept].sum()

    numeric = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[index] = 1e-6
        numeric[index] = (loss(x + step) - loss(x - step)) / 2e-6
    divide = {"null": 1, "batch": 5, "valid": kept.sum()}[normalization]
    np.testing.assert_allclose(grad[0].data, 2.0 * numeric / divide, rtol=1e-5, atol=1e-8)
    assert grad[1] is None


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.id)
def test_gradient_matches_central_differences(row: Row):
    op = get(row.op)
    if row.op in ("SoftmaxOutput", "MakeLoss"):  # not their outputs' derivatives, by
        return  # design: test_softmax_output_..., test_make_loss_starts_the_gradient_...
    if not row.grad:
        arrays = _inputs(row, np.float64)
        if op.grad is not None:
            outputs = _as_tuple(getattr(eager, row.op)(*arrays, **row.attrs))
            grads = op.grad(eager, [Tensor(a) for a in arrays], list(outputs),
                            [Tensor(np.ones_like(o.data)) for o in outputs],
                            **op.parse_attrs(row.attrs))
            assert all(g is None for g in grads), f"{row.op} has a gradient: test it"
        return
    assert op.grad is not None, f"{row.op}: the row expects a gradient rule"
    arrays = _inputs(row, np.float64)
    outputs = _as_tuple(getattr(eager, row.op)(*arrays, **row.attrs))
    rng = np.random.default_rng(1)
    cotangents = [rng.normal(size=o.data.shape) for o in outputs]
    grads = op.grad(eager, [Tensor(a) for a in arrays], list(outputs),
                    [Tensor(c) for c in cotangents], **op.parse_attrs(row.attrs))
    assert len(grads) == len(arrays)
    assert any(g is not None for g in grads)
    for which, grad in enumerate(grads):
        if which in row.ints:  # an index: integer-valued, not differentiable
            assert grad is None, f"{row.op}: index input {which} should get no gradient"
            continue
        numeric = _numeric_grad(row, arrays, cotangents, which)
        if grad is None:  # e.g. the ``like`` of sum_like: only its shape matters
            np.testing.assert_allclose(numeric, 0, atol=1e-6)
            continue
        assert grad.data.shape == arrays[which].shape
        np.testing.assert_allclose(grad.data, numeric, rtol=1e-4, atol=1e-6,
                                   err_msg=f"{row.op}: gradient of input {which}")


# ---------------------------------------------------------------------------------------
# Composites: forward against numpy (their gradients are those of the ops they call)
# ---------------------------------------------------------------------------------------

def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


X = np.random.default_rng(2).normal(size=(3, 4)).astype(np.float32)


def _mxnet_rnn_case() -> tuple:
    """MXNet 1.9.1's own RNN outputs (tools/mxnet_fixtures.py mxnet-rnn): the reference."""
    import json
    import pathlib
    saved = np.load(pathlib.Path(__file__).parent.parent / "fixtures/mxnet/rnn/gru.npz")
    names = ("data", "parameters", "state")
    return ([saved[f"in_{n}"] for n in names], json.loads(str(saved["attrs"])),
            saved["out_0"])


_RNN_CASE = _mxnet_rnn_case()
Y = np.random.default_rng(3).normal(size=(4,)).astype(np.float32)
NANS = np.array([np.nan, np.inf, -np.inf, 1.0, -2.0], np.float32)
COMPOSITE_ROWS: list[tuple[str, Callable[[], Any], Any]] = [
    ("random.exponential", lambda: eager.random.exponential(scale=0.25, shape=(2, 3)),
     np.random.default_rng(0).exponential(0.25, (2, 3))),
    ("random.randn", lambda: eager.random.randn(2, 3, loc=1.0, scale=2.0),
     np.random.default_rng(0).normal(1.0, 2.0, (2, 3))),
    ("_contrib_isnan", lambda: eager.contrib.isnan(NANS), np.isnan(NANS)),
    ("_contrib_isinf", lambda: eager.contrib.isinf(NANS), np.isinf(NANS)),
    ("_contrib_isfinite", lambda: eager.contrib.isfinite(NANS), np.isfinite(NANS)),
    ("_contrib_allclose", lambda: eager.contrib.allclose(X, X + 1e-6), np.ones(1)),
    ("pow", lambda: eager.pow(np.abs(X), 1.5), np.abs(X) ** 1.5),
    ("softmin", lambda: eager.softmin(X), _softmax(-X)),
    ("hypot", lambda: eager.hypot(X, 2.0), np.hypot(X, 2.0)),
    ("sort", lambda: eager.sort(X, axis=0), np.sort(X, axis=0)),
    ("argsort", lambda: eager.argsort(X, is_ascend=False),
     np.argsort(-X, axis=-1, kind="stable").astype(np.float32)),
    ("softmax", lambda: eager.softmax(X), _softmax(X)),
    ("softmax", lambda: eager.softmax(X, axis=0), _softmax(X, 0)),
    ("log_softmax", lambda: eager.log_softmax(X), np.log(_softmax(X))),
    ("log_softmax", lambda: eager.log_softmax(X, temperature=2.0), np.log(_softmax(X / 2))),
    ("softrelu", lambda: eager.softrelu(X), np.log1p(np.exp(X))),
    ("softsign", lambda: eager.softsign(X), X / (1 + np.abs(X))),
    ("Activation", lambda: eager.Activation(X, act_type="tanh"), np.tanh(X)),
    ("Activation", lambda: eager.Activation(X, act_type="sigmoid"), _sigmoid(X)),
    ("add", lambda: eager.add(X, Y), X + Y),
    ("subtract", lambda: eager.subtract(2, X), 2 - X),
    ("multiply", lambda: eager.multiply(X, 3), X * 3),
    ("divide", lambda: eager.divide(1, np.abs(X) + 1), 1 / (np.abs(X) + 1)),
    ("power", lambda: eager.power(np.abs(X), 2), np.abs(X) ** 2),
    ("modulo", lambda: eager.modulo(3, np.abs(X) + 1), np.mod(3, np.abs(X) + 1)),
    ("maximum", lambda: eager.maximum(X, 0.5), np.maximum(X, 0.5)),
    ("maximum", lambda: eager.maximum(0.5, X), np.maximum(X, 0.5)),
    ("minimum", lambda: eager.minimum(X, Y), np.minimum(X, Y)),
    ("equal", lambda: eager.equal(X, X), np.ones_like(X)),
    ("not_equal", lambda: eager.not_equal(X, 0.0), np.ones_like(X)),
    ("greater", lambda: eager.greater(0.0, X), (X < 0).astype(X.dtype)),
    ("greater_equal", lambda: eager.greater_equal(X, Y), (X >= Y).astype(X.dtype)),
    ("lesser", lambda: eager.lesser(X, 0.0), (X < 0).astype(X.dtype)),
    ("lesser_equal", lambda: eager.lesser_equal(0.0, X), (X >= 0).astype(X.dtype)),
    ("logical_and", lambda: eager.logical_and(X, X > 0), (X > 0).astype(X.dtype)),
    ("logical_or", lambda: eager.logical_or(0.0, X > 0), (X > 0).astype(X.dtype)),
    ("logical_xor", lambda: eager.logical_xor(X > 0, 1.0), (X <= 0).astype(X.dtype)),
    ("stack", lambda: eager.stack(X, X, axis=1), np.stack([X, X], axis=1)),
    ("argmax_channel", lambda: eager.argmax_channel(X), X.argmax(axis=1).astype(X.dtype)),
    ("SoftmaxActivation", lambda: eager.SoftmaxActivation(X, mode="channel"),
     np.exp(X) / np.exp(X).sum(axis=1, keepdims=True)),
    ("UpSampling", lambda: eager.UpSampling(X.reshape(1, 1, *X.shape), scale=2),
     X.repeat(2, axis=0).repeat(2, axis=1)[None, None]),
    ("linalg_gemm", lambda: eager.linalg.gemm(X, X.T, X @ X.T, alpha=2.0, beta=-1.0),
     X @ X.T),
    ("Dropout", lambda: eager.Dropout(X, p=0.5), X),
    ("Activation", lambda: eager.Activation(X, act_type="relu"), np.maximum(X, 0)),
    ("Activation", lambda: eager.Activation(X, act_type="softrelu"), np.log1p(np.exp(X))),
    ("Activation", lambda: eager.Activation(X, act_type="softsign"), X / (1 + np.abs(X))),
    ("full", lambda: eager.full((2, 2), 7), np.full((2, 2), 7, np.float32)),
    ("Embedding", lambda: eager.Embedding(np.array([2.0, 0.0]), X, input_dim=3, output_dim=4),
     X[[2, 0]]),
    ("RNN", lambda: eager.RNN(*_RNN_CASE[0], state_size=6, **_RNN_CASE[1]), _RNN_CASE[2]),
]


def test_every_composite_has_a_row():
    assert set(COMPOSITES) - {name for name, _, _ in COMPOSITE_ROWS} == set()


@pytest.mark.parametrize("name, run, expected", COMPOSITE_ROWS,
                         ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(COMPOSITE_ROWS)])
def test_composite_matches_numpy(name, run, expected):
    result = run().asnumpy()
    assert result.shape == expected.shape
    np.testing.assert_allclose(result, expected, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("normalization, divide", [("null", 6), ("batch", 2 * 6),
                                                   ("valid", 1)])
def test_softmax_output_multi_output_divides_by_the_positions(normalization, divide):
    """With ``multi_output`` (classes on axis 1 of (batch, classes, H, W)), MXNet divides
    the gradient by H*W too, unless it counts the valid positions."""
    x = np.random.default_rng(5).normal(size=(2, 3, 2, 3))
    label = np.random.default_rng(6).integers(0, 3, size=(2, 2, 3)).astype(float)
    attrs = {"normalization": normalization, "multi_output": True}
    op = get("SoftmaxOutput")
    out = eager.SoftmaxOutput(x, label, **attrs)
    grad = op.grad(eager, [Tensor(x), Tensor(label)], [out], [Tensor(np.ones_like(x))],
                   **op.parse_attrs(attrs))
    raw = _softmax(x, 1) - np.moveaxis(np.eye(3)[label.astype(int)], -1, 1)
    if normalization == "valid":
        divide = 2 * 6  # every position is valid
    np.testing.assert_allclose(grad[0].data, raw / divide, rtol=1e-6, atol=1e-9)


def test_relu_gradient_keeps_nan_like_mxnet():
    grad = eager._relu_grad(np.ones(4), np.array([np.nan, -1.0, 2.0, -np.inf]))
    np.testing.assert_array_equal(grad.data, [np.nan, 0.0, 1.0, 0.0])


def test_make_loss_starts_the_gradient_and_block_grad_stops_it():
    """MakeLoss's gradient is grad_scale whatever arrives from above; BlockGrad's is 0."""
    x = Tensor(np.array([1.0, 2.0]))
    ml = get("MakeLoss")
    grad = ml.grad(eager, [x], [x], [Tensor(np.array([5.0, 7.0]))],
                   **ml.parse_attrs({"grad_scale": 3.0}))
    np.testing.assert_array_equal(grad[0].data, [3.0, 3.0])
    assert get("BlockGrad").grad(eager, [x], [x], [x]) == [None]
