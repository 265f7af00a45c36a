"""ONNX export: ``mx.onnx.export_model``, MXNet 1.9's API, for hybridlab's graphs.

What this module teaches
------------------------
An exported model is a graph plus weights; ONNX is one more spelling of the same thing
that other runtimes (onnxruntime, TensorRT, a browser) understand. Exporting is a walk
over the graph IR (``graph.ir``): every ``var`` becomes a graph input (data) or an
initializer (a parameter, with its values), every ``call`` becomes one or a few ONNX
nodes, and the graph's outputs become ONNX outputs. The translation of each operator is
one row of :data:`ONNX_OPS` below, kept in this one table rather than in the registry:
the registry stays small, the table says "define once" for the mapping, and a test checks
that every row names a registry operator. An operator without a row cannot be exported,
and the error names it.

``dynamic=True`` with ``dynamic_input_shapes=[(None, 512)]`` leaves a dimension free (the
batch), so one ``.onnx`` file serves every batch size. The ``onnx`` and ``onnxruntime``
packages are an optional extra (``pip install -e '.[onnx]'`` in the checkout), imported
only here.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any, Callable, Sequence

import numpy as np

from hybridlab import ndarray, symbol
from hybridlab.errors import OnnxExportError
from hybridlab.graph import ir, shapes
from hybridlab.graph.passes import PassContext, lower_operators
from hybridlab.ops.conv import spatial
from hybridlab.ops.nn import gamma_shape
from hybridlab.ops.registry import Aval

OPSET = 17


class _Builder:
    """The ONNX nodes and initializers made so far, and fresh names for values."""

    def __init__(self, helper: Any, numpy_helper: Any) -> None:
        self.helper, self.numpy_helper = helper, numpy_helper
        self.nodes: list = []
        self.initializers: list = []
        self.used: set[str] = set()

    def fresh(self, base: str) -> str:
        name, i = base, 0
        while name in self.used:
            i += 1
            name = f"{base}_{i}"
        self.used.add(name)
        return name

    def const(self, values: Any, dtype: Any, base: str = "const") -> str:
        name = self.fresh(base)
        array = np.asarray(values, dtype=dtype)
        self.initializers.append(self.numpy_helper.from_array(array, name))
        return name

    def add(self, op: str, inputs: Sequence[str], outputs: Sequence[str] | None = None,
            **attrs: Any) -> str:
        outputs = list(outputs) if outputs else [self.fresh(op.lower())]
        self.nodes.append(self.helper.make_node(op, list(inputs), outputs,
                                                name=self.fresh(f"{op}_node"), **attrs))
        return outputs[0]


# --- the mapping table: one row per operator ----------------------------------------------
# A row is fn(builder, node, input names, output name); it adds the ONNX nodes that compute
# the node's (single) output under that name. node.aval gives shapes and dtypes. Rows are
# keyed by the registry's own names; a layer operator without a row (elemwise_add) is
# lowered to primitives first.
Rule = Callable[[_Builder, ir.Node, list, str], Any]  # adds ONNX nodes (a result is unused)


def _simple(onnx_op: str, **fixed: Any) -> Rule:
    return lambda b, node, ins, out: b.add(onnx_op, ins, [out], **fixed)


def _scalar(onnx_op: str, reverse: bool = False) -> Rule:
    def rule(b: _Builder, node: ir.Node, ins: list, out: str) -> None:
        scalar = b.const(node.attr_dict["scalar"], node.aval[0].dtype, "scalar")  # type: ignore[index]
        b.add(onnx_op, [scalar, ins[0]] if reverse else [ins[0], scalar], [out])
    return rule


def _fully_connected(b: _Builder, node: ir.Node, ins: list, out: str) -> None:
    attrs = node.attr_dict
    bias = [] if attrs.get("no_bias") else ins[2:3]
    rank = len(node.inputs[0].aval.shape) if node.inputs[0].aval else 0
    if rank == 2:  # flatten or not, a matrix times the weight: one Gemm
        b.add("Gemm", [ins[0], ins[1], *bias], [out], transB=1)
        return
    if attrs.get("flatten", True):
        flat = b.add("Flatten", ins[:1], axis=1)
        b.add("Gemm", [flat, ins[1], *bias], [out], transB=1)
        return
    weight_t = b.add("Transpose", [ins[1]], perm=[1, 0])
    if bias:
        b.add("Add", [b.add("MatMul", [ins[0], weight_t]), bias[0]], [out])
    else:
        b.add("MatMul", [ins[0], weight_t], [out])


def _convolution(b: _Builder, node: ir.Node, ins: list, out: str) -> None:
    attrs = spatial("Convolution", node.attr_dict)  # 1-D and 3-D: one value per axis
    pad = list(attrs["pad"])
    b.add("Conv", ins[:2] if attrs.get("no_bias") else ins[:3], [out],
          kernel_shape=list(attrs["kernel"]), strides=list(attrs["stride"]),
          dilations=list(attrs["dilate"]), pads=pad + pad,
          group=attrs.get("num_group", 1))


def _pooling(b: _Builder, node: ir.Node, ins: list, out: str) -> None:
    attrs = node.attr_dict
    kind = attrs.get("pool_type", "max")
    if kind not in ("max", "avg"):
        raise OnnxExportError(f"Pooling {node.name!r}: pool_type={kind!r} has no ONNX "
                              f"mapping (ONNX pools by max or average)")
    if attrs.get("global_pool"):
        b.add("GlobalMaxPool" if kind == "max" else "GlobalAveragePool", ins, [out])
        return
    attrs = spatial("Pooling", attrs, ("stride", "pad"))
    pad, stride = list(attrs["pad"]), list(attrs["stride"])
    extra = {"count_include_pad": int(attrs.get("count_include_pad", True))} if (
        kind == "avg") else {}
    end = pad
    if attrs["pooling_convention"] == "same":  # 1-D max: windows cut at the end
        size = node.inputs[0].aval.shape[2]  # type: ignore[union-attr]  # (known: exported)
        end = [max(0, (-(-size // stride[0]) - 1) * stride[0] + attrs["kernel"][0] - size)]
    b.add("MaxPool" if kind == "max" else "AveragePool", ins, [out],
          kernel_shape=list(attrs["kernel"]), strides=stride,
          pads=pad + end, ceil_mode=int(attrs.get("pooling_convention") == "full"), **extra)


def _leaky_relu(b: _Builder, node: ir.Node, ins: list, out: str) -> None:
    kind, slope = node.attr_dict.get("act_type", "leaky"), float(node.attr_dict.get("slope", 0.25))
    if kind == "prelu":  # ONNX broadcasts the slope from the right: a channel's gets (C,1,..)
        shape = b.const(gamma_shape(*(v.aval for v in node.inputs)), np.int64)
        b.add("PRelu", [ins[0], b.add("Reshape", [ins[1], shape])], [out])
    elif kind in ("leaky", "elu", "selu"):  # (ONNX's Selu defaults are MXNet's constants)
        b.add({"leaky": "LeakyRelu", "elu": "Elu", "selu": "Selu"}[kind], ins, [out],
              **({} if kind == "selu" else {"alpha": slope}))
    else:
        raise OnnxExportError(f"LeakyReLU {node.name!r}: act_type={kind!r} has no ONNX "
                              f"operator in the opsets hybridlab writes")


def _batch_norm(b: _Builder, node: ir.Node, ins: list, out: str) -> None:
    """Inference only (ONNX's BatchNormalization reads the moving statistics)."""
    attrs = node.attr_dict
    if attrs.get("axis", 1) != 1:
        raise OnnxExportError(f"BatchNorm {node.name!r}: axis={attrs['axis']}; ONNX "
                              f"normalises along axis 1 only")
    scale = ins[1]
    if attrs.get("fix_gamma", True):  # gamma taken as 1, as MXNet does
        channels = node.inputs[1].aval.shape  # type: ignore[union-attr]
        scale = b.const(np.ones(channels), node.aval[0].dtype, "gamma_fixed")  # type: ignore[index]
    b.add("BatchNormalization", [ins[0], scale, *ins[2:5]], [out],
          epsilon=float(attrs.get("eps", 1e-3)))


def _reshape(b: _Builder, node: ir.Node, ins: list, out: str) -> None:
    shape = node.attr_dict["shape"]
    if node.attr_dict.get("reverse") or any(d < -1 for d in shape):
        raise OnnxExportError(f"Reshape {node.name!r}: shape={shape} uses MXNet's special "
                              f"codes (-2, -3, -4) or reverse=True, which ONNX's Reshape "
                              f"lacks; write the shape with 0 (copy) and -1 (infer) only")
    b.add("Reshape", [ins[0], b.const(shape, np.int64, "shape")], [out])


def _reshape_like(b: _Builder, node: ir.Node, ins: list, out: str) -> None:
    b.add("Reshape", [ins[0], b.add("Shape", [ins[1]])], [out])


def _dropout_mask(b: _Builder, node: ir.Node, ins: list, out: str) -> None:
    """An exported graph predicts: Dropout's mask is all ones (unless mode='always')."""
    if node.attr_dict.get("mode") == "always":
        raise OnnxExportError(f"Dropout {node.name!r}: mode='always' drops at prediction "
                              f"time too, which an ONNX model cannot express")
    one = b.numpy_helper.from_array(np.ones(1, node.aval[0].dtype), "value")  # type: ignore[index]
    b.add("ConstantOfShape", [b.add("Shape", ins)], [out], value=one)


def _dot(b: _Builder, node: ir.Node, ins: list, out: str) -> None:
    lhs, rhs = ins
    if node.attr_dict.get("transpose_a"):
        lhs = b.add("Transpose", [lhs], perm=[1, 0])
    if node.attr_dict.get("transpose_b"):
        rhs = b.add("Transpose", [rhs], perm=[1, 0])
    b.add("MatMul", [lhs, rhs], [out])


def _transpose(b: _Builder, node: ir.Node, ins: list, out: str) -> None:
    axes = node.attr_dict.get("axes") or tuple(reversed(range(len(node.aval[0].shape))))  # type: ignore[index]
    b.add("Transpose", ins, [out], perm=list(axes))


def _reduce(onnx_op: str) -> Rule:
    def rule(b: _Builder, node: ir.Node, ins: list, out: str) -> None:
        attrs = node.attr_dict
        if attrs.get("exclude"):
            raise OnnxExportError(f"{node.op} {node.name!r}: exclude=True has no ONNX form")
        axis, keep = attrs.get("axis"), int(attrs.get("keepdims", False))
        axes = [] if axis is None else [axis] if isinstance(axis, int) else list(axis)
        if onnx_op == "ReduceSum":  # since opset 13 its axes are an input
            b.add(onnx_op, [ins[0]] + ([b.const(axes, np.int64, "axes")] if axes else []),
                  [out], keepdims=keep)
        else:
            b.add(onnx_op, ins, [out], keepdims=keep, **({"axes": axes} if axes else {}))
    return rule


_ACTIVATIONS = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "softrelu": "Softplus",
                "softsign": "Softsign"}


