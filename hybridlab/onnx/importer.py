"""ONNX import: ``mx.contrib.onnx.import_model``, ``import_to_gluon``, ``get_model_metadata``.

What this module teaches
------------------------
An ONNX file is a graph of nodes in single-assignment form, weights as *initializers*,
and the inputs a caller feeds. Reading it into hybridlab is the export walk backwards:
every node becomes one or a few registry operators (one row of :data:`IMPORTERS` each),
every weight a parameter, and ONNX's broadcasting arithmetic MXNet's ``broadcast_*``.
Two things need care:

* **Constant subgraphs.** Files often compute weights instead of storing them
  (``ConstantOfShape`` of a stored shape, ``Shape -> Gather -> Concat`` before a
  ``Reshape``). A node whose inputs are all known constants is evaluated at import with
  numpy (:data:`CONSTANT_RULES`); its result is a constant like any initializer, and a
  constant an operator reads becomes a parameter. So no constant arithmetic reaches the
  graph, and a folded weight trains like a stored one.
* **Opsets.** An operator's meaning can change between opsets (``Softmax`` flattens its
  input before opset 13; ``Unsqueeze`` and ``Clip`` take attributes before 13 and 11 and
  inputs after). Each rule reads the model's opset.

ONNX's shape inference (``onnx.shape_inference``) gives every value's shape, for the rules
that need one (a negative axis, ``Flatten`` at an axis other than 1).

Invariants
----------
* Nothing in the file is executed: protobuf is parsed by ``onnx``, attributes are read as
  data, and an operator without a rule is an :class:`~hybridlab.errors.OnnxImportError`
  naming the node and the operator.
* Parameters keep their ONNX names; BatchNormalization's running statistics are auxiliary
  states (``aux_params``), as in MXNet.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from hybridlab import ndarray, symbol
from hybridlab.errors import OnnxImportError

F: Any = symbol  # the operators, generated from the registry (MXNet's F in hybrid_forward)


class _Reader:
    """One model being read: its constants, the Symbols made so far, the parameters."""

    def __init__(self, model: Any) -> None:
        import onnx
        from onnx import numpy_helper

        self.onnx, self.numpy_helper = onnx, numpy_helper
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
                          1)
        try:
            inferred = onnx.shape_inference.infer_shapes(model).graph
        except Exception:
            inferred = model.graph
        self.shapes: dict[str, tuple[int, ...]] = {}
        for info in [*inferred.value_info, *inferred.input, *inferred.output]:
            dims = info.type.tensor_type.shape.dim
            if info.type.tensor_type.HasField("shape") and all(d.HasField("dim_value")
                                                                for d in dims):
                self.shapes[info.name] = tuple(d.dim_value for d in dims)
        self.constants = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
        computed = {o for node in model.graph.node for o in node.output}
        self.values: dict[str, Any] = {  # ONNX value name -> Symbol; first the data inputs
            i.name: symbol.var(i.name) for i in model.graph.input
            if i.name not in self.constants and i.name not in computed}
        self.params: dict[str, np.ndarray] = {}
        self.aux: set[str] = set()
        self.node: Any = None

    def attrs(self, node: Any) -> dict[str, Any]:
        get = self.onnx.helper.get_attribute_value
        return {a.name: _plain(get(a)) for a in node.attribute}

    def value(self, name: str) -> Any:
        """The Symbol of an ONNX value; a constant becomes a parameter the first time."""
        if name not in self.values:
            if name not in self.constants:
                raise self.error(f"input {name!r} is neither computed before this node, a "
                                 f"graph input, nor an initializer")
            self.params[name] = self.constants[name]
            self.values[name] = symbol.var(name)
        return self.values[name]

    def constant(self, name: str, what: str) -> np.ndarray:
        if name not in self.constants:
            raise self.error(f"{what} ({name!r}) must be a constant of the file (an "
                             f"initializer, or computed from initializers) for hybridlab")
        return self.constants[name]

    def error(self, message: str) -> OnnxImportError:
        node = self.node
        return OnnxImportError(f"ONNX node {node.name or node.output[0]!r} ({node.op_type}, "
                               f"opset {self.opset}): {message}")


def _plain(value: Any) -> Any:
    """Attribute values as Python: bytes as str, lists as tuples, tensors as numpy."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list):
        return tuple(v.decode() if isinstance(v, bytes) else v for v in value)
    if hasattr(value, "dims") and hasattr(value, "data_type"):
        from onnx import numpy_helper

        return numpy_helper.to_array(value)
    return value


