"""The pass explorer: step through the compiler's pipeline and see what each pass changed.

What this module teaches
------------------------
``hybridize()`` hands the traced graph to a pipeline of passes, each a pure function
``Graph -> (Graph, changes)``: constant folding, common-subexpression elimination,
dead-code elimination, elementwise fusion, and the memory plan. The explorer puts a
slider over the stages. Each stage shows the graph as that pass left it, with the nodes
the pass created or rewrote outlined in red; the printed IR as a diff against the stage
before; the pass's own list of changes and a one-line count. The last stage adds the
Python source generated from the final graph. Your own passes join the pipeline through
``passes=[...]`` (they run before fusion and the memory plan) and appear as stages like
the others.

A node counts as *new* in a stage when no node of the stage before has the same name,
operator, attributes and input names: renumbered SSA values (``%3``) do not count as
changes; a folded constant, a fused group, or a node whose inputs a pass redirected do.

Two layers, as every instrument (DESIGN.md section 5): :class:`PassModel` (plain Python,
tested by pytest) and :class:`PassExplorer`, the ipywidgets view, displayed through
:class:`~hybridlab.viz.bundle.Instrument`.
"""

from __future__ import annotations

import difflib
import html
from dataclasses import dataclass
from typing import Any, Sequence

from hybridlab.graph.autotune import PRETRANSPOSED
from hybridlab.graph.passes.pretranspose_weights import pretranspose_weights
from hybridlab.viz.bundle import Instrument, encode_png
from hybridlab.viz.graph import Drawing, as_graph, cached_op_of, summary, to_dot
from hybridlab.viz.views import memory_notes


@dataclass
class Stage:
    """One stage: the graph after a pass (or the input graph), what changed."""

    name: str
    graph: Any
    changes: list[str]
    new: set[int]  # ids of the nodes this pass created or rewrote
    removed: int  # how many computations of the stage before are gone


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
    """The pipeline's stages for a Symbol, a graph IR or a hybridized block."""

    def __init__(self, obj: Any, passes: Sequence[Any] = (), shape: dict | None = None
                 ) -> None:
        from hybridlab.graph.codegen import compile_graph
        from hybridlab.graph.passes import run_pipeline

        graph, self.params = as_graph(obj, shape)
        # a block whose CachedOp chose the weights' layout by timing: say what it chose,
        # and show the layout pass among the stages when it won (graph/autotune.py)
        cached_op = cached_op_of(obj)
        self.layout = None if cached_op is None else cached_op.layout
        if (self.layout is not None and self.layout.chosen == PRETRANSPOSED
                and pretranspose_weights not in passes):
            passes = (*passes, pretranspose_weights)
        final, records = run_pipeline(graph, passes=passes)
        self.stages = [Stage("input graph", graph, [], set(), 0)]
        for record in records:
            before, after = signatures(record.before), signatures(record.after)
            old = set(before.values())
            new = {i for i, key in after.items() if key not in old}
            removed = len(old - set(after.values()))  # keys are unique: names are
            self.stages.append(Stage(record.name, record.after, record.changes, new, removed))
        self.source = compile_graph(final).source

    def diff(self, index: int) -> str:
        """The printed IR of stage ``index`` against the stage before (unified diff)."""
        if index == 0:
            return str(self.stages[0].graph)
        before, after = self.stages[index - 1], self.stages[index]
        lines = difflib.unified_diff(str(before.graph).splitlines(),
                                     str(after.graph).splitlines(),
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

    def drawing(self, index: int) -> Drawing:
        stage = self.stages[index]
        notes = memory_notes(stage.graph) if stage.name == "plan_memory" else {}
        return Drawing(to_dot(stage.graph, "plot", self.params, notes=notes,
                              highlight=stage.new), summary(stage.graph, self.params))

    def summary(self, index: int) -> str:
        stage = self.stages[index]
        lines = [self.headline(index), *(f"  {change}" for change in stage.changes[:6])]
        if len(stage.changes) > 6:
            lines.append(f"  ... and {len(stage.changes) - 6} more")
        if self.layout is not None:
            lines.append(f"layout chosen on the first call: {self.layout}")
        return "\n".join(lines)


class PassExplorer(Instrument):
    """The widget: a slider over the stages; the drawing, the IR diff, the source."""

    def __init__(self, model: PassModel, stage: int | None = None) -> None:
        import ipywidgets as widgets

        self.model = model
        last = len(model.stages) - 1
        self.slider = widgets.IntSlider(value=last if stage is None else stage, min=0,
                                        max=last, description="stage",
                                        continuous_update=False)
        self.headline = widgets.HTML()
        self.picture = widgets.HTML()
        self.text = widgets.HTML()
        self.slider.observe(lambda change: self.refresh(), names="value")
        self.widget = widgets.VBox([self.slider, self.headline,
                                    widgets.HBox([self.picture, self.text])])
        self.widget.add_class("hybridlab-pass-explorer")
        self.refresh()

    def refresh(self) -> None:
        index, model = self.slider.value, self.model
        self.headline.value = f"<b>{html.escape(model.headline(index))}</b>"
        png = model.drawing(index).png()
        self.picture.value = (f'<img src="data:image/png;base64,{encode_png(png)}" '
                              f'style="max-width:480px"/>' if png else
                              f"<pre>{html.escape(model.drawing(index).text)}</pre>")
        text = model.diff(index)
        if index == len(model.stages) - 1:
            text += "\n\n# generated source\n" + model.source
        changes = "".join(f"<li>{html.escape(c)}</li>" for c in model.stages[index].changes)
        self.text.value = (f"<div style='margin-left:1em;max-width:560px'><ul>{changes}</ul>"
                           f"<pre style='font-size:11px;overflow-x:auto'>{html.escape(text)}"
                           f"</pre></div>")

    def summary(self) -> str:
        return self.model.summary(self.slider.value)

    def snapshot_png(self) -> bytes | None:
        return self.model.drawing(self.slider.value).png()


def pass_explorer(obj: Any, passes: Sequence[Any] = (), stage: int | None = None,
                  shape: dict | None = None) -> PassExplorer:
    """The explorer over ``obj`` (a Symbol -- give its input ``shape`` for the memory plan
    -- a graph IR, or a hybridized block that ran), with your ``passes`` added to the
    pipeline; it opens at ``stage`` (default: the last)."""
    return PassExplorer(PassModel(obj, passes, shape), stage)