def _softmax(onnx_op: str) -> Rule:
    def rule(b: _Builder, node: ir.Node, ins: list, out: str) -> None:
        attrs = node.attr_dict
        if attrs.get("temperature") not in (None, 1.0):
            raise OnnxExportError(f"{node.op} {node.name!r}: temperature="
                                  f"{attrs['temperature']} has no ONNX form")
        b.add(onnx_op, ins[:1], [out], axis=attrs.get("axis", -1))
    return rule


def _softmax_output(b: _Builder, node: ir.Node, ins: list, out: str) -> None:
    """What SoftmaxOutput predicts: the softmax over the classes (its label is unused)."""
    attrs, ndim = node.attr_dict, len(node.inputs[0].aval.shape)  # type: ignore[union-attr]
    if ndim != 2 and not (attrs.get("multi_output") or attrs.get("preserve_shape")):
        raise OnnxExportError(f"SoftmaxOutput {node.name!r}: scores of {ndim} dimensions are "
                              f"flattened by MXNet; export 2-d scores (add a Flatten)")
    b.add("Softmax", ins[:1], [out], axis=1 if attrs.get("multi_output") else -1)


def _layer_dropout(b: _Builder, node: ir.Node, ins: list, out: str) -> None:
    if node.attr_dict.get("mode") == "always":
        raise OnnxExportError(f"Dropout {node.name!r}: mode='always' drops at prediction "
                              f"time, which ONNX inference does not")
    b.add("Identity", ins[:1], [out])