# --- constant folding at import: numpy rules for nodes whose inputs are all constants ---
def _const_of_shape(r: _Reader, ins: list, a: dict) -> np.ndarray:
    fill = a.get("value", np.zeros(1, np.float32))
    return np.full(tuple(int(d) for d in ins[0]), fill.reshape(-1)[0], fill.dtype)


def _unsqueeze_const(r: _Reader, ins: list, a: dict) -> np.ndarray:
    axes = a.get("axes", tuple(ins[1]) if len(ins) > 1 else ())
    out = ins[0]
    for axis in sorted(int(x) % (out.ndim + len(axes)) for x in axes):
        out = np.expand_dims(out, axis)
    return out


CONSTANT_RULES: dict[str, Callable[[_Reader, list, dict], np.ndarray]] = {
    "Constant": lambda r, ins, a: a["value"],
    "ConstantOfShape": _const_of_shape,
    "Identity": lambda r, ins, a: ins[0],
    "Cast": lambda r, ins, a: ins[0].astype(r.onnx.helper.tensor_dtype_to_np_dtype(a["to"])),
    "Unsqueeze": _unsqueeze_const,
    "Squeeze": lambda r, ins, a: np.squeeze(ins[0], tuple(
        a.get("axes", ins[1] if len(ins) > 1 else ())) or None),
    "Reshape": lambda r, ins, a: ins[0].reshape([d or s for d, s in zip(ins[1], ins[0].shape)]
                                                + list(ins[1][ins[0].ndim:])),
    "Concat": lambda r, ins, a: np.concatenate(ins, axis=a["axis"]),
    "Gather": lambda r, ins, a: np.take(ins[0], ins[1], axis=a.get("axis", 0)),
    "Add": lambda r, ins, a: ins[0] + ins[1],
    "Sub": lambda r, ins, a: ins[0] - ins[1],
    "Mul": lambda r, ins, a: ins[0] * ins[1],
    "Div": lambda r, ins, a: ins[0] / ins[1],
    "Sqrt": lambda r, ins, a: np.sqrt(ins[0]),
    "Transpose": lambda r, ins, a: np.transpose(ins[0], a.get("perm")),
}


# --- the mapping table: one rule per ONNX operator ---------------------------------------
# A rule is fn(reader, node, attributes) -> the Symbols of the node's outputs.
Rule = Callable[[_Reader, Any, dict], list]


def _unary(name: str) -> Rule:
    return lambda r, node, a: [getattr(F, name)(r.value(node.input[0]))]


def _binary(name: str) -> Rule:
    def rule(r: _Reader, node: Any, a: dict) -> list:
        left, right = node.input[0], node.input[1]
        if a.get("broadcast") and "axis" in a and right in r.constants:  # before opset 7
            rank = len(r.shapes.get(left, ())) or r.constants[right].ndim + a["axis"]
            tail = rank - a["axis"] - r.constants[right].ndim
            r.constants[right] = r.constants[right].reshape(
                r.constants[right].shape + (1,) * max(tail, 0))
        return [getattr(F, name)(r.value(left), r.value(right))]
    return rule


def _sum(r: _Reader, node: Any, a: dict) -> list:
    total = r.value(node.input[0])
    for name in node.input[1:]:
        total = F.broadcast_add(total, r.value(name))
    return [total]


