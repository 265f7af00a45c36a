"""Shape and type inference: the one place that runs operators' shape rules on graphs.

What this module teaches
------------------------
Every operator of the registry knows its output's shape and dtype from its inputs'
(``OpDef.infer``). Walking a graph in order and applying those rules gives every value its
shape before anything runs: that is how a compiled program plans its memory, and how
``sym.infer_shape(data=(64, 784))`` finds the shapes of ``fc1_weight`` and the output.

Two questions are asked of a graph, and both are answered here:

* :func:`infer_graph` -- *compiling*: every input's shape and dtype is known, so every
  value's is; a rule that fails is an error naming the node and the user line.
* :func:`infer_partial` -- *MXNet's* ``infer_shape``: only some shapes are known, and some
  only partly (a 0 is a size not known yet: ``sym.var('a', shape=(0, 10))``; ``None`` is a
  shape not even the rank of which is known). Knowledge flows **both ways** until nothing
  changes: forward through each operator's rule, and backward -- an elementwise
  operator's inputs and output share one shape, a layer's parameters are sized from its
  data (``OpDef.infer_params``), and some operators say what their output tells about
  their inputs (``OpDef.infer_back``: a FullyConnected's output gives its data's batch
  size). So ``a(0, 10) + b(12, 0)`` completes both to ``(12, 10)``, as MXNet does.

How a rule meant for full shapes runs on partial ones
-----------------------------------------------------
A rule is plain arithmetic on sizes. To learn which output sizes a partial input decides,
the rule is run twice, with every unknown size replaced by two different *probe* sizes:
an output size that comes out the same both times does not depend on the unknowns, so it
is known; one that differs is not (it stays 0). If the rule refuses the probes (a
``batch_dot`` whose unknown inner size cannot match), the outputs stay unknown. The probes
have many divisors, so a ``Reshape`` of a partial shape still divides evenly.

Invariants
----------
* Knowledge only grows: a size once known never changes; two different known sizes for
  one value are an error (MXNet's "shape inconsistent"), naming the node.
* ``infer_partial`` never allocates an array and never runs a kernel.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from hybridlab.errors import ShapeError
from hybridlab.graph import ir
from hybridlab.ops import _infer, registry
from hybridlab.ops.registry import Aval

Shape = tuple[int, ...] | None  # None: unknown rank; a 0 inside: an unknown size
Key = tuple[int, int]  # (id(node), output index): one value of the graph
PROBES = (720, 5040)  # stand-ins for an unknown size (see the module docstring)
_RULE_ERRORS = (ValueError, IndexError, TypeError, ArithmeticError)


# ---------------------------------------------------------------------------------------
# Complete shapes: compiling a graph
# ---------------------------------------------------------------------------------------

def infer_node(node: ir.Node) -> tuple[Aval, ...]:
    """Run the op's ``infer`` rule on its inputs' avals; a ShapeError names the node."""
    avals = [v.aval for v in node.inputs]
    try:
        return tuple(node.opdef.infer(*avals, **node.attr_dict))
    except ShapeError as err:
        raise infer_failure(node, avals, err) from None


def infer_failure(node: ir.Node, avals: Sequence[Any], err: Exception, prefix: str = ""
                  ) -> ShapeError:
    """The one wording of a failed shape rule (graph IR and Symbol.infer_shape): the
    node, its op and input avals, the rule's message and the line that created the node."""
    shapes = ", ".join(str(a) for a in avals)
    where = f"\n  created at {node.origin}" if node.origin else ""
    return ShapeError(f"{prefix}in node {node.name!r} ({node.op} of {shapes}): {err}{where}")


def infer_graph(graph: ir.Graph, input_avals: Sequence[Aval] | Mapping[str, Aval]
                ) -> ir.Graph:
    """A copy of ``graph`` with every node's aval inferred from the inputs' avals
    (a sequence in ``graph.inputs`` order, or a mapping by input name)."""
    given: Sequence[Aval | None] = ([input_avals.get(n.name) for n in graph.inputs]
                                    if isinstance(input_avals, Mapping) else input_avals)
    if len(given) != len(graph.inputs) or None in given:
        raise ShapeError(f"infer_graph: the graph has {len(graph.inputs)} inputs "
                         f"{[n.name for n in graph.inputs]}; give one Aval for each, got "
                         f"{list(given)}")
    by_id = {id(n): a for n, a in zip(graph.inputs, given)}

    def visit(node: ir.Node, inputs: tuple[ir.Value, ...]) -> ir.Node:
        if node.kind == "var":
            aval = by_id.get(id(node)) or (node.aval[0] if node.aval else None)
            return dataclasses.replace(node, aval=None if aval is None else (aval,))
        if node.kind == "const":
            return node
        fresh = dataclasses.replace(node, inputs=inputs)
        return dataclasses.replace(fresh, aval=infer_node(fresh))

    return ir.rebuild(graph, visit)