ONNX_OPS: dict[str, Rule] = {
    "Activation": lambda b, node, ins, out: b.add(
        _ACTIVATIONS[node.attr_dict["act_type"]], ins, [out]),
    "softmax": _softmax("Softmax"), "log_softmax": _softmax("LogSoftmax"),
    "SoftmaxOutput": _softmax_output, "Dropout": _layer_dropout,
    "FullyConnected": _fully_connected, "Convolution": _convolution, "Pooling": _pooling,
    "Flatten": _simple("Flatten", axis=1), "LeakyReLU": _leaky_relu, "Reshape": _reshape,
    "BatchNorm": _batch_norm, "LRN": lambda b, node, ins, out: b.add(
        "LRN", ins, [out], size=node.attr_dict["nsize"], alpha=node.attr_dict["alpha"],
        beta=node.attr_dict["beta"], bias=node.attr_dict["knorm"]),
    "reshape_like": _reshape_like, "_dropout_mask": _dropout_mask, "dot": _dot,
    "transpose": _transpose, "Concat": lambda b, node, ins, out: b.add(
        "Concat", ins, [out], axis=node.attr_dict.get("dim", 1)),
    "relu": _simple("Relu"), "sigmoid": _simple("Sigmoid"), "tanh": _simple("Tanh"),
    "exp": _simple("Exp"), "log": _simple("Log"), "sqrt": _simple("Sqrt"),
    "negative": _simple("Neg"), "abs": _simple("Abs"),
    "square": lambda b, node, ins, out: b.add("Mul", ins + ins, [out]),
    "broadcast_add": _simple("Add"), "broadcast_sub": _simple("Sub"),
    "broadcast_mul": _simple("Mul"), "broadcast_div": _simple("Div"),
    "elemwise_add": _simple("Add"), "elemwise_sub": _simple("Sub"),  # Symbol's + - * /
    "elemwise_mul": _simple("Mul"), "elemwise_div": _simple("Div"),
    "broadcast_maximum": _simple("Max"), "broadcast_minimum": _simple("Min"),
    "_plus_scalar": _scalar("Add"), "_minus_scalar": _scalar("Sub"),
    "_rminus_scalar": _scalar("Sub", reverse=True), "_mul_scalar": _scalar("Mul"),
    "_div_scalar": _scalar("Div"), "_rdiv_scalar": _scalar("Div", reverse=True),
    "sum": _reduce("ReduceSum"), "mean": _reduce("ReduceMean"), "max": _reduce("ReduceMax"),
}


