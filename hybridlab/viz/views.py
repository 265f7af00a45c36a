"""The compiler at work, laid out for notebooks: pass by pass, and graph above source.

What this module teaches
------------------------
A compiler is easiest to understand by watching it. :func:`draw_passes` runs the pass
pipeline on a graph and shows the graph before the passes and after each pass that
changed something, with the pass's own list of changes (a pass that only annotates the
graph, like ``plan_memory``, shows its annotations: each result's place in memory).
:func:`draw_with_source` puts the optimised graph above the Python source generated from
it, so each line of code can be matched with its node.

Invariants
----------
* Every view carries a plain-text twin (the summaries, or the source itself) that does
  not depend on graphviz, so nbval compares it and a reader without ``dot`` sees it.
* Legible at notebook width (~800 px): pictures keep their natural size unless wider
  than the page, source lines are wrapped after commas (never inside a name) and scroll
  sideways rather than shrink.
* Views only read: the pipeline runs on the given graph, which is never modified.
"""

from __future__ import annotations

import html
from typing import Any

from hybridlab.lab.graphs import as_graph, block_parameters, cached_op_of, parameter_names, summary
from hybridlab.lab.memory import memory_notes
from hybridlab.viz.bundle import encode_png, rich_bundle, stack_png
from hybridlab.viz.graph import Drawing, to_dot
from hybridlab.viz.palette import CODE_STYLE, QUIET_TEXT

CAPTION_LINES = 3  # a pass's changes shown under its heading; the rest are counted


class HtmlView:
    """Several drawings (and code) laid out in HTML, with a plain-text twin for nbval and
    the same panels stacked in one PNG for readers that show no HTML (an untrusted
    notebook, GitHub)."""

    def __init__(self, html_text: str, text: str,
                 panels: list[tuple[str, Drawing | str]] | None = None) -> None:
        self.html = html_text
        self.text = text
        self.panels = panels or []  # (heading, drawing or text) for the PNG

    def png(self) -> bytes | None:
        """The panels stacked in one PNG (None without ``dot`` or matplotlib)."""
        pictures = []
        for heading, body in self.panels:
            picture = body.png() if isinstance(body, Drawing) else body
            if picture is None:
                return None
            pictures.append((heading, picture))
        try:
            return stack_png(pictures) if pictures else None
        except ImportError:
            return None

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return rich_bundle(self.text, self.png(), **{"text/html": self.html})

    def __repr__(self) -> str:
        return self.text


def _picture(drawing: Drawing) -> str:
    """The drawing as a PNG image at its natural size (shrunk only if wider than the page),
    or the text without ``dot``.

    A PNG rather than inline SVG: JupyterLab shows HTML even in an untrusted notebook (a
    fresh clone's), but sanitised -- an inline SVG loses its shapes and leaves its labels
    run together -- while an embedded PNG survives, so the panel reads the same trusted or
    not.
    """
    png = drawing.png()
    if png is None:
        return f"<pre>{html.escape(drawing.text)}\n{html.escape(str(drawing.hint))}</pre>"
    return (f'<img src="data:image/png;base64,{encode_png(png)}" alt="{html.escape(drawing.text)}"'
            ' style="max-width:100%;height:auto"/>')


def _panel(heading: str, caption: list[str], body: str) -> str:
    lines = caption[:CAPTION_LINES]
    if len(caption) > CAPTION_LINES:
        lines.append(f"... and {len(caption) - CAPTION_LINES} more")
    notes = "".join(f"<div>{html.escape(line)}</div>" for line in lines)
    return (f'<div style="margin:0 24px 16px 0;max-width:100%">'
            f"<b>{html.escape(heading)}</b>"
            f'<div style="font-size:12px;{QUIET_TEXT};margin:2px 0 4px 0">{notes}</div>'
            f"{body}</div>")