def _pads(r: _Reader, a: dict, rank: int) -> tuple[int, ...]:
    pads = tuple(a.get("pads", (0,) * (2 * rank)))
    if a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        raise r.error(f"auto_pad={a['auto_pad']!r}: write the pads out (pads=...)")
    if pads[:rank] != pads[rank:]:
        raise r.error(f"asymmetric pads {list(pads)}: hybridlab's Convolution and Pooling pad "
                      f"both sides alike")
    return pads[:rank]


def _conv(r: _Reader, node: Any, a: dict) -> list:
    weight = r.constants.get(node.input[1])
    shape = weight.shape if weight is not None else r.shapes.get(node.input[1])
    if shape is None:
        raise r.error("the weight's shape is unknown")
    kernel = tuple(a.get("kernel_shape", shape[2:]))
    _two_d(r, kernel)
    inputs = [r.value(n) for n in node.input[:3]]
    return [F.Convolution(*inputs, kernel=kernel, num_filter=shape[0],
                               stride=tuple(a.get("strides", (1,) * len(kernel))),
                               dilate=tuple(a.get("dilations", (1,) * len(kernel))),
                               pad=_pads(r, a, len(kernel)), num_group=a.get("group", 1),
                               no_bias=len(node.input) < 3 or not node.input[2],
                               name=node.output[0])]


def _two_d(r: _Reader, kernel: tuple) -> None:
    if len(kernel) != 2:
        raise r.error(f"a {len(kernel)}-D window: hybridlab's Convolution and Pooling are 2-D "
                      f"(NCHW)")


def _pool(kind: str) -> Rule:
    def rule(r: _Reader, node: Any, a: dict) -> list:
        kernel = tuple(a["kernel_shape"])
        _two_d(r, kernel)
        if any(d != 1 for d in a.get("dilations", ())):
            raise r.error("dilated pooling has no hybridlab form")
        stride = tuple(a.get("strides", (1,) * len(kernel)))
        full, pads = bool(a.get("ceil_mode")), tuple(a.get("pads", (0,) * 2 * len(kernel)))
        if pads[:len(kernel)] != pads[len(kernel):] and not full:
            if _uneven_pads(r, node, kernel, stride, pads, kind, a) == "global":
                return _global_pool(kind)(r, node, a)
            full, a = True, {**a, "pads": pads[:len(kernel)] * 2}
        return [F.Pooling(r.value(node.input[0]), kernel=kernel, pool_type=kind,
                               stride=stride, pad=_pads(r, a, len(kernel)),
                               pooling_convention="full" if full else "valid",
                               count_include_pad=bool(a.get("count_include_pad", 0)),
                               name=node.output[0])]
    return rule


def _uneven_pads(r: _Reader, node: Any, kernel: tuple, stride: tuple, pads: tuple,
                 kind: str, a: dict) -> str:
    """Pads larger at the end than at the start (Caffe's ceil mode, converted) when the
    padding is never counted (max pooling, or averages over real values only): one window
    over the whole input is a ``"global"`` pool; windows that MXNet's
    ``pooling_convention='full'`` makes alike (same starts, same count) are ``"full"``."""
    shape, rank = r.shapes.get(node.input[0]), len(kernel)
    if shape is None or (kind == "avg" and a.get("count_include_pad")):
        raise r.error(f"asymmetric pads {list(pads)}: hybridlab's Pooling pads both sides "
                      f"alike")
    dims = list(zip(shape[2:], kernel, stride, pads[:rank], pads[rank:]))
    if all(begin == 0 and k >= size and (size + end - k) // s == 0
           for size, k, s, begin, end in dims):
        return "global"
    for size, k, s, begin, end in dims:
        if end < begin or (size + begin + end - k) // s != math.ceil((size + 2 * begin - k) / s):
            raise r.error(f"asymmetric pads {list(pads)} on an input of {shape}: not the "
                          f"windows of pooling_convention='full'")
    return "full"


def _global_pool(kind: str) -> Rule:
    return lambda r, node, a: [F.Pooling(r.value(node.input[0]), kernel=(1, 1),
                                              pool_type=kind, global_pool=True,
                                              name=node.output[0])]