# --- the walk -----------------------------------------------------------------------------
def export_model(sym: Any, params: Any, in_shapes: Sequence[Sequence[int]] | None = None,
                 in_types: Any = np.float32, onnx_file_path: str = "model.onnx",
                 verbose: bool = False, dynamic: bool = False,
                 dynamic_input_shapes: Sequence[Sequence[int | None]] | None = None,
                 **unused: Any) -> str:
    """Write ``sym`` with ``params`` as an ONNX model (opset 17); return the file's path.

    ``sym``: a Symbol, the path of a ``-symbol.json`` file, or a hybridized HybridBlock that
    has run once (then ``params`` may be None: the block's own are used). ``params``: a dict
    of NDArrays (``arg:``/``aux:`` prefixes allowed) or the path of a ``.params`` file.
    ``in_shapes``/``in_types``: one per data input, in the graph's input order.
    ``dynamic=True``: ``dynamic_input_shapes`` gives each input's shape with ``None``
    for a free dimension (the batch). Raises :class:`OnnxExportError` naming an operator
    that has no ONNX mapping.
    """
    import onnx
    from onnx import helper, numpy_helper

    graph_sym, params = _symbol_and_params(sym, params)
    values = {key.partition(":")[2] if key[:4] in ("arg:", "aux:") else key: v
              for key, v in params.items()}
    data = [n for n in graph_sym.list_inputs() if n not in values]
    data_shapes = [tuple(s) for s in (in_shapes or ())]
    types = list(in_types) if isinstance(in_types, (list, tuple)) else [in_types] * len(data)
    if len(data_shapes) != len(data) or len(types) != len(data):
        raise ValueError(f"export_model: the graph's data inputs are {data}; give one shape "
                         f"and one type for each (in_shapes={list(data_shapes)}, "
                         f"in_types={types})")
    avals = {n: Aval(s, np.dtype(t)) for n, s, t in zip(data, data_shapes, types)}
    avals.update({n: Aval(v.shape, v.dtype) for n, v in values.items()})
    graph = shapes.infer_graph(graph_sym.to_graph(), avals)
    # the layer operators ONNX has stay whole
    graph = lower_operators(graph, PassContext(keep=frozenset(ONNX_OPS))).graph
    free = list(dynamic_input_shapes) if dynamic and dynamic_input_shapes else data_shapes
    builder = _Builder(helper, numpy_helper)
    names: dict[tuple[int, int], str] = {}
    inputs = []
    for node in graph.nodes:
        if node.kind == "var":
            names[id(node), 0] = builder.fresh(node.name)
            if node.name in values:
                builder.initializers.append(numpy_helper.from_array(
                    values[node.name].asnumpy(), names[id(node), 0]))
            else:
                dims = free[data.index(node.name)]
                inputs.append(_value_info(helper, names[id(node), 0], node.aval[0], dims))  # type: ignore[index]
        elif node.kind == "const":
            names[id(node), 0] = builder.const(node.value, node.value.dtype, node.name)  # type: ignore[union-attr]
        else:
            _translate(builder, node, names)
    out_dims = _free_output_dims(graph_sym, graph, avals, data, free)
    outputs = [_value_info(helper, names[id(v.node), v.index], v.aval, dims)  # type: ignore[arg-type]
               for v, dims in zip(graph.outputs, out_dims)]
    model = helper.make_model(
        helper.make_graph(builder.nodes, "hybridlab", inputs, outputs, builder.initializers),
        opset_imports=[helper.make_opsetid("", OPSET)], producer_name="hybridlab")
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, onnx_file_path)
    if verbose:
        print(helper.printable_graph(model.graph))
    return onnx_file_path