def infer_body(body: ir.Graph, avals: Sequence[Aval]) -> list[Aval]:
    """The output avals of a loop's body (ops/control_flow.py) run on ``avals``: the
    loop operator's shape rule, which asks here (ops sits below graph)."""
    typed = infer_graph(body, avals)
    return [v.aval for v in typed.outputs]  # type: ignore[misc]  # (inferred: all known)


def check_node(node: ir.Node) -> Sequence[Aval]:
    """What the op's rule says a call node's avals should be (``ir.verify`` compares)."""
    return tuple(node.opdef.infer(*(v.aval for v in node.inputs), **node.attr_dict))


# ---------------------------------------------------------------------------------------
# Partial shapes: MXNet's infer_shape, both ways
# ---------------------------------------------------------------------------------------

@dataclasses.dataclass
class Inferred:
    """What :func:`infer_partial` found: an Aval per value it knows anything of (its
    ``shape`` may hold 0s or be None when only the dtype is known)."""

    avals: dict[Key, Aval]

    def aval(self, value: ir.Value) -> Aval | None:
        return self.avals.get((id(value.node), value.index))

    def shape(self, value: ir.Value) -> Shape:
        aval = self.aval(value)
        return None if aval is None else aval.shape

    def complete(self, value: ir.Value) -> bool:
        shape = self.shape(value)
        return shape is not None and 0 not in shape


def infer_partial(graph: ir.Graph, shapes: Mapping[str, Shape] | None = None,
                  dtypes: Mapping[str, np.dtype] | None = None) -> Inferred:
    """Complete what is known of every value's shape and dtype, forward and backward.

    ``shapes``/``dtypes``: what the caller knows of some variables, by name (a shape may
    hold 0s); a variable's declared ``__shape__``/``__dtype__`` fills the rest. Returns
    when a whole sweep (forward, then backward) learns nothing new.
    """
    solver = _Solver(graph)
    for node in graph.nodes:
        if node.kind == "var":
            solver.start_var(node, (shapes or {}).get(node.name), (dtypes or {}).get(node.name))
        elif node.kind == "const" and node.aval is not None:
            for i, aval in enumerate(node.aval):
                solver.learn(node, (id(node), i), aval.shape, aval.dtype)
    for _ in range(len(graph.nodes) + 2):  # each sweep learns something, or we stop
        solver.changed = False
        for node in graph.nodes:
            if node.kind == "call":
                solver.forward(node)
        for node in reversed(graph.nodes):
            if node.kind == "call":
                solver.backward(node)
        if not solver.changed:
            break
    return Inferred(solver.known)


def undecided_types(graph: ir.Graph, given: set[str]) -> tuple[set[str], list[bool]]:
    """MXNet's ``infer_type_partial``: the variables whose type nothing decides, and for
    each output whether its type is decided. A variable is decided when given or declared,
    or when an operator it feeds (other than a ``Cast``) has a decided input besides it:
    types flow through an operator in both directions, but not through a Cast."""
    casts = ("Cast", "_cast_like")
    decided: dict[int, bool] = {}
    users: dict[int, list[ir.Node]] = {}
    for node in graph.nodes:
        if node.kind == "var":
            decided[id(node)] = node.name in given or "__dtype__" in node.attr_dict
        else:
            decided[id(node)] = node.op in casts or any(decided[id(v.node)]
                                                        for v in node.inputs)
            for value in node.inputs:
                users.setdefault(id(value.node), []).append(node)

    def known(node: ir.Node) -> bool:
        return decided[id(node)] or any(
            user.op not in casts and any(decided[id(v.node)] for v in user.inputs
                                         if v.node is not node)
            for user in users.get(id(node), []))

    undecided = {n.name for n in graph.nodes if n.kind == "var" and not known(n)}
    return undecided, [decided[id(v.node)] for v in graph.outputs]


def parse_shape(text: str) -> tuple[int, ...]:
    """MXNet's ``__shape__`` string ("(2, 3)") with the registry's shape parser."""
    shape: tuple[int, ...] = registry.parse_attr_value("var", "__shape__",
                                                       registry.Attr("shape"), text)
    return shape


def merge(known: Shape, new: Shape, where: Callable[[], str]) -> Shape:
    """Two partial shapes of one value as one; different known sizes are an error."""
    if new is None:
        return known
    if known is None:
        return new
    if len(known) != len(new) or any(a and b and a != b for a, b in zip(known, new)):
        raise ShapeError(f"shape inconsistent: {where()} is {known} on one side and {new} "
                         f"on the other (a 0 is a size not known yet)")
    return tuple(a or b for a, b in zip(known, new))


