"""The pass explorer: step through the compiler's pipeline and see what each pass changed.

What this module teaches
------------------------
``hybridize()`` hands the traced graph to a pipeline of passes, each a pure function
``(graph, context) -> (graph, changes)``: constant folding, common-subexpression elimination,
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

Two layers, as every instrument (ARCHITECTURE.md, "Instruments"):
:class:`~hybridlab.lab.passes.PassModel` (plain Python, in ``hybridlab.lab``) and
:class:`PassExplorer`, the ipywidgets view, displayed through
:class:`~hybridlab.viz.bundle.Instrument`.
"""

from __future__ import annotations

import html
from typing import Any, Sequence

from hybridlab.lab.graphs import blocks, summary
from hybridlab.lab.memory import memory_notes
from hybridlab.lab.passes import PassModel
from hybridlab.viz.bundle import ROW, Instrument, fitted_svg
from hybridlab.viz.graph import BIG_GRAPH, Drawing, to_block_dot, to_dot
from hybridlab.viz.palette import CODE_STYLE

# The drawing's and the text's boxes: together within a 1280 x 800 screen (about 700 px
# under JupyterLab's bars) when the text wraps below the drawing, as it does in a laptop's
# window; each scrolls down inside its box.
PICTURE_HEIGHT = "min(640px, 50vh)"
TEXT_HEIGHT = "min(640px, 30vh)"


def stage_drawing(model: PassModel, index: int, block: str | None = None) -> Drawing:
    """Stage ``index`` drawn: the nodes the pass made outlined in red, the memory plan
    written on the nodes at the last stage. A real network (more than ``BIG_GRAPH``
    nodes) is drawn one box per block, a block the pass changed outlined in red, and
    ``block`` (by name, when the stage has it) open."""
    stage = model.stages[index]
    if len(stage.graph.nodes) > BIG_GRAPH:
        found = blocks(stage.graph)
        opened = [block] if block in {b.name for b in found} else []
        return Drawing(to_block_dot(stage.graph, found, "plot", model.params, opened,
                                    highlight=stage.new), summary(stage.graph, model.params))
    notes = memory_notes(stage.graph) if stage.name == "plan_memory" else {}
    return Drawing(to_dot(stage.graph, "plot", model.params, notes=notes,
                          highlight=stage.new), summary(stage.graph, model.params))


CLOSED = "(none)"  # the block menu's first choice: every block drawn closed


class PassExplorer(Instrument):
    """The widget: a slider over the stages; the drawing, the IR diff, the source."""

    def __init__(self, model: PassModel, stage: int | None = None) -> None:
        import ipywidgets as widgets

        self.model = model
        # each view laid out once: a click shows its SVG (dot's layout, tens of ms even for
        # an opened dense block); its PNG (rasterising it took up to 1.3 s) is made only
        # for a display's snapshot
        self._drawings: dict[tuple[int, str], Drawing] = {}
        last = len(model.stages) - 1
        self.slider = widgets.IntSlider(value=last if stage is None else stage, min=0,
                                        max=last, description="stage",
                                        continuous_update=False)
        self.headline = widgets.HTML()
        self.picture = widgets.HTML()
        self.text = widgets.HTML()
        # the output channel whose numbers the BatchNorm-folding stage shows
        self.channel = widgets.BoundedIntText(value=model.channel, min=0, max=1 << 20,
                                              description="channel")
        # a real network is drawn by blocks: the one to open (the input graph's names)
        graph = model.stages[0].graph
        names = [b.name for b in blocks(graph)] if len(graph.nodes) > BIG_GRAPH else []
        self.block = widgets.Dropdown(options=[CLOSED, *names], value=CLOSED,
                                      description="open block")
        if not names:
            self.block.layout.display = "none"
        if not any(note.on_values and note.on_values(model.values, model.channel)
                   for stage in model.stages for note in stage.notes):
            self.channel.layout.display = "none"  # no stage shows a channel's numbers
        for control in (self.slider, self.channel, self.block):
            control.observe(lambda change: self.refresh(), names="value")
        self.widget = widgets.VBox([
            widgets.HBox([self.slider, self.channel, self.block], layout=ROW),
            self.headline, widgets.HBox([self.picture, self.text], layout=ROW)])
        self.widget.add_class("hybridlab-pass-explorer")
        self.refresh()

    def refresh(self) -> None:
        index, model = self.slider.value, self.model
        model.channel = self.channel.value
        self.headline.value = f"<b>{html.escape(model.headline(index))}</b>"
        drawing = self._drawing()
        svg = drawing.svg()
        # at most the output's width (the text beside it wraps below when it must), in a
        # box no taller than a laptop's screen: a real network's drawing scrolls down
        self.picture.value = (f'<div style="max-width:100%;max-height:{PICTURE_HEIGHT};'
                              f'overflow-y:auto">{fitted_svg(svg)}</div>' if svg else
                              f"<pre>{html.escape(drawing.text)}</pre>")
        text = model.diff(index)
        if index == len(model.stages) - 1:
            text += "\n\n# generated source\n" + model.source
        changes = "".join(f"<li>{html.escape(c)}</li>" for c in model.stages[index].changes[:20])
        more = len(model.stages[index].changes) - 20
        changes += f"<li>... and {more} more</li>" if more > 0 else ""
        note = model.note(index)  # the pass's notes (BatchNorm folding's arithmetic)
        note = f"<pre style='{CODE_STYLE}'>{html.escape(note)}</pre>" if note else ""
        self.text.value = (f"<div style='margin-left:1em;max-width:560px;max-height:"
                           f"{TEXT_HEIGHT};overflow-y:auto'><ul>{changes}</ul>"
                           f"{note}<pre style='{CODE_STYLE}'>{html.escape(text)}</pre></div>")

    def summary(self) -> str:
        return self.model.summary(self.slider.value)

    def _drawing(self) -> Drawing:
        key = (self.slider.value, self.block.value)
        if key not in self._drawings:
            opened = None if self.block.value == CLOSED else self.block.value
            self._drawings[key] = stage_drawing(self.model, self.slider.value, opened)
        return self._drawings[key]

    def snapshot_png(self) -> bytes | None:
        return self._drawing().png()


def pass_explorer(obj: Any, passes: Sequence[Any] = (), stage: int | str | None = None,
                  shape: dict | None = None, values: dict | None = None,
                  channel: int = 0) -> PassExplorer:
    """The explorer over ``obj`` (a Symbol -- give its input ``shape`` for the memory plan
    -- a graph IR, or a hybridized block that ran), with your ``passes`` added to the
    pipeline; it opens at ``stage`` (an index or a pass's name; default: the last). The
    BatchNorm-folding stage shows its arithmetic for output ``channel`` with the block's
    parameters (or ``values``, name -> array, for a Symbol)."""
    model = PassModel(obj, passes, shape, values, channel)
    if isinstance(stage, str):
        stage = model.stage_index(stage)
    return PassExplorer(model, stage)
