"""ONNX import: ``mx.contrib.onnx.import_model``, ``import_to_gluon``, ``get_model_metadata``.

What this module teaches
------------------------
An ONNX file is a graph of nodes in single-assignment form, weights as *initializers*,
and the inputs a caller feeds. Reading it into hybridlab is the export walk
(``onnx/export.py``) backwards: every node becomes one or a few registry operators (one
row of :data:`IMPORTERS` each), every weight a parameter, and ONNX's broadcasting
arithmetic MXNet's ``broadcast_*``. Two things need care:

* **Constant subgraphs.** Files often compute weights instead of storing them
  (``ConstantOfShape`` of a stored shape, ``Shape -> Gather -> Concat`` before a
  ``Reshape``). A node whose inputs are all known constants is evaluated at import with
  numpy (one row of :data:`CONSTANT_RULES` each); its result is a constant like any
  initializer, and a constant an operator reads becomes a parameter. So no constant
  arithmetic reaches the graph, and a folded weight trains like a stored one.
* **Opsets.** An operator's meaning can change between opsets (``Softmax`` flattens its
  input before opset 13; ``Unsqueeze`` and ``Clip`` take attributes before 13 and 11 and
  inputs after). Each rule reads the model's opset (``reader.opset``).

Some rules need a value's shape or rank (a negative axis, ``Flatten`` at an axis other
than 1, ``Softmax`` before opset 13, pooling pads larger at the end, ``MatMul``'s batch
form). hybridlab infers it itself, from the graph built so far and the shapes the model
declares for its inputs (``graph/shapes.py``'s ``infer_partial``, MXNet's
``infer_shape``: a free dimension stays unknown); when that is not enough, the rule
says so, naming the node -- there is no second opinion to fall back on.

The reader's state, in one place (:class:`_Reader`): ``constants`` (value name -> numpy
array known at import), ``symbols`` (value name -> the Symbol computing it), ``params``
(the constants an operator reads: the block's parameters) and ``aux`` (the ones that are
BatchNorm's running statistics).

Invariants
----------
* Nothing in the file is executed: protobuf is parsed by ``onnx``, attributes are read as
  data, and an operator without a rule is an :class:`~hybridlab.errors.OnnxImportError`.
* Every error raised while reading a node -- a rule's, a constant's, an operator's --
  is an ``OnnxImportError`` naming the node, its operator and the opset.
* Parameters keep their ONNX names; BatchNormalization's running statistics are auxiliary
  states (``aux_params``), as in MXNet.
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import Any, Callable, NamedTuple

import numpy as np

from hybridlab import ndarray, symbol
from hybridlab.errors import OnnxImportError
from hybridlab.graph.shapes import infer_partial
from hybridlab.onnx.files import DTYPES, MAX_NDIM, Budget, check_graph, load_model, tensor_values

F: Any = symbol  # the operators, generated from the registry (MXNet's F in hybrid_forward)


class _Reader:
    """One model being read: its opset, the values' shapes, the constants, the Symbols
    made so far, the parameters, the node being read (for error messages), and the
    memory budget (``onnx/files.py``) every tensor and folded constant is charged to."""

    def __init__(self, model: Any, folder: str | None, budget: Budget) -> None:
        import onnx

        self.onnx, self.folder, self.budget = onnx, folder, budget
        self.node: Any = None
        self.opset = check_graph(model)
        self.constants: dict[str, np.ndarray] = {
            tensor.name: tensor_values(tensor, folder, budget, f"initializer {tensor.name!r}")
            for tensor in model.graph.initializer}
        _warn_undeclared_initializers(model)
        computed = {name for node in model.graph.node for name in node.output}
        data = [info for info in model.graph.input
                if info.name not in self.constants and info.name not in computed]
        self.symbols: dict[str, Any] = {info.name: symbol.var(info.name) for info in data}
        self.declared = {info.name: _declared(info) for info in data}  # (shape, dtype)
        self.params: dict[str, np.ndarray] = {}
        self.aux: set[str] = set()

    def attributes(self, node: Any) -> dict[str, Any]:
        """The node's attributes as Python values; a tensor is decoded (and charged)."""
        values = {}
        for attribute in node.attribute:
            value = self.onnx.helper.get_attribute_value(attribute)
            if attribute.type == self.onnx.AttributeProto.TENSOR:
                value = tensor_values(value, self.folder, self.budget,
                                      f"attribute {attribute.name!r}")
            values[attribute.name] = _plain(value)
        return values

    def symbol(self, name: str) -> Any:
        """The Symbol of an ONNX value; a constant becomes a parameter the first time."""
        if name not in self.symbols:
            if name not in self.constants:
                raise self.error(f"input {name!r} is neither computed before this node, a "
                                 f"graph input, nor an initializer")
            self.params[name] = self.constants[name]
            self.symbols[name] = symbol.var(name)
        return self.symbols[name]

    def constant(self, name: str, what: str) -> np.ndarray:
        """A value the rule needs at import (a shape, an axis list, Gemm's weight)."""
        if name not in self.constants:
            raise self.error(f"{what} ({name!r}) must be a constant of the file (an "
                             f"initializer, or computed from initializers) for hybridlab")
        return self.constants[name]

    def shape(self, name: str, why: str) -> tuple[int, ...]:
        """A value's whole shape, which the rule needs ``why``."""
        shape = self.partial_shape(name)
        if shape is None or 0 in shape:
            inputs = {n: shape for n, (shape, _) in self.declared.items()}
            raise self.error(f"{why} needs the shape of {name!r}, and hybridlab infers only "
                             f"{shape} (0: a size not known; None: not even the rank) from "
                             f"the shapes the model declares for its inputs {inputs}")
        return shape

    def rank(self, name: str) -> int | None:
        """A value's number of dimensions, or None when hybridlab cannot infer it."""
        shape = self.partial_shape(name)
        return None if shape is None else len(shape)

    def partial_shape(self, name: str) -> tuple[int, ...] | None:
        """What ``graph/shapes.py`` infers of a value's shape (0: a size not known), from
        the inputs' declared shapes and the parameters' own."""
        if name in self.constants:
            return tuple(self.constants[name].shape)
        graph = self.symbol(name).to_graph()
        known = {**{n: values.shape for n, values in self.params.items()},
                 **{n: shape for n, (shape, _) in self.declared.items()}}
        types = {**{n: values.dtype for n, values in self.params.items()},
                 **{n: dtype for n, (_, dtype) in self.declared.items() if dtype is not None}}
        return infer_partial(graph, known, types).shape(graph.outputs[0])

    def error(self, message: str) -> OnnxImportError:
        node = self.node
        output = node.output[0] if node.output else "?"
        return OnnxImportError(f"ONNX node {node.name or output!r} ({node.op_type}, "
                               f"opset {self.opset}): {message}")