class _Solver:
    """The knowledge of one :func:`infer_partial` run, and the rules that add to it."""

    def __init__(self, graph: ir.Graph) -> None:
        self.graph = graph
        self.known: dict[Key, Aval] = {}
        self.changed = False

    # -- knowledge ----------------------------------------------------------------------

    def learn(self, node: ir.Node, key: Key, shape: Shape, dtype: Any) -> None:
        """Add what is now known of value ``key`` (an output of ``node``)."""
        old = self.known.get(key)

        def where() -> str:
            origin = f", created at {node.origin}" if node.origin else ""
            return f"{node.name!r} ({node.op or node.kind}) output {key[1]}{origin}"

        shape = tuple(int(d) for d in shape) if shape is not None else None
        merged = merge(None if old is None else old.shape, shape, where)
        dtype = (old.dtype if old is not None and old.dtype is not None else
                 None if dtype is None else np.dtype(dtype))
        # (``is None`` first: numpy reads None as float64, so ``float64 != None`` is False)
        if (old is None or merged != old.shape or (dtype is None) != (old.dtype is None)
                or dtype != old.dtype):
            self.known[key] = Aval(merged, dtype)  # type: ignore[arg-type]  # (partial)
            self.changed = True

    def learn_input(self, value: ir.Value, shape: Shape) -> None:
        aval = self.known.get((id(value.node), value.index))
        self.learn(value.node, (id(value.node), value.index), shape,
                   None if aval is None else aval.dtype)

    def inputs(self, node: ir.Node) -> list[Aval | None]:
        return [self.known.get((id(v.node), v.index)) for v in node.inputs]

    def outputs(self, node: ir.Node) -> list[Aval | None]:
        return [self.known.get((id(node), i)) for i in range(node.num_outputs)]

    # -- variables ----------------------------------------------------------------------

    def start_var(self, node: ir.Node, shape: Any, dtype: Any) -> None:
        declared = node.attr_dict
        known: Shape = node.aval[0].shape if node.aval is not None else (
            parse_shape(declared["__shape__"]) if "__shape__" in declared else None)
        if shape is not None:
            shape = _as_shape(shape, node.name)
            if known is not None and len(known) == len(shape):
                shape = tuple(b or a for a, b in zip(known, shape))  # the given one wins
        else:
            shape = known
        dtype = dtype or np.dtype(declared.get("__dtype__", "float32"))
        self.learn(node, (id(node), 0), shape, dtype)

    # -- forward: each operator's own rule ------------------------------------------------

    def forward(self, node: ir.Node) -> None:
        self.unify_elementwise(node)
        self.fill_parameters(node)
        inputs = self.inputs(node)
        if any(a is None or a.dtype is None for a in inputs):
            return
        if any(a.shape is None for a in inputs) or (  # type: ignore[union-attr]
                node.op in _FIRST_INPUT_FIRST and 0 in inputs[0].shape):  # type: ignore[union-attr]
            outputs = self.dtype_only(node, inputs)  # type: ignore[arg-type]
        else:
            outputs = self.run_rule(node, inputs)  # type: ignore[arg-type]
        for i, aval in enumerate(outputs):
            if aval is not None:
                self.learn(node, (id(node), i), aval.shape, aval.dtype)

    def run_rule(self, node: ir.Node, inputs: list[Aval]) -> list[Aval | None]:
        """The rule on full shapes; on partial ones, run at two probes (docstring)."""
        if not any(0 in a.shape for a in inputs):
            try:
                return list(node.opdef.infer(*inputs, **node.attr_dict))
            except _RULE_ERRORS as err:
                raise infer_failure(node, inputs, err, prefix="infer_shape failed ") from None
        runs = _probed(lambda avals: node.opdef.infer(*avals, **node.attr_dict), inputs)
        if runs is None:
            return [Aval(None, _infer.promote(*(a.dtype for a in inputs)))  # type: ignore[arg-type]
                    ] * node.num_outputs
        first, second = runs
        found = [_agreeing(a.shape, b.shape) for a, b in zip(first, second)]
        if node.op in _SLICES:  # MXNet's slice rules leave a size they cannot see unknown
            found = [tuple(0 if d == 0 else o for d, o in zip(inputs[0].shape, s))
                     if s is not None else None for s in found]
        return [Aval(s, a.dtype) for s, a in zip(found, first)]  # type: ignore[arg-type]

    def dtype_only(self, node: ir.Node, inputs: list[Aval]) -> list[Aval | None]:
        """Some input's rank is unknown: the dtype still flows (and an elementwise op's
        one shape is any input's). The dtype comes from the op's own rule (Cast's
        ``dtype=``) run on stand-ins where it can, else from promoting the inputs'."""
        count = node.num_outputs
        shape = next((a.shape for a in inputs if a.shape is not None), None)
        elementwise = node.opdef.kind == registry.Kind.ELEMENTWISE and count == 1
        if elementwise:
            stand_ins = [Aval(shape, a.dtype) for a in inputs]  # type: ignore[arg-type]
            with contextlib.suppress(*_RULE_ERRORS):
                return [Aval(shape, node.opdef.infer(*stand_ins, **node.attr_dict)[0].dtype)]  # type: ignore[arg-type]
        return [Aval(shape if elementwise else None,  # type: ignore[arg-type]
                     _infer.promote(*(a.dtype for a in inputs)))] * count

    # -- backward: what outputs and layers tell about inputs -----------------------------

    def unify_elementwise(self, node: ir.Node) -> None:
        """An elementwise operator's inputs and output have one shape."""
        if node.opdef.kind != registry.Kind.ELEMENTWISE or node.num_outputs != 1:
            return
        values = [*node.inputs, node.out()]
        shapes = [self.known[(id(v.node), v.index)].shape for v in values
                  if (id(v.node), v.index) in self.known]
        shapes = [s for s in shapes if s is not None]
        if not shapes or any(len(s) != len(shapes[0]) for s in shapes):
            return  # (the rule itself reports different ranks)
        one: Shape = None
        for shape in shapes:
            one = merge(one, shape, lambda: _inputs_of(node))
        for value in values:
            self.learn_input(value, one)

    def fill_parameters(self, node: ir.Node) -> None:
        """Parameter shapes from the data's (``fc1_weight`` from ``data``), as MXNet, for
        parameters whose shape is not fully known yet."""
        rule = node.opdef.infer_params
        data = self.inputs(node)[0] if node.inputs else None
        if rule is None or data is None or data.shape is None:
            return
        runs = _probed(lambda avals: rule(avals[0], **node.attr_dict), [data])
        if runs is None:
            return
        first, second = runs
        names = node.opdef.input_names(node.attr_dict)
        for value, name in zip(node.inputs, names):
            guess = _agreeing(tuple(first[name]), tuple(second[name])) if name in first else None
            held = self.known.get((id(value.node), value.index))
            # a default for what is not known, not a constraint: SoftmaxOutput's label may
            # be class indices (its rule's guess) or probabilities of the data's shape
            if guess is not None and (held is None or held.shape is None or 0 in held.shape):
                with contextlib.suppress(ShapeError):
                    self.learn_input(value, merge(None if held is None else held.shape, guess,
                                                  lambda: "a parameter"))

    def backward(self, node: ir.Node) -> None:
        self.unify_elementwise(node)
        rule = node.opdef.infer_back
        if rule is None:
            return
        outputs = [None if a is None else a.shape for a in self.outputs(node)]
        inputs = [None if a is None else a.shape for a in self.inputs(node)]
        if all(s is None for s in outputs):
            return
        for value, shape in zip(node.inputs, rule(inputs, outputs, **node.attr_dict)):
            self.learn_input(value, shape)