def _batch_norm(r: _Reader, node: Any, a: dict) -> list:
    data, gamma, beta, mean, var = (r.value(n) for n in node.input[:5])
    r.aux.update(node.input[3:5])
    return [F.BatchNorm(data, gamma, beta, mean, var, eps=a.get("epsilon", 1e-5),
                             momentum=a.get("momentum", 0.9), fix_gamma=False,
                             name=node.output[0])]


def _gemm(r: _Reader, node: Any, a: dict) -> list:
    if a.get("transA"):
        raise r.error("transA=1 is not supported; transpose the data before Gemm")
    weight = r.constant(node.input[1], "Gemm's B")
    alpha, beta = a.get("alpha", 1.0), a.get("beta", 1.0)
    weight = weight if a.get("transB") else weight.T  # FullyConnected wants (out, in)
    r.constants[node.input[1]] = np.ascontiguousarray(weight * alpha, weight.dtype)
    bias = []
    if len(node.input) > 2 and node.input[2]:
        bias_values = r.constant(node.input[2], "Gemm's C")
        r.constants[node.input[2]] = np.broadcast_to(
            bias_values * beta, (weight.shape[0],)).astype(bias_values.dtype)
        bias = [r.value(node.input[2])]
    return [F.FullyConnected(r.value(node.input[0]), r.value(node.input[1]), *bias,
                                  num_hidden=weight.shape[0], no_bias=not bias, flatten=False,
                                  name=node.output[0])]


def _matmul(r: _Reader, node: Any, a: dict) -> list:
    left, right = (r.value(n) for n in node.input[:2])
    ranks = [len(r.shapes.get(n, r.constants.get(n, np.zeros(())).shape)) for n in node.input]
    if ranks[0] >= 3 and ranks[0] == ranks[1]:
        return [F.batch_dot(left, right)]
    return [F.dot(left, right)]


def _reshape(r: _Reader, node: Any, a: dict) -> list:
    shape = a["shape"] if r.opset < 5 else r.constant(node.input[1], "the target shape")
    if a.get("allowzero"):
        raise r.error("allowzero=1 (a 0 meaning an empty axis) is not supported")
    return [F.Reshape(r.value(node.input[0]), shape=tuple(int(d) for d in shape))]


def _flatten(r: _Reader, node: Any, a: dict) -> list:
    axis, data = a.get("axis", 1), r.value(node.input[0])
    if axis == 1:
        return [F.Flatten(data)]
    shape = r.shapes.get(node.input[0])
    if shape is None:
        raise r.error(f"Flatten at axis {axis} needs the input's shape")
    axis %= len(shape) or 1
    return [F.Reshape(data, shape=(math.prod(shape[:axis]), -1))]


def _softmax(r: _Reader, node: Any, a: dict, name: str = "softmax") -> list:
    data = r.value(node.input[0])
    rank = len(r.shapes.get(node.input[0], ()))
    axis = a.get("axis", -1 if r.opset >= 13 else 1)
    if r.opset >= 13 or (rank and axis % rank == rank - 1):
        return [getattr(F, name)(data, axis=axis)]
    shape = r.shapes.get(node.input[0])  # before opset 13: softmax of the input flattened
    if shape is None:                    # to 2-D at ``axis``
        raise r.error("Softmax before opset 13 needs the input's shape")
    flat = F.Reshape(data, shape=(math.prod(shape[:axis % rank]), -1))
    return [F.reshape_like(getattr(F, name)(flat, axis=1), data)]


def _axes(r: _Reader, node: Any, a: dict) -> tuple[int, ...]:
    if "axes" in a:
        return tuple(a["axes"])
    return tuple(int(x) for x in r.constant(node.input[1], "axes")) if len(node.input) > 1 \
        else ()


def _unsqueeze(r: _Reader, node: Any, a: dict) -> list:
    out = r.value(node.input[0])
    axes = _axes(r, node, a)
    rank = len(r.shapes.get(node.input[0], ())) + len(axes)
    for axis in sorted(x % rank if rank else x for x in axes):
        out = F.expand_dims(out, axis=axis)
    return [out]