def _declared(info: Any) -> tuple[tuple[int, ...] | None, np.dtype | None]:
    """A graph input's declared shape (0 for a free or named dimension; None when the
    model declares no shape) and dtype (None when not one hybridlab holds)."""
    tensor_type = info.type.tensor_type
    dtype = DTYPES.get(tensor_type.elem_type)
    if not tensor_type.HasField("shape"):
        return None, None if dtype is None else np.dtype(dtype)
    shape = tuple(max(dim.dim_value, 0) for dim in tensor_type.shape.dim)
    return shape[:MAX_NDIM], None if dtype is None else np.dtype(dtype)


def _warn_undeclared_initializers(model: Any) -> None:
    """IR versions before 4 list every initializer among the graph's inputs; a file that
    does not is read all the same (its initializers are its weights), saying so."""
    inputs = {info.name for info in model.graph.input}
    missing = [t.name for t in model.graph.initializer if t.name not in inputs]
    if model.ir_version < 4 and missing:
        warnings.warn(f"this ONNX model has IR version {model.ir_version}, and its "
                      f"initializers {missing[:5]}{' ...' if len(missing) > 5 else ''} are "
                      f"not among the graph's inputs, which ONNX requires before IR version "
                      f"4 (every initializer is also a graph input); hybridlab reads them as "
                      f"the model's weights all the same", stacklevel=4)


def _plain(value: Any) -> Any:
    """Attribute values as Python: bytes as str, lists as tuples."""
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, list):
        return tuple(item.decode(errors="replace") if isinstance(item, bytes) else item
                     for item in value)
    return value


# --- constant folding at import: numpy rules for nodes whose inputs are all constants ---
# A row is Folding(size, fold): size(arrays, attributes) is the bytes the result will take,
# computed from the inputs' shapes and charged to the budget *before* fold(reader, arrays,
# attributes) computes the value of the node's (first) output.
class Folding(NamedTuple):
    size: Callable[[list, dict], int]
    fold: Callable[[_Reader, list, dict], np.ndarray]


def _same_size(arrays: list, attrs: dict) -> int:
    return int(arrays[0].nbytes)