def _free_output_dims(graph_sym: symbol.Symbol, graph: ir.Graph, avals: dict, data: list,
                      free: list) -> list:
    """The outputs' shapes, None where they follow a free input dimension: found by
    inferring the shapes again with every free dimension one larger (a graph that fixes
    the batch somewhere, a Reshape to a literal size, fails here with a clear error)."""
    found = [v.aval.shape for v in graph.outputs]  # type: ignore[union-attr]
    if all(d is not None for dims in free for d in dims):
        return found
    other = dict(avals)
    for name, dims in zip(data, free):
        given = avals[name].shape
        other[name] = Aval(tuple(g + 1 if d is None else g for g, d in zip(given, dims)),
                           avals[name].dtype)
    try:
        again = shapes.infer_graph(graph_sym.to_graph(), other).outputs
    except ValueError as err:
        raise OnnxExportError(f"export_model: the graph does not accept other sizes of the "
                              f"dimensions marked None in dynamic_input_shapes={free} "
                              f"({err}). Fix: export with dynamic=False") from None
    return [[None if a != b else a for a, b in zip(s, v.aval.shape)]  # type: ignore[union-attr]
            for s, v in zip(found, again)]


def _translate(builder: _Builder, node: ir.Node, names: dict) -> None:
    rule = ONNX_OPS.get(node.op)  # type: ignore[arg-type]
    if rule is None:
        raise OnnxExportError(f"operator {node.op!r} (node {node.name!r}) has no ONNX "
                              f"mapping; hybridlab.onnx.ONNX_OPS lists the operators that "
                              f"export: {', '.join(sorted(ONNX_OPS))}")
    if node.num_outputs != 1:
        raise OnnxExportError(f"operator {node.op!r} (node {node.name!r}) has "
                              f"{node.num_outputs} outputs; export maps single-output ops")
    ins = [names[id(v.node), v.index] for v in node.inputs]
    out = builder.fresh(node.name or node.op)  # type: ignore[arg-type]
    rule(builder, node, ins, out)
    names[id(node), 0] = out


def _value_info(helper: Any, name: str, aval: Aval, dims: Any) -> Any:
    from onnx.helper import np_dtype_to_tensor_dtype

    shape = None if dims is None else [("batch" if d is None else int(d)) for d in dims]
    return helper.make_tensor_value_info(name, np_dtype_to_tensor_dtype(np.dtype(aval.dtype)),
                                         shape)


def _symbol_and_params(sym: Any, params: Any) -> tuple[symbol.Symbol, dict]:
    """Accept what MXNet accepts (Symbol or JSON path, dict or .params path) and a block."""
    if hasattr(sym, "export") and hasattr(sym, "hybridize"):  # a HybridBlock
        with tempfile.TemporaryDirectory() as folder:
            prefix = os.path.join(folder, "block")
            sym.export(prefix)
            return symbol.load(prefix + "-symbol.json"), ndarray.load(prefix + "-0000.params")  # type: ignore[return-value]
    if isinstance(sym, (str, os.PathLike)):
        sym = symbol.load(os.fspath(sym))
    if isinstance(params, (str, os.PathLike)):
        params = ndarray.load(os.fspath(params))
    if not isinstance(sym, symbol.Symbol) or not isinstance(params, dict):
        raise TypeError(f"export_model: give a Symbol (or -symbol.json path) and a dict of "
                        f"NDArrays (or .params path), or a hybridized block; got "
                        f"{type(sym).__name__} and {type(params).__name__}")
    return sym, params