# MXNet's where decides nothing of its shape until its condition's is fully known
_FIRST_INPUT_FIRST = ("where",)
# Slices of a dimension of unknown size have an unknown size, even where begin and end
# would fix it (MXNet's SliceOpShape copies an unknown input size): ``slice_axis`` of
# (10, 0) on axis 1 from 0 to 5 is (10, 0), not (10, 5)
_SLICES = ("slice", "slice_axis")


def _probed(rule: Callable[[list[Aval]], Any], avals: list[Aval]) -> tuple[Any, Any] | None:
    """``rule`` run with the unknown sizes at each probe; None if it refuses either."""
    runs = []
    for probe in PROBES:
        stand_ins = [Aval(tuple(d or probe for d in a.shape), a.dtype) for a in avals]
        try:
            runs.append(rule(stand_ins))
        except (*_RULE_ERRORS, ShapeError):
            return None
    return runs[0], runs[1]


def _agreeing(first: tuple[int, ...], second: tuple[int, ...]) -> Shape:
    """The sizes both probe runs agree on; the others stay unknown (0)."""
    if len(first) != len(second):
        return None
    return tuple(a if a == b else 0 for a, b in zip(first, second))


def _as_shape(shape: Any, name: str) -> tuple[int, ...]:
    try:
        return tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise ShapeError(f"infer_shape({name}=...): a shape is a tuple of ints, got "
                         f"{shape!r}") from None


def _inputs_of(node: ir.Node) -> str:
    where = f", created at {node.origin}" if node.origin else ""
    return f"the inputs and output of {node.name!r} ({node.op}){where}"


ir._inference[:] = [ir.Inference(infer_node, check_node)]  # ir.call and ir.verify ask it