def _broadcast_size(arrays: list, attrs: dict) -> int:
    shape = np.broadcast_shapes(*(array.shape for array in arrays))
    return math.prod(shape) * np.result_type(*arrays).itemsize


def _concat_size(arrays: list, attrs: dict) -> int:
    return sum(array.size for array in arrays) * np.result_type(*arrays).itemsize


def _gather_size(arrays: list, attrs: dict) -> int:
    data, indices = arrays
    rows = data.shape[attrs.get("axis", 0)] if data.ndim else 1
    return int(indices.size) * (int(data.nbytes) // max(rows, 1))


def _target_shape(arrays: list, attrs: dict) -> tuple[int, ...]:
    """ConstantOfShape's shape input, checked: at most MAX_NDIM sizes, none negative."""
    sizes = arrays[0]
    if sizes.ndim != 1 or sizes.size > MAX_NDIM or sizes.dtype.kind not in "iu" \
            or (sizes < 0).any():
        raise ValueError(f"the shape input must list at most {MAX_NDIM} sizes >= 0, got "
                         f"{sizes.dtype}{list(sizes.shape)} {sizes.reshape(-1)[:8].tolist()}")
    return tuple(int(size) for size in sizes)


def _constant_of_shape_size(arrays: list, attrs: dict) -> int:
    fill = attrs.get("value", np.zeros(1, np.float32))
    return math.prod(_target_shape(arrays, attrs)) * fill.dtype.itemsize


def _constant_of_shape(reader: _Reader, arrays: list, attrs: dict) -> np.ndarray:
    fill = attrs.get("value", np.zeros(1, np.float32))
    return np.full(_target_shape(arrays, attrs), fill.reshape(-1)[0], fill.dtype)


def _constant(reader: _Reader, arrays: list, attrs: dict) -> np.ndarray:
    """``Constant``'s value: a tensor (already decoded and charged) or, from opset 12,
    one of the number forms."""
    forms = {"value": None, "value_float": np.float32, "value_floats": np.float32,
             "value_int": np.int64, "value_ints": np.int64}
    for name, dtype in forms.items():
        if name in attrs:
            return np.asarray(attrs[name], dtype)
    raise reader.error(f"needs one of the attributes {sorted(forms)}, got {sorted(attrs)}")


def _unsqueeze_constant(reader: _Reader, arrays: list, attrs: dict) -> np.ndarray:
    axes = attrs.get("axes", tuple(arrays[1]) if len(arrays) > 1 else ())
    out = arrays[0]
    for axis in sorted(int(x) % (out.ndim + len(axes)) for x in axes):
        out = np.expand_dims(out, axis)
    return out


def _squeeze_constant(reader: _Reader, arrays: list, attrs: dict) -> np.ndarray:
    axes = attrs.get("axes", tuple(arrays[1]) if len(arrays) > 1 else ())
    return np.squeeze(arrays[0], tuple(int(axis) for axis in axes) or None)


def _reshape_constant(reader: _Reader, arrays: list, attrs: dict) -> np.ndarray:
    data, target = arrays
    sizes = [int(size) or old for size, old in zip(target, data.shape)]  # 0: keep the size
    return data.reshape(sizes + [int(size) for size in target[data.ndim:]])


def _cast_size(arrays: list, attrs: dict) -> int:
    from onnx.helper import tensor_dtype_to_np_dtype

    return int(arrays[0].size) * tensor_dtype_to_np_dtype(attrs["to"]).itemsize


def _cast_constant(reader: _Reader, arrays: list, attrs: dict) -> np.ndarray:
    return arrays[0].astype(reader.onnx.helper.tensor_dtype_to_np_dtype(attrs["to"]))


CONSTANT_RULES: dict[str, Folding] = {
    "Constant": Folding(lambda arrays, attrs: 0, _constant),  # (its tensor was charged)
    "ConstantOfShape": Folding(_constant_of_shape_size, _constant_of_shape),
    "Identity": Folding(_same_size, lambda reader, arrays, attrs: arrays[0]),
    "Cast": Folding(_cast_size, _cast_constant),
    "Unsqueeze": Folding(_same_size, _unsqueeze_constant),
    "Squeeze": Folding(_same_size, _squeeze_constant),
    "Reshape": Folding(_same_size, _reshape_constant),
    "Concat": Folding(_concat_size, lambda reader, arrays, attrs: np.concatenate(
        arrays, axis=attrs["axis"])),
    "Gather": Folding(_gather_size, lambda reader, arrays, attrs: np.take(
        arrays[0], arrays[1], axis=attrs.get("axis", 0))),
    "Add": Folding(_broadcast_size, lambda reader, arrays, attrs: arrays[0] + arrays[1]),
    "Sub": Folding(_broadcast_size, lambda reader, arrays, attrs: arrays[0] - arrays[1]),
    "Mul": Folding(_broadcast_size, lambda reader, arrays, attrs: arrays[0] * arrays[1]),
    "Div": Folding(_broadcast_size, lambda reader, arrays, attrs: arrays[0] / arrays[1]),
    "Sqrt": Folding(_same_size, lambda reader, arrays, attrs: np.sqrt(arrays[0])),
    "Transpose": Folding(_same_size, lambda reader, arrays, attrs: np.transpose(
        arrays[0], attrs.get("perm"))),
}


# --- the mapping table: one rule per ONNX operator ---------------------------------------
# A rule is rule(reader, node, attributes) -> the Symbols of the node's outputs, in order.
Rule = Callable[[_Reader, Any, dict], list]


def _unary(name: str) -> Rule:
    return lambda reader, node, attrs: [getattr(F, name)(reader.symbol(node.input[0]))]


def _binary(name: str) -> Rule:
    def rule(reader: _Reader, node: Any, attrs: dict) -> list:
        left, right = node.input[0], node.input[1]
        if attrs.get("broadcast") and "axis" in attrs and right in reader.constants:
            _align_before_opset_7(reader, left, right, attrs["axis"])
        return [getattr(F, name)(reader.symbol(left), reader.symbol(right))]
    return rule


def _align_before_opset_7(reader: _Reader, left: str, right: str, axis: int) -> None:
    """Before opset 7, ``broadcast=1, axis=k`` lined the right operand up with the left's
    axis ``k``; numpy's rule lines it up with the last axes, so trailing 1s are added."""
    values = reader.constants[right]
    rank = reader.rank(left) or values.ndim + axis
    trailing = max(rank - axis - values.ndim, 0)
    reader.constants[right] = values.reshape(values.shape + (1,) * trailing)


def _sum(reader: _Reader, node: Any, attrs: dict) -> list:
    total = reader.symbol(node.input[0])
    for name in node.input[1:]:
        total = F.broadcast_add(total, reader.symbol(name))
    return [total]


def _symmetric_pads(reader: _Reader, attrs: dict, rank: int) -> tuple[int, ...]:
    """ONNX's ``pads`` (begins, then ends) as hybridlab's ``pad`` (one per axis)."""
    pads = tuple(attrs.get("pads", (0,) * (2 * rank)))
    if attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        raise reader.error(f"auto_pad={attrs['auto_pad']!r}: write the pads out (pads=...)")
    if pads[:rank] != pads[rank:]:
        raise reader.error(f"asymmetric pads {list(pads)}: hybridlab's Convolution and "
                           f"Pooling pad both sides alike")
    return pads[:rank]


def _conv(reader: _Reader, node: Any, attrs: dict) -> list:
    weight_shape = reader.shape(node.input[1], "Conv's number of filters")
    kernel = tuple(attrs.get("kernel_shape", weight_shape[2:]))
    _check_window(reader, kernel, 3)
    inputs = [reader.symbol(name) for name in node.input[:3]]
    return [F.Convolution(*inputs, kernel=kernel, num_filter=weight_shape[0],
                          stride=tuple(attrs.get("strides", (1,) * len(kernel))),
                          dilate=tuple(attrs.get("dilations", (1,) * len(kernel))),
                          pad=_symmetric_pads(reader, attrs, len(kernel)),
                          num_group=attrs.get("group", 1),
                          no_bias=len(node.input) < 3 or not node.input[2],
                          name=node.output[0])]


def _check_window(reader: _Reader, kernel: tuple, largest: int) -> None:
    """Convolution is 1-D to 3-D (NCW, NCHW, NCDHW) in hybridlab, Pooling 1-D or 2-D."""
    if not 1 <= len(kernel) <= largest:
        raise reader.error(f"a {len(kernel)}-D window: hybridlab's {reader.node.op_type} "
                           f"has 1-D to {largest}-D windows")


def _pool(kind: str) -> Rule:
    def rule(reader: _Reader, node: Any, attrs: dict) -> list:
        kernel = tuple(attrs["kernel_shape"])
        _check_window(reader, kernel, 2)
        if any(d != 1 for d in attrs.get("dilations", ())):
            raise reader.error("dilated pooling has no hybridlab form")
        stride = tuple(attrs.get("strides", (1,) * len(kernel)))
        full = bool(attrs.get("ceil_mode"))
        pads = tuple(attrs.get("pads", (0,) * 2 * len(kernel)))
        if pads[:len(kernel)] != pads[len(kernel):] and not full:
            if _uneven_pads(reader, node, kernel, stride, pads, kind, attrs) == "global":
                return _global_pool(kind)(reader, node, attrs)
            full, attrs = True, {**attrs, "pads": pads[:len(kernel)] * 2}
        return [F.Pooling(reader.symbol(node.input[0]), kernel=kernel, pool_type=kind,
                          stride=stride, pad=_symmetric_pads(reader, attrs, len(kernel)),
                          pooling_convention="full" if full else "valid",
                          count_include_pad=bool(attrs.get("count_include_pad", 0)),
                          name=node.output[0])]
    return rule


def _uneven_pads(reader: _Reader, node: Any, kernel: tuple, stride: tuple, pads: tuple,
                 kind: str, attrs: dict) -> str:
    """Pads larger at the end than at the start (Caffe's ceil mode, converted) when the
    padding is never counted (max pooling, or averages over real values only): one window
    over the whole input is a ``"global"`` pool; windows that MXNet's
    ``pooling_convention='full'`` makes alike (same starts, same count) are ``"full"``."""
    rank = len(kernel)
    if kind == "avg" and attrs.get("count_include_pad"):
        raise reader.error(f"asymmetric pads {list(pads)}: hybridlab's Pooling pads both "
                           f"sides alike")
    shape = reader.shape(node.input[0], f"asymmetric pads {list(pads)}")
    dims = list(zip(shape[2:], kernel, stride, pads[:rank], pads[rank:]))
    if all(begin == 0 and k >= size and (size + end - k) // s == 0
           for size, k, s, begin, end in dims):
        return "global"
    for size, k, s, begin, end in dims:
        if end < begin or (size + begin + end - k) // s != math.ceil((size + 2 * begin - k) / s):
            raise reader.error(f"asymmetric pads {list(pads)} on an input of {shape}: not "
                               f"the windows of pooling_convention='full'")
    return "full"


def _global_pool(kind: str) -> Rule:
    return lambda reader, node, attrs: [F.Pooling(
        reader.symbol(node.input[0]), kernel=(1, 1), pool_type=kind, global_pool=True,
        name=node.output[0])]


def _batch_norm(reader: _Reader, node: Any, attrs: dict) -> list:
    data, gamma, beta, mean, var = (reader.symbol(name) for name in node.input[:5])
    reader.aux.update(node.input[3:5])
    return [F.BatchNorm(data, gamma, beta, mean, var, eps=attrs.get("epsilon", 1e-5),
                        momentum=attrs.get("momentum", 0.9), fix_gamma=False,
                        name=node.output[0])]


def _gemm(reader: _Reader, node: Any, attrs: dict) -> list:
    """``alpha * A @ B + beta * C`` as FullyConnected: B stored as (out, in), scaled once."""
    if attrs.get("transA"):
        raise reader.error("transA=1 is not supported; transpose the data before Gemm")
    weight = reader.constant(node.input[1], "Gemm's B")
    alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
    weight = weight if attrs.get("transB") else weight.T
    if alpha != 1 or not weight.flags.c_contiguous:  # a new array: charged
        reader.budget.charge(weight.nbytes, "Gemm's B, transposed or scaled")
        reader.constants[node.input[1]] = np.ascontiguousarray(weight * alpha, weight.dtype)
    bias = []
    if len(node.input) > 2 and node.input[2]:
        bias_values = reader.constant(node.input[2], "Gemm's C")
        reader.constants[node.input[2]] = np.broadcast_to(
            bias_values * beta, (weight.shape[0],)).astype(bias_values.dtype)
        bias = [reader.symbol(node.input[2])]
    return [F.FullyConnected(reader.symbol(node.input[0]), reader.symbol(node.input[1]),
                             *bias, num_hidden=weight.shape[0], no_bias=not bias,
                             flatten=False, name=node.output[0])]


def _matmul(reader: _Reader, node: Any, attrs: dict) -> list:
    """numpy's matmul: a batch of matrices times a batch (batch_dot), else ``dot``."""
    left, right = (reader.symbol(name) for name in node.input[:2])
    left_rank, right_rank = (reader.rank(name) for name in node.input[:2])
    if left_rank is None or right_rank is None:
        raise reader.error(f"MatMul is a batch product for 3-D inputs and more, and "
                           f"hybridlab cannot infer the ranks of {list(node.input[:2])}")
    if left_rank >= 3 and left_rank == right_rank:
        return [F.batch_dot(left, right)]
    return [F.dot(left, right)]


def _reshape(reader: _Reader, node: Any, attrs: dict) -> list:
    if reader.opset < 5:
        target = attrs["shape"]
    else:
        target = reader.constant(node.input[1], "the target shape")
    if attrs.get("allowzero"):
        raise reader.error("allowzero=1 (a 0 meaning an empty axis) is not supported")
    return [F.Reshape(reader.symbol(node.input[0]), shape=tuple(int(d) for d in target))]


def _flatten(reader: _Reader, node: Any, attrs: dict) -> list:
    """A matrix of the axes before ``axis`` by those after: either product is enough
    (Reshape's -1 makes the other), so a free batch size is no obstacle."""
    axis, data = attrs.get("axis", 1), reader.symbol(node.input[0])
    if axis == 1:
        return [F.Flatten(data)]
    why = f"Flatten at axis {axis}"
    shape = reader.partial_shape(node.input[0]) or reader.shape(node.input[0], why)
    axis %= len(shape) or 1
    if 0 in shape[axis:] and 0 in shape[:axis]:
        reader.shape(node.input[0], why)  # refused, saying what is known
    if 0 not in shape[axis:]:
        return [F.Reshape(data, shape=(-1, math.prod(shape[axis:])))]
    return [F.Reshape(data, shape=(math.prod(shape[:axis]), -1))]


def _softmax(name: str) -> Rule:
    """Softmax and LogSoftmax: over one axis from opset 13, over the input flattened to
    2-D at ``axis`` before it (the same unless ``axis`` is the last)."""
    def rule(reader: _Reader, node: Any, attrs: dict) -> list:
        data = reader.symbol(node.input[0])
        rank = reader.rank(node.input[0]) or 0
        axis = attrs.get("axis", -1 if reader.opset >= 13 else 1)
        if reader.opset >= 13 or (rank and axis % rank == rank - 1):
            return [getattr(F, name)(data, axis=axis)]
        shape = reader.shape(node.input[0], f"{node.op_type} before opset 13")
        flat = F.Reshape(data, shape=(math.prod(shape[:axis % len(shape)]), -1))
        return [F.reshape_like(getattr(F, name)(flat, axis=1), data)]
    return rule


def _axes(reader: _Reader, node: Any, attrs: dict) -> tuple[int, ...]:
    """The ``axes`` of Squeeze/Unsqueeze: an attribute, or from opset 13 an input."""
    if "axes" in attrs:
        return tuple(attrs["axes"])
    if len(node.input) > 1:
        return tuple(int(axis) for axis in reader.constant(node.input[1], "axes"))
    return ()


def _unsqueeze(reader: _Reader, node: Any, attrs: dict) -> list:
    out = reader.symbol(node.input[0])
    axes = _axes(reader, node, attrs)
    if any(axis < 0 for axis in axes):
        rank = reader.rank(node.input[0])
        if rank is None:
            raise reader.error(f"Unsqueeze at the axes {list(axes)} needs the rank of "
                               f"{node.input[0]!r}, which hybridlab cannot infer")
        axes = tuple(axis % (rank + len(axes)) for axis in axes)
    for axis in sorted(axes):
        out = F.expand_dims(out, axis=axis)
    return [out]


def _squeeze(reader: _Reader, node: Any, attrs: dict) -> list:
    return [F.squeeze(reader.symbol(node.input[0]), axis=_axes(reader, node, attrs) or None)]


def _clip(reader: _Reader, node: Any, attrs: dict) -> list:
    """Bounds are attributes before opset 11 and optional constant inputs from it."""
    low, high = attrs.get("min", -np.inf), attrs.get("max", np.inf)
    if reader.opset >= 11:
        names = list(node.input[1:3]) + ["", ""]
        low = float(reader.constant(names[0], "min")) if names[0] else -np.inf
        high = float(reader.constant(names[1], "max")) if names[1] else np.inf
    limit = float(np.finfo(np.float32).max)
    return [F.clip(reader.symbol(node.input[0]), a_min=max(low, -limit),
                   a_max=min(high, limit))]


def _dropout(reader: _Reader, node: Any, attrs: dict) -> list:
    ratio = attrs.get("ratio", 0.5)
    if reader.opset >= 12 and len(node.input) > 1 and node.input[1]:
        ratio = float(reader.constant(node.input[1], "ratio"))
    return [F.Dropout(reader.symbol(node.input[0]), p=ratio)]


def _concat(reader: _Reader, node: Any, attrs: dict) -> list:
    inputs = [reader.symbol(name) for name in node.input]  # (a negative axis counts back)
    return [F.Concat(*inputs, dim=attrs.get("axis", 1), num_args=len(inputs))]


def _transpose(reader: _Reader, node: Any, attrs: dict) -> list:
    return [F.transpose(reader.symbol(node.input[0]), axes=tuple(attrs.get("perm", ())))]


def _gather(reader: _Reader, node: Any, attrs: dict) -> list:
    return [F.take(reader.symbol(node.input[0]), reader.symbol(node.input[1]),
                   axis=attrs.get("axis", 0))]


def _leaky(act_type: str, default_slope: float) -> Rule:
    """LeakyRelu and Elu: MXNet's LeakyReLU with ``act_type`` and ONNX's ``alpha``."""
    return lambda reader, node, attrs: [F.LeakyReLU(
        reader.symbol(node.input[0]), act_type=act_type,
        slope=attrs.get("alpha", default_slope))]


def _softplus(reader: _Reader, node: Any, attrs: dict) -> list:
    return [F.Activation(reader.symbol(node.input[0]), act_type="softrelu")]


def _lrn(reader: _Reader, node: Any, attrs: dict) -> list:
    return [F.LRN(reader.symbol(node.input[0]), nsize=attrs["size"],
                  alpha=attrs.get("alpha", 1e-4), beta=attrs.get("beta", 0.75),
                  knorm=attrs.get("bias", 1.0))]


def _identity(reader: _Reader, node: Any, attrs: dict) -> list:
    return [reader.symbol(node.input[0])]


def _shape(reader: _Reader, node: Any, attrs: dict) -> list:
    """A value's shape is known at import, so ``Shape`` is a constant (no Symbol)."""
    reader.constants[node.output[0]] = np.array(
        reader.shape(node.input[0], "Shape of a value computed by the graph"), np.int64)
    return []


IMPORTERS: dict[str, Rule] = {
    "Conv": _conv, "BatchNormalization": _batch_norm, "Gemm": _gemm, "MatMul": _matmul,
    "Relu": _unary("relu"), "Sigmoid": _unary("sigmoid"), "Tanh": _unary("tanh"),
    "Exp": _unary("exp"), "Log": _unary("log"), "Sqrt": _unary("sqrt"), "Abs": _unary("abs"),
    "Neg": _unary("negative"), "Identity": _identity, "Shape": _shape,
    "Add": _binary("broadcast_add"), "Sub": _binary("broadcast_sub"),
    "Mul": _binary("broadcast_mul"), "Div": _binary("broadcast_div"), "Sum": _sum,
    "MaxPool": _pool("max"), "AveragePool": _pool("avg"),
    "GlobalAveragePool": _global_pool("avg"), "GlobalMaxPool": _global_pool("max"),
    "Concat": _concat, "Flatten": _flatten, "Reshape": _reshape,
    "Softmax": _softmax("softmax"), "LogSoftmax": _softmax("log_softmax"),
    "Transpose": _transpose, "Unsqueeze": _unsqueeze, "Squeeze": _squeeze, "Clip": _clip,
    "Dropout": _dropout, "LeakyRelu": _leaky("leaky", 0.01), "Elu": _leaky("elu", 1.0),
    "Softplus": _softplus, "Gather": _gather, "LRN": _lrn,
}


def _documented(what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Every failure of the decorated function is an ``OnnxImportError`` (a rule's and a
    node's say which node already; the rest say the step: ``what``)."""
    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return function(*args, **kwargs)
            except OnnxImportError:
                raise
            except Exception as err:  # numpy, onnx or an operator refused the model
                raise OnnxImportError(f"ONNX import ({what}): {type(err).__name__}: "
                                      f"{err}") from err
        return wrapper
    return decorate


def _read(model: Any, folder: str | None, budget: Budget) -> _Reader:
    """Read every node of the model, in order (ONNX stores them sorted)."""
    reader = _Reader(model, folder, budget)
    for node in model.graph.node:
        reader.node = node
        try:
            _read_node(reader, node)
        except OnnxImportError as err:
            if str(err).startswith("ONNX node"):
                raise
            raise reader.error(str(err)) from err
        except Exception as err:  # numpy or an operator refused the values or attributes
            raise reader.error(f"{type(err).__name__}: {err}") from err
    return reader


def _read_node(reader: _Reader, node: Any) -> None:
    """Fold the node if its inputs are constants and a numpy rule exists, else build it."""
    if node.domain not in ("", "ai.onnx"):
        raise reader.error(f"operators of domain {node.domain!r} are not supported")
    attrs = reader.attributes(node)
    inputs = [name for name in node.input if name]
    if node.op_type in CONSTANT_RULES and all(name in reader.constants for name in inputs):
        arrays = [reader.constants[name] for name in inputs]
        folding = CONSTANT_RULES[node.op_type]
        reader.budget.charge(folding.size(arrays, attrs), "its folded value")
        reader.constants[node.output[0]] = np.asarray(folding.fold(reader, arrays, attrs))
        return
    rule = IMPORTERS.get(node.op_type)
    if rule is None:
        raise reader.error(f"operator {node.op_type!r} has no import rule; supported: "
                           f"{sorted(IMPORTERS)}")
    for name, result in zip([name for name in node.output if name], rule(reader, node, attrs)):
        reader.symbols[name] = result


def _load(model_file: Any) -> tuple[Any, str | None, Budget]:
    """The model, the folder its external data may come from, and the import's budget."""
    budget = Budget()
    model, folder = load_model(model_file, budget)
    return model, folder, budget


def _import(model: Any, folder: str | None, budget: Budget) -> tuple[Any, dict, dict]:
    reader = _read(model, folder, budget)
    reader.node = None
    missing = [output.name for output in model.graph.output if output.name not in reader.symbols]
    if missing or not model.graph.output:
        raise OnnxImportError(f"ONNX outputs {missing} are constants of the file (or there "
                              f"are none): a hybridlab graph computes each output from its "
                              f"inputs")
    outputs = [reader.symbols[output.name] for output in model.graph.output]
    sym = outputs[0] if len(outputs) == 1 else symbol.Group(outputs)
    used = set(sym.list_inputs())  # a weight only an unused node reads is left out
    args = {name: ndarray.array(values) for name, values in reader.params.items()
            if name in used and name not in reader.aux}
    aux = {name: ndarray.array(values) for name, values in reader.params.items()
           if name in used and name in reader.aux}
    return sym, args, aux


@_documented("reading the model")
def import_model(model_file: Any) -> tuple[Any, dict, dict]:
    """``(sym, arg_params, aux_params)`` of an ONNX file (or a loaded ``ModelProto``), as
    MXNet 1.9's ``mx.contrib.onnx.import_model``: the graph's outputs as one Symbol (a
    Group when several), its parameters and auxiliary states as NDArrays by name.
    Raises :class:`~hybridlab.errors.OnnxImportError` for anything it cannot read, and
    refuses a model that would hold more than ``HYBRIDLAB_ONNX_MAX_BYTES`` (``config.py``)
    before allocating it."""
    return _import(*_load(model_file))


def _described(infos: Any, keep: Callable[[str], bool]) -> list:
    return [(info.name, tuple(dim.dim_value for dim in info.type.tensor_type.shape.dim))
            for info in infos if keep(info.name)]


def _metadata(model: Any) -> dict[str, list]:
    computed = {name for node in model.graph.node for name in node.output}
    stored = {tensor.name for tensor in model.graph.initializer} | computed
    return {"input_tensor_data": _described(model.graph.input, lambda name: name not in stored),
            "output_tensor_data": _described(model.graph.output, lambda name: True)}


@_documented("reading the model's inputs and outputs")
def get_model_metadata(model_file: Any) -> dict[str, list]:
    """The data inputs and the outputs of an ONNX file with their shapes (a free dimension
    is 0): ``{'input_tensor_data': [(name, shape)], 'output_tensor_data': [...]}``."""
    return _metadata(_load(model_file)[0])


@_documented("building the SymbolBlock")
def import_to_gluon(model_file: Any, ctx: Any = None) -> Any:
    """A ``gluon.SymbolBlock`` computing the ONNX model, its parameters loaded on ``ctx``
    (a Context or a list of them, one copy each; default the current context), as MXNet
    1.9's ``mx.contrib.onnx.import_to_gluon``. Call it with the data inputs in the file's
    order (``get_model_metadata``)."""
    from hybridlab.gluon import SymbolBlock

    model, folder, budget = _load(model_file)
    sym, args, aux = _import(model, folder, budget)
    names = [name for name, _ in _metadata(model)["input_tensor_data"]]
    block = SymbolBlock(sym, [symbol.var(name) for name in names])
    for name, values in {**args, **aux}.items():
        block.params[name].set_data(values)
        if ctx is not None:
            block.params[name].reset_ctx(ctx)
    return block
