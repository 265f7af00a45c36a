"""The compiler at work, laid out for notebooks: passes side by side, source beside graph.

What this module teaches
------------------------
A compiler is easiest to understand by watching it. :func:`draw_passes` runs the pass
pipeline on a graph and shows the graph before the passes and after each pass that
changed something, with the pass's own list of changes; :func:`draw_with_source` puts the
optimised graph next to the Python source generated from it, so each line of code can
be matched with its node.

Invariants
----------
* Every view carries a plain-text twin (the summaries, or the source itself) that does
  not depend on graphviz, so nbval compares it and a reader without ``dot`` sees it.
* Views only read: the pipeline runs on the given graph, which is never modified.
"""

from __future__ import annotations

from typing import Any

from hybridlab.viz.graph import (
    Drawing,
    as_graph,
    block_parameters,
    cached_op_of,
    parameter_names,
    summary,
    to_dot,
)


class HtmlView:
    """Several drawings (and code) laid out in HTML, with a plain-text twin for nbval."""

    def __init__(self, html: str, text: str) -> None:
        self.html = html
        self.text = text

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/html": self.html, "text/plain": self.text}

    def __repr__(self) -> str:
        return self.text


def _panel(heading: str, drawing: Drawing) -> str:
    import html

    body = drawing.svg() or f"<pre>{html.escape(drawing.text)}</pre>"
    return (f'<div style="margin:0 12px 12px 0"><b>{html.escape(heading)}</b>'
            f'<div style="max-width:420px;overflow:auto">{body}</div></div>')


def draw_passes(obj: Any, only_changed: bool = True) -> HtmlView:
    """The graph before the pipeline, then after each pass (that changed something)."""
    from hybridlab.graph.passes import run_pipeline

    graph, params = as_graph(obj)
    _, records = run_pipeline(graph)
    panels = [("before the passes", graph, [])]
    panels += [(r.name, r.after, r.changes) for r in records if r.changes or not only_changed]
    html_parts, lines = [], []
    for heading, step, changes in panels:
        title = f"{heading} ({len(changes)} change{'s' * (len(changes) != 1)})" if changes \
            else heading
        drawing = Drawing(to_dot(step, "plot", params), summary(step, params))
        html_parts.append(_panel(title, drawing))
        lines.append(f"{title}: {drawing.text}")
    html_text = '<div style="display:flex;flex-wrap:wrap">' + "".join(html_parts) + "</div>"
    return HtmlView(html_text, "\n".join(lines))


def draw_with_source(obj: Any) -> HtmlView:
    """The compiled graph on the left, the Python generated from it on the right."""
    import html

    graph, source = _compiled(obj)
    params = parameter_names(graph) + block_parameters(obj)
    drawing = Drawing(to_dot(graph, "plot", params), summary(graph, params))
    code = f'<pre style="font-size:11px">{html.escape(source)}</pre>'
    html_text = f'<div style="display:flex">{_panel("graph", drawing)}<div>{code}</div></div>'
    return HtmlView(html_text, source)


def _compiled(obj: Any) -> tuple[Any, str]:
    """(optimised graph, generated source): the last program a CachedOp compiled, or a
    fresh compilation of anything else drawable."""
    entry = getattr(cached_op_of(obj), "_last", None)  # NOTE: CachedOp keeps its last entry
    if entry is not None:
        return entry.forward.graph, entry.forward.source
    from hybridlab.graph.codegen import compile_graph
    from hybridlab.graph.passes import run_pipeline

    program = compile_graph(run_pipeline(as_graph(obj)[0])[0])
    return program.graph, program.source
