"""The pass explorer's model: the compiler's pipeline, stage by stage, and what changed.

What this module teaches
------------------------
``hybridize()`` hands the traced graph to a pipeline of passes, each a pure function of
the graph: lowering MXNet's layer operators, constant folding, common-subexpression
elimination, dead-code elimination, elementwise fusion, and the memory plan.
:class:`PassModel` runs the pipeline once and keeps every stage: the graph as that pass
left it, the nodes it created or rewrote, its own list of changes, the printed IR as a
diff against the stage before, and the Python source generated from the final graph.
Your own passes join through ``passes=[...]``. The drawing and the widget are
:mod:`hybridlab.viz.pass_explorer`.

A node counts as *new* in a stage when no node of the stage before has the same name,
operator, attributes and input names: renumbered SSA values (``%3``) do not count as
changes; a folded constant, a fused group, or a node whose inputs a pass redirected do.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Sequence

from hybridlab.graph.autotune import PRETRANSPOSED, AlgorithmChoice, LayoutChoice
from hybridlab.graph.passes import (
    Note,
    PassContext,
    choose_convolutions,
    pretranspose_weights,
)
from hybridlab.lab.graphs import as_graph, cached_op_of


@dataclass
class Stage:
    """One stage: the graph after a pass (or the input graph), what changed."""

    name: str
    graph: Any
    changes: list[str]
    new: set[int]  # ids of the nodes this pass created or rewrote
    removed: int  # how many computations of the stage before are gone
    notes: tuple[Note, ...] = ()  # what the pass explains beyond its changes


def signatures(graph: Any) -> dict[int, Any]:
    """id(node) -> its key: name, operator, attributes and the names of its inputs."""
    keys: dict[int, Any] = {}
    for node in graph.nodes:
        if node.kind == "var":
            keys[id(node)] = ("var", node.name)
        elif node.kind == "const":
            keys[id(node)] = ("const", node.name, node.value.shape, node.value.tobytes())
        else:
            keys[id(node)] = (node.name, node.op, repr(node.attrs),
                              tuple((v.node.name, v.index) for v in node.inputs))
    return keys


class PassModel:
    """The pipeline's stages for a Symbol, a graph IR or a hybridized block. ``values``
    (name -> array; a block's own parameters by default) lets a pass's notes show their
    arithmetic on real numbers, for output ``channel`` (:meth:`note`: BatchNorm folding's)."""

    def __init__(self, obj: Any, passes: Sequence[Any] = (), shape: dict[str, Any] | None = None,
                 values: dict[str, Any] | None = None, channel: int = 0) -> None:
        from hybridlab.graph.codegen import compile_graph
        from hybridlab.graph.passes import run_pipeline

        graph, self.params = as_graph(obj, shape)
        # the values the folding note reads: given, or the block's parameters (read lazily:
        # the note needs one layer's, not a whole network's)
        self.values: Any = BlockValues(obj) if values is None else dict(values)
        self.channel = channel
        # a block whose CachedOp chose the weights' layout by timing: say what it chose,
        # and show the layout pass among the stages when it won (graph/autotune.py)
        cached_op = cached_op_of(obj)
        self.layout: LayoutChoice | None = None if cached_op is None else cached_op.layout
        if (self.layout is not None and self.layout.chosen == PRETRANSPOSED
                and pretranspose_weights not in passes):
            passes = (*passes, pretranspose_weights)
        # and the convolution algorithms it measured: replayed, the stage shows the rewrite
        self.convolutions: dict[str, AlgorithmChoice] = ({} if cached_op is None
                                                         else cached_op.convolutions())
        context = None
        if self.convolutions:
            context = PassContext(convolutions=self._replayed)
            passes = (*passes, choose_convolutions)
        final, records = run_pipeline(graph, passes=passes, context=context)
        self.stages = [Stage("input graph", graph, [], set(), 0)]
        for record in records:
            before, after = signatures(record.before), signatures(record.after)
            old = set(before.values())
            new = {i for i, key in after.items() if key not in old}
            removed = len(old - set(after.values()))  # keys are unique: names are
            self.stages.append(Stage(record.name, record.after, record.changes, new, removed,
                                     record.notes))
        self.source = compile_graph(final).source
        self._printed: dict[int, str] = {}

    def _replayed(self, name: str, key: Any, trials: Any) -> AlgorithmChoice:
        """The algorithm the block's CachedOp measured for layer ``name`` (nothing timed)."""
        return self.convolutions.get(name, AlgorithmChoice("im2col"))

    def printed(self, index: int) -> str:
        """Stage ``index``'s printed IR (printed once: a real network's takes a while)."""
        if index not in self._printed:
            self._printed[index] = str(self.stages[index].graph)
        return self._printed[index]

    def diff(self, index: int) -> str:
        """The printed IR of stage ``index`` against the stage before (unified diff)."""
        if index == 0:
            return self.printed(0)
        before, after = self.stages[index - 1], self.stages[index]
        lines = difflib.unified_diff(self.printed(index - 1).splitlines(),
                                     self.printed(index).splitlines(),
                                     before.name, after.name, lineterm="", n=1)
        return "\n".join(lines) or "(the printed IR is unchanged)"

    def headline(self, index: int) -> str:
        stage = self.stages[index]
        calls = sum(1 for n in stage.graph.nodes if n.kind == "call")
        if index == 0:
            return f"stage 0/{len(self.stages) - 1}: the input graph, {calls} operator calls"
        return (f"stage {index}/{len(self.stages) - 1}: {stage.name}: {len(stage.changes)} "
                f"change(s); {len(stage.new)} node(s) new or rewritten, {stage.removed} "
                f"replaced or removed; {calls} operator calls")

    def stage_index(self, name: str) -> int:
        """The index of the stage the pass ``name`` made."""
        names = [stage.name for stage in self.stages]
        if name not in names:
            raise ValueError(f"no stage {name!r}: the stages are {names}")
        return names.index(name)

    def note(self, index: int) -> str:
        """Stage ``index``'s notes (its pass's own), each with its numbers for output
        channel ``self.channel`` when the values are at hand ("" for a stage without)."""
        lines = []
        for note in self.stages[index].notes:
            numbers = None if note.on_values is None else note.on_values(self.values,
                                                                          self.channel)
            lines.append(note.text)
            if note.on_values is not None:
                lines.append(numbers or "  (give the parameters' values to see the numbers: "
                                        "a hybridized block that ran, or values={name: array})")
        return "\n".join(lines)

    def summary(self, index: int) -> str:
        stage = self.stages[index]
        lines = [self.headline(index), *(f"  {change}" for change in stage.changes[:6])]
        if len(stage.changes) > 6:
            lines.append(f"  ... and {len(stage.changes) - 6} more")
        note = self.note(index)
        if note:
            lines.append(note)
        if self.layout is not None:
            lines.append(f"layout chosen on the first call: {self.layout}")
        if self.convolutions and stage.name == "choose_convolutions":
            lines.append("algorithms chosen on the first call:")
            lines += [f"  {name}: {choice}" for name, choice in self.convolutions.items()]
        return "\n".join(lines)


class BlockValues:
    """A block's parameters by name as numpy arrays, each read when asked (none for
    anything but a block)."""

    def __init__(self, obj: Any) -> None:
        collect = getattr(obj, "collect_params", None)
        self.params = {} if collect is None else dict(collect())

    def __contains__(self, name: str) -> bool:
        return name in self.params and getattr(self.params[name], "_data", None) is not None

    def __getitem__(self, name: str) -> Any:
        return self.params[name].data().asnumpy()
