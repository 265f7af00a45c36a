"""Each convolution computed by the algorithm measured fastest for its shapes.

::

    %1 = var c_weight : float32[64,64,3,3]        %9 = var c_weight__winograd : float32[16,64,64]
    %3 = Convolution(%0, %1, %2)          ==>     %3 = _conv_winograd(%0, %9, %2)

NOTE: [Convolution algorithms] one convolution can be computed in several ways
(``ops/conv.py``'s im2col and one matrix product; ``ops/conv_algorithms.py``'s Winograd
F(2x2, 3x3) for a 3x3 kernel with stride 1, and the direct depthwise form for one filter
per channel), and which is fastest depends on the shapes and on the machine: Winograd
multiplies 2.25 times less but pays memory passes for its transforms, so it wins on
VGG's wide layers and loses on a thin first one. No rule written in advance gets every
layer right; a measurement does, as MXNet's ``cudnn_tune`` asked cuDNN to do. So for
each convolution this pass asks ``context.convolutions`` (``graph.autotune.
AlgorithmTuner``: the candidates timed once on random inputs of the layer's shapes,
remembered per signature), and rewrites the layer into the chosen operator. Winograd
reads its filters transformed (``U = G g G^T``): a new input, derived from the weight
(NOTE [Derived inputs]) -- made once in inference, like a folded or transposed weight.

When: inference only (the two operators have no gradient rule), and only where a
measurement is asked for: ``CachedOp`` adds this pass where a user's pass runs (after
dead-code elimination, before fusion) when it measures, and ``context.convolutions`` is
None when autotuning is off
(``HYBRIDLAB_AUTOTUNE=0``, the tests and the notebook builds; ``hybridize(autotune=
False)``), so results and printed programs never depend on a timing there. A layer
with ``cudnn_tune='off'`` or ``cudnn_off=True`` keeps im2col, as MXNet's kept its own
kernel. The chooser keeps every measured layer's choice (``AlgorithmTuner.chosen``: the
hybridization report and the pass explorer show them); the changes name the layers
rewritten.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from hybridlab.graph.ir import Graph, Node, Value, call, rebuild, with_inputs
from hybridlab.graph.passes.context import Note, PassContext, PassResult
from hybridlab.graph.passes.derived import READERS, Derivation, derived_input
from hybridlab.ops.conv_algorithms import A_T, B_T, G, winograd_filter
from hybridlab.ops.registry import OPS, Aval

WINOGRAD_OF = "winograd_of"  # the attribute of a var holding another input's filter transform
OPERATORS = {"winograd": "_conv_winograd", "depthwise": "_conv_depthwise"}


def choose_convolutions(graph: Graph, context: PassContext) -> PassResult:
    """Rewrite each convolution whose measured fastest algorithm is not im2col into that
    algorithm's operator (see the module docstring)."""
    if context.training or context.convolutions is None:
        return PassResult(graph, [])
    choose: Callable[..., Any] = context.convolutions
    made: dict[int, Node] = {}  # id(weight var) -> its transformed var (a weight shared)
    changes: list[str] = []

    def visit(node: Node, inputs: tuple[Value, ...]) -> Node | list[Value]:
        node = with_inputs(node, inputs)
        algorithms = candidates(node)
        if len(algorithms) < 2:
            return node
        choice = choose(node.name, signature(node, algorithms),
                        lambda: trials(node, algorithms))
        if choice.chosen == "im2col":
            return node
        changes.append(f"{node.name}: {choice}")
        reads = list(node.inputs)
        if choice.chosen == "winograd":
            weight = node.inputs[1].node
            if id(weight) not in made:
                made[id(weight)] = _transformed(weight)
            reads[1] = made[id(weight)].out()
        return call(OPERATORS[choice.chosen], reads, node.attr_dict, name=node.name,
                    origin=node.origin)

    if not any(candidates(n)[1:] for n in graph.nodes):
        return PassResult(graph, [])
    rewritten = rebuild(graph, visit)
    read = {id(v.node) for n in rewritten.nodes for v in n.inputs}
    # a derived input nothing reads any more (a folded weight now read transformed) goes
    inputs = tuple(n for n in rewritten.inputs if id(n) in read or derived_input(n) is None)
    return PassResult(Graph(rewritten.nodes, inputs + tuple(made.values()), rewritten.outputs),
                      changes, (_note(),) if made else ())


def candidates(node: Node) -> tuple[str, ...]:
    """The algorithms that can compute ``node`` (im2col first: the default), checked on
    the graph: a 2-D convolution of known float shapes not asked to keep im2col."""
    if node.kind != "call" or node.op != "Convolution" or node.aval is None:
        return ()
    attrs, data = node.attr_dict, node.inputs[0].aval
    if (data is None or len(data.shape) != 4 or np.dtype(data.dtype).kind != "f"
            or attrs["cudnn_off"] or attrs["cudnn_tune"] == "off"):
        return ()
    found = ["im2col"]
    one_step = all(s == 1 for s in attrs["stride"]) and all(d == 1 for d in attrs["dilate"])
    if (tuple(attrs["kernel"]) == (3, 3) and one_step and attrs["num_group"] == 1
            and node.inputs[1].node.kind == "var"):
        found.append("winograd")
    if attrs["num_group"] == attrs["num_filter"] == data.shape[1] > 1:
        found.append("depthwise")
    return tuple(found)