def draw_passes(obj: Any, only_changed: bool = True) -> HtmlView:
    """The graph before the pipeline, then after each pass (that changed something)."""
    from hybridlab.graph.passes import run_pipeline

    graph, params = as_graph(obj)
    _, records = run_pipeline(graph)
    steps = [("before the passes", graph, [], False)]  # type: ignore[var-annotated]
    steps += [(r.name, r.after, r.changes, r.after.nodes == r.before.nodes)
              for r in records if r.changes or not only_changed]
    parts, lines, panels = [], [], []
    for name, step, changes, annotates in steps:
        heading = f"{name} ({len(changes)} change{'s' * (len(changes) != 1)})" \
            if changes else name
        notes = memory_notes(step) if annotates else {}
        drawing = Drawing(to_dot(step, "plot", params, notes=notes), summary(step, params))
        if annotates and not notes:  # the same picture again would teach nothing
            body = "<i>(the graph is unchanged: this pass only annotates it)</i>"
        else:
            body = _picture(drawing)
            panels.append((heading, drawing))
        parts.append(_panel(heading, changes, body))
        lines.append(f"{heading}: {drawing.text}")
    layout = '<div style="display:flex;flex-wrap:wrap;align-items:flex-start">'
    return HtmlView(layout + "".join(parts) + "</div>", "\n".join(lines), panels)  # type: ignore[arg-type]


def draw_with_source(obj: Any, width: int = 96, which: str = "forward") -> HtmlView:
    """The compiled graph, and under it the Python generated from it. ``which="backward"``
    shows the backward program a hybridized block compiled when it was called inside
    ``autograd.record()`` (lesson 07)."""
    graph, source = _compiled(obj, which)
    params = parameter_names(graph) + block_parameters(obj)
    drawing = Drawing(to_dot(graph, "plot", params), summary(graph, params))
    code = f'<pre style="{CODE_STYLE}">{html.escape(wrap_source(source, width))}</pre>'
    return HtmlView(_panel("graph", [], _picture(drawing)) +
                    _panel("generated source", [], code), source,
                    [("graph", drawing), ("generated source", wrap_source(source, width))])


def wrap_source(source: str, width: int = 96) -> str:
    """Long lines broken after a comma and continued under their opening bracket, as
    PEP 8 does by hand (still valid Python, and never breaking inside a name)."""
    return "\n".join(_wrap_line(line, width) for line in source.splitlines())


def _wrap_line(line: str, width: int) -> str:
    if len(line) <= width or "(" not in line or line.lstrip().startswith("#"):
        return line
    indent = len(line) - len(line.lstrip())
    bracket = line.index("(") + 1
    hang = " " * (bracket if bracket <= 40 else indent + 8)
    pieces = line.split(", ")
    lines, current = [], pieces[0]
    for piece in pieces[1:]:
        if len(current) + 2 + len(piece) + 1 > width:  # + 1: room for a trailing comma
            lines.append(current + ",")
            current = hang + piece
        else:
            current += ", " + piece
    return "\n".join([*lines, current])


def _compiled(obj: Any, which: str = "forward") -> tuple[Any, str]:
    """(optimised graph, generated source): the last program a CachedOp compiled, or a
    fresh compilation of anything else drawable."""
    if which not in ("forward", "backward"):
        raise ValueError(f"which={which!r}: draw the 'forward' or the 'backward' program")
    entry = getattr(cached_op_of(obj), "_last", None)  # NOTE: CachedOp keeps its last entry
    if which == "backward" and getattr(entry, "backward", None) is None:
        raise ValueError("no backward program to draw: hybridize the block and call it "
                         "inside autograd.record() with a parameter that wants a gradient "
                         "(for a Symbol, draw graph.autodiff.gradient_graph(sym.to_graph()))")
    if entry is not None:
        program = entry.backward if which == "backward" else entry.forward
        return program.graph, program.source
    from hybridlab.graph.codegen import compile_graph
    from hybridlab.graph.passes import run_pipeline

    program = compile_graph(run_pipeline(as_graph(obj)[0])[0])
    return program.graph, program.source
