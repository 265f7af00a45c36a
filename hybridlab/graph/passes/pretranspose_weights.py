"""A layout pass: give ``FullyConnected`` its weight in the layout the product prefers.

::

    %1 = var fc_weight : float32[256,512]        %9 = var fc_weight__T : float32[512,256]
    %3 = FullyConnected(%0, %1, %2)       ==>    %3 = dot(%0, %9) : float32[64,256]
                                                 %4 = broadcast_add(%3, %2)

What a layout transformation is: the same numbers stored in another order. MXNet (and
so hybridlab) keeps a dense layer's weight as ``(out, in)``, and ``FullyConnected``
computes ``x . W^T``: the matrix product reads ``W`` transposed. BLAS can do that, but on
this course's machine a product whose right operand is stored ``(in, out)`` -- read as
written -- is measurably faster (``benchmarks/hybridize_mlp.py``: about 0.8x the time at
batch 64). So this pass rewrites each such layer to read a new input, the weight stored
transposed, and the graph says where it comes from: the new ``var`` carries the attribute
``layout_of`` naming the weight it is the transpose of.

What it costs, and who pays: the transposed copy must exist. ``CachedOp`` makes it when a
program runs and keeps it, tied to the weight's buffer (NOTE [Weights in the kernel's
layout] in ``cached_op.py``): one copy per weight in memory, and one transpose each time
the weight changes. In inference the weight never changes, so the copy is made once; in
training every step changes every weight, and the copy would be paid again each step --
so CachedOp runs this pass only for programs that compute no gradient.

Which layers (checked on the graph, never by name): ``FullyConnected`` whose weight is a
graph input (``var``), whose data is 2-D (``flatten`` then changes nothing) and whose
avals are known and of one dtype.
"""

from __future__ import annotations

import numpy as np

from hybridlab.graph.ir import Graph, Node, Value, call, rebuild, with_inputs
from hybridlab.graph.passes.context import PassContext, PassResult
from hybridlab.graph.passes.derived import READERS, Derivation
from hybridlab.ops.registry import Aval

LAYOUT_OF = "layout_of"  # the attribute of a var that holds another input's transpose


def pretranspose_weights(graph: Graph, context: PassContext) -> PassResult:
    """Rewrite ``FullyConnected(x, W, b)`` into ``dot(x, W__T) + b`` with ``W__T`` a new
    input marked ``layout_of=W`` (its value: ``W`` transposed, supplied by the caller)."""
    made: dict[int, Node] = {}  # id(weight var) -> its transposed var (a weight shared twice)
    changes: list[str] = []

    def visit(node: Node, inputs: tuple[Value, ...]) -> Node | list[Value]:
        node = with_inputs(node, inputs)
        if not _applies(node):
            return node
        data, weight = node.inputs[0], node.inputs[1].node
        if id(weight) not in made:
            assert weight.aval is not None, "_applies checked the weight's aval"
            out_units, in_units = weight.aval[0].shape
            made[id(weight)] = Node("var", attrs=((LAYOUT_OF, weight.name),),
                                    name=f"{weight.name}__T",
                                    aval=(Aval((in_units, out_units), weight.aval[0].dtype),))
        product = call("dot", [data, made[id(weight)].out()], name=f"{node.name}_dot",
                       origin=node.origin)
        result = product if node.attr_dict["no_bias"] else call(
            "broadcast_add", [product.out(), node.inputs[2]], name=node.name, origin=node.origin)
        changes.append(f"{node.name}: FullyConnected(x, {weight.name}) -> dot(x, "
                       f"{weight.name}__T){'' if node.attr_dict['no_bias'] else ' + bias'}")
        return [result.out()]

    rewritten = rebuild(graph, visit)
    if not made:
        return PassResult(graph, [])
    return PassResult(Graph(rewritten.nodes, rewritten.inputs + tuple(made.values()),
                            rewritten.outputs), changes)


def _applies(node: Node) -> bool:
    if node.kind != "call" or node.op != "FullyConnected" or node.aval is None:
        return False
    data, weight = node.inputs[0], node.inputs[1]
    if weight.node.kind != "var" or data.aval is None or weight.aval is None:
        return False
    return (len(data.aval.shape) == 2 and len(weight.aval.shape) == 2
            and data.aval.dtype == weight.aval.dtype == node.aval[0].dtype)


def transposed(node: Node) -> Derivation:
    """A ``layout_of=W`` var: ``W`` transposed."""
    source = str(dict(node.attrs)[LAYOUT_OF])
    return Derivation((source,), np.transpose, f"{source} transposed")


READERS[LAYOUT_OF] = transposed  # NOTE [Derived inputs]