def signature(node: Node, algorithms: tuple[str, ...]) -> tuple[Any, ...]:
    """What the measurement depends on: shapes, dtype, geometry, the candidates."""
    attrs = node.attr_dict
    avals = tuple((tuple(v.aval.shape), str(v.aval.dtype)) for v in node.inputs
                  if v.aval is not None)
    return (avals, *(tuple(attrs[k]) for k in ("kernel", "stride", "pad", "dilate")),
            attrs["num_group"], algorithms)


def trials(node: Node, algorithms: tuple[str, ...]) -> tuple[dict[str, Any], list[Any]]:
    """Each algorithm as a function of (data, weight, bias) arrays, and random arrays of
    the layer's shapes to time them on (the values do not change the work)."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(v.aval.shape).astype(v.aval.dtype)  # type: ignore[union-attr]
              for v in node.inputs]
    attrs = node.attr_dict
    transformed = winograd_filter(arrays[1]) if "winograd" in algorithms else None
    runs: dict[str, Any] = {}
    for algorithm in algorithms:
        op = OPS["Convolution" if algorithm == "im2col" else OPERATORS[algorithm]]
        if algorithm == "winograd":
            runs[algorithm] = lambda a, op=op: op.kernel(a[0], transformed, *a[2:], **attrs)
        else:
            runs[algorithm] = lambda a, op=op: op.kernel(*a, **attrs)
    return runs, arrays


def _transformed(weight: Node) -> Node:
    """The var holding ``weight``'s filter transform; if ``weight`` is itself derived (a
    folded weight), the mark carries its attributes, so the transform composes."""
    assert weight.aval is not None, "candidates() checked the avals"
    filters, channels = weight.aval[0].shape[:2]
    inner = weight.attrs if derived_input(weight) is not None else ()
    return Node("var", attrs=((WINOGRAD_OF, weight.name), ("of", inner)),
                name=f"{weight.name}__winograd",
                aval=(Aval((16, filters, channels), weight.aval[0].dtype),))


def transform_source(node: Node) -> Derivation:
    """A transformed weight's sources and recipe (registered in READERS: NOTE [Derived
    inputs])."""
    attrs: dict[str, Any] = dict(node.attrs)
    inner = derived_input(Node("var", attrs=attrs["of"], name=attrs[WINOGRAD_OF])) \
        if attrs["of"] else None
    if inner is None:
        return Derivation((attrs[WINOGRAD_OF],), winograd_filter,
                          f"G g G^T of {attrs[WINOGRAD_OF]}")
    make = inner.make
    return Derivation(inner.sources, lambda *values: winograd_filter(make(*values)),
                      f"G g G^T of ({inner.text})")


READERS[WINOGRAD_OF] = transform_source  # NOTE [Derived inputs]


def _note() -> Note:
    return Note("Winograd F(2x2, 3x3): each 2x2 tile of the output from the 4x4 patch d of "
                "the input around it, Y = A^T [(G g G^T) * (B^T d B)] A: 16 multiplications "
                "per tile, channel and filter where im2col makes 36.", tile_arithmetic)


def tile_arithmetic(values: Any, channel: int) -> str | None:
    """One tile worked through with a real filter: ``channel``'s first 3x3 filter of the
    first weight at hand, on the input patch 0..15, against the direct sums."""
    weight = next((np.asarray(values[name]) for name in _filters(values)), None)
    if weight is None:
        return None
    g = weight[channel % len(weight), 0].astype(np.float64)
    d = np.arange(16.0).reshape(4, 4)
    u, v = G @ g @ G.T, B_T @ d @ B_T.T
    y = A_T @ (u * v) @ A_T.T
    direct = np.array([[np.sum(d[r:r + 3, c:c + 3] * g) for c in (0, 1)] for r in (0, 1)])
    rows = [f"  d (input patch) = {d.tolist()}", f"  g (filter {channel}, channel 0) = "
            f"{np.round(g, 4).tolist()}", f"  U = G g G^T = {np.round(u, 4).tolist()}",
            f"  V = B^T d B = {v.tolist()}", f"  Y = A^T (U * V) A = {np.round(y, 4).tolist()}",
            f"  direct sums of d * g over each 3x3 window = {np.round(direct, 4).tolist()}",
            "  16 products U * V for 4 outputs; the direct sums took 36"]
    return "\n".join(rows)


def _filters(values: Any) -> Any:
    """The names of 4-D weights of 3x3 filters among ``values`` (a dict, or a block's
    parameters read one by one), lazily: the note needs the first."""
    names = getattr(values, "params", values)
    return (name for name in names if name in values and np.ndim(values[name]) == 4
            and np.shape(values[name])[2:] == (3, 3))