def _clip(r: _Reader, node: Any, a: dict) -> list:
    low, high = a.get("min", -np.inf), a.get("max", np.inf)
    if r.opset >= 11:
        names = list(node.input[1:3]) + ["", ""]
        low = float(r.constant(names[0], "min")) if names[0] else -np.inf
        high = float(r.constant(names[1], "max")) if names[1] else np.inf
    limit = float(np.finfo(np.float32).max)
    return [F.clip(r.value(node.input[0]), a_min=max(low, -limit), a_max=min(high, limit))]


def _dropout(r: _Reader, node: Any, a: dict) -> list:
    ratio = a.get("ratio", 0.5)
    if r.opset >= 12 and len(node.input) > 1 and node.input[1]:
        ratio = float(r.constant(node.input[1], "ratio"))
    return [F.Dropout(r.value(node.input[0]), p=ratio)]


def _concat(r: _Reader, node: Any, a: dict) -> list:
    axis = a.get("axis", 1)
    if axis < 0:
        axis += len(r.shapes.get(node.input[0], ())) or 0
    inputs = [r.value(n) for n in node.input]
    return [F.Concat(*inputs, dim=axis, num_args=len(inputs))]


IMPORTERS: dict[str, Rule] = {
    "Conv": _conv, "BatchNormalization": _batch_norm, "Gemm": _gemm, "MatMul": _matmul,
    "Relu": _unary("relu"), "Sigmoid": _unary("sigmoid"), "Tanh": _unary("tanh"),
    "Exp": _unary("exp"), "Log": _unary("log"), "Sqrt": _unary("sqrt"), "Abs": _unary("abs"),
    "Neg": _unary("negative"), "Identity": lambda r, node, a: [r.value(node.input[0])],
    "Add": _binary("broadcast_add"), "Sub": _binary("broadcast_sub"),
    "Mul": _binary("broadcast_mul"), "Div": _binary("broadcast_div"), "Sum": _sum,
    "MaxPool": _pool("max"), "AveragePool": _pool("avg"),
    "GlobalAveragePool": _global_pool("avg"), "GlobalMaxPool": _global_pool("max"),
    "Concat": _concat, "Flatten": _flatten, "Reshape": _reshape, "Softmax": _softmax,
    "Transpose": lambda r, node, a: [F.transpose(r.value(node.input[0]),
                                                      axes=tuple(a.get("perm", ())))],
    "Unsqueeze": _unsqueeze, "Clip": _clip, "Dropout": _dropout,
    "Squeeze": lambda r, node, a: [F.squeeze(r.value(node.input[0]),
                                                  axis=_axes(r, node, a) or None)],
    "LogSoftmax": lambda r, node, a: _softmax(r, node, a, "log_softmax"),
    "LeakyRelu": lambda r, node, a: [F.LeakyReLU(r.value(node.input[0]), act_type="leaky",
                                                 slope=a.get("alpha", 0.01))],
    "Elu": lambda r, node, a: [F.LeakyReLU(r.value(node.input[0]), act_type="elu",
                                           slope=a.get("alpha", 1.0))],
    "Softplus": lambda r, node, a: [F.Activation(r.value(node.input[0]), act_type="softrelu")],
    "Gather": lambda r, node, a: [F.take(r.value(node.input[0]), r.value(node.input[1]),
                                         axis=a.get("axis", 0))],
    "LRN": lambda r, node, a: [F.LRN(r.value(node.input[0]), nsize=a["size"],
                                          alpha=a.get("alpha", 1e-4), beta=a.get("beta", 0.75),
                                          knorm=a.get("bias", 1.0))],
}


def _load(model_file: Any) -> Any:
    """A ``ModelProto`` from a path (parsed by onnx: protobuf, nothing executed) or as given."""
    import onnx

    if hasattr(model_file, "graph"):
        return model_file
    try:
        return onnx.load(str(model_file))
    except Exception as err:
        raise OnnxImportError(f"{model_file}: not an ONNX model ({type(err).__name__}: "
                              f"{err})") from None


def _read(model_file: Any) -> tuple[Any, _Reader]:
    model = _load(model_file)
    reader = _Reader(model)
    for node in model.graph.node:
        reader.node = node
        _read_node(reader, node)
    return model, reader


def _read_node(reader: _Reader, node: Any) -> None:
    attrs = reader.attrs(node)
    if node.domain not in ("", "ai.onnx"):
        raise reader.error(f"operators of domain {node.domain!r} are not supported")
    if all(n in reader.constants for n in node.input if n) and node.op_type in CONSTANT_RULES:
        inputs = [reader.constants[n] for n in node.input if n]
        reader.constants[node.output[0]] = np.asarray(
            CONSTANT_RULES[node.op_type](reader, inputs, attrs))
        return
    if node.op_type == "Shape" and node.input[0] in reader.shapes:  # known statically
        reader.constants[node.output[0]] = np.array(reader.shapes[node.input[0]], np.int64)
        return
    rule = IMPORTERS.get(node.op_type)
    if rule is None:
        raise reader.error(f"operator {node.op_type!r} has no import rule; supported: "
                           f"{sorted(IMPORTERS)}")
    try:
        outputs = rule(reader, node, attrs)
    except OnnxImportError:
        raise
    except Exception as err:  # a rule's operator refused the attributes or shapes
        raise reader.error(f"{type(err).__name__}: {err}") from err
    for name, value in zip([o for o in node.output if o], outputs):
        reader.values[name] = value


def import_model(model_file: Any) -> tuple[Any, dict, dict]:
    """``(sym, arg_params, aux_params)`` of an ONNX file (or a loaded ``ModelProto``), as
    MXNet 1.9's ``mx.contrib.onnx.import_model``: the graph's outputs as one Symbol (a
    Group when several), its parameters and auxiliary states as NDArrays by name."""
    model, reader = _read(model_file)
    missing = [o.name for o in model.graph.output if o.name not in reader.values]
    if missing:
        raise OnnxImportError(f"ONNX outputs {missing} are constants of the file: a "
                              f"hybridlab graph computes each output from its inputs")
    outputs = [reader.values[o.name] for o in model.graph.output]
    sym = outputs[0] if len(outputs) == 1 else symbol.Group(outputs)
    args = {k: ndarray.array(v) for k, v in reader.params.items() if k not in reader.aux}
    aux = {k: ndarray.array(v) for k, v in reader.params.items() if k in reader.aux}
    return sym, args, aux


def get_model_metadata(model_file: Any) -> dict[str, list]:
    """The data inputs and the outputs of an ONNX file with their shapes (a free dimension
    is 0): ``{'input_tensor_data': [(name, shape)], 'output_tensor_data': [...]}``."""
    model = _load(model_file)
    computed = {o for node in model.graph.node for o in node.output}
    stored = {t.name for t in model.graph.initializer} | computed

    def described(infos: Any, keep: Callable[[str], bool]) -> list:
        return [(i.name, tuple(d.dim_value for d in i.type.tensor_type.shape.dim))
                for i in infos if keep(i.name)]

    return {"input_tensor_data": described(model.graph.input, lambda n: n not in stored),
            "output_tensor_data": described(model.graph.output, lambda n: True)}


def import_to_gluon(model_file: Any, ctx: Any = None) -> Any:
    """A ``gluon.SymbolBlock`` computing the ONNX model, its parameters loaded (MXNet 1.9's
    ``mx.contrib.onnx.import_to_gluon``); call it with the data inputs in the file's order
    (``get_model_metadata``). ``ctx`` is accepted for MXNet's signature (one CPU here)."""
    from hybridlab.gluon import SymbolBlock

    model = _load(model_file)
    sym, args, aux = import_model(model)
    names = [name for name, _ in get_model_metadata(model)["input_tensor_data"]]
    block = SymbolBlock(sym, [symbol.var(n) for n in names])
    for name, value in {**args, **aux}.items():
        block.params[name].set_data(value)
    return block
