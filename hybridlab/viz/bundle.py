"""What an instrument puts in a notebook: the live widget, a picture of it, and its text.

What this module teaches
------------------------
A saved notebook is read in many places that cannot run a widget: GitHub, nbviewer, an
untrusted JupyterLab (which draws neither widgets nor SVG from a file it did not run),
nbval (which compares text). Jupyter's answer is the *MIME bundle*: one output holds
several forms of the same thing, and each reader picks the richest form it can show.
So every instrument of the course displays one bundle with three forms:

* ``application/vnd.jupyter.widget-view+json`` -- the live widget (a kernel, or saved
  widget state and a widget manager, brings it back);
* ``image/png`` -- a snapshot of its current state, which every reader can show;
* ``text/plain`` -- a stable summary: what nbval compares and what a terminal prints.

:class:`Instrument` is the one base class that builds that bundle; an instrument only
says how to draw its snapshot and how to summarise itself. Graph drawings and HTML
panels use :func:`rich_bundle` to add the same PNG beside their SVG or HTML.

Invariants
----------
* The PNG is rendered when the output is displayed, never on a click: clicks redraw the
  widget only.
* Without the widget libraries (or with ``widget=None``) the bundle still has the PNG and
  the text, so a plain ``python`` session and a static site show the same state.
* The text form never contains addresses or timings, so it is stable under nbval.
"""

from __future__ import annotations

import base64
import io
from typing import Any

PNG = "image/png"
TEXT = "text/plain"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def drop_dangling_widget_views(notebook: dict[str, Any]) -> int:
    """Remove the widget view from every output whose model the notebook's saved widget
    state does not hold and that has another form to show (its PNG); return how many.

    JupyterLab prefers a widget view to every other form of an output, and a view whose
    model is missing shows "Error displaying widget: model not found" -- the PNG beside
    it is never shown. Without the view, every reader shows the PNG.
    """
    metadata = notebook.get("metadata") or {}
    state = ((metadata.get("widgets") or {}).get(WIDGET_STATE) or {}).get("state") or {}
    dropped = 0
    for cell in notebook.get("cells") or []:
        for output in cell.get("outputs") or []:
            data = output.get("data") or {}
            view = data.get(WIDGET_VIEW)
            if isinstance(view, dict) and view.get("model_id") not in state and len(data) > 1:
                del data[WIDGET_VIEW]
                dropped += 1
    return dropped


def pre_save_hook(model: dict[str, Any], **_: Any) -> None:
    """A Jupyter server ``ContentsManager.pre_save_hook`` (installed by the workspace):
    every notebook saved, autosaves included, goes through
    :func:`drop_dangling_widget_views`."""
    if model.get("type") == "notebook" and isinstance(model.get("content"), dict):
        drop_dangling_widget_views(model["content"])


def encode_png(png: bytes | None) -> str | None:
    """The base64 text a notebook stores for PNG bytes (None stays None)."""
    return None if png is None else base64.b64encode(png).decode("ascii")


def figure_png(figure: Any, dpi: int = 100, tight: bool = True) -> bytes:
    """A matplotlib figure as PNG bytes, on the figure's own (opaque) background;
    ``tight=False`` keeps the figure's own margins and saves a second render (for
    instruments that redraw on every slider move)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight" if tight else None,
                   facecolor=figure.get_facecolor())
    return buffer.getvalue()


def stack_png(panels: list[tuple[str, bytes | str]], width_px: int = 900) -> bytes:
    """One PNG of several panels, top to bottom: each a heading over a picture (PNG
    bytes) or over monospaced text (a ``str``, e.g. generated source). What an HTML
    panel of several drawings shows to a reader that cannot show HTML."""
    import matplotlib.image as mpimg
    import matplotlib.pyplot as plt

    heights, items = [], []
    for heading, body in panels:
        if isinstance(body, bytes):
            image = mpimg.imread(io.BytesIO(body), format="png")
            scale = min(1.0, width_px / image.shape[1])
            heights.append(image.shape[0] * scale / 100 + 0.35)
            items.append((heading, image))
        else:
            lines = body.splitlines() or [""]
            heights.append(0.16 * len(lines) + 0.35)
            items.append((heading, "\n".join(lines)))  # type: ignore[arg-type]
    figure, axes = plt.subplots(len(items), 1, figsize=(width_px / 100, sum(heights)),
                                gridspec_kw={"height_ratios": heights}, squeeze=False)
    figure.patch.set_facecolor("white")
    for ax, (heading, body) in zip(axes[:, 0], items):  # type: ignore[assignment]
        ax.set_axis_off()
        ax.set_title(heading, loc="left", fontsize=10, fontweight="bold")
        if isinstance(body, str):
            ax.text(0, 1, body, family="monospace", fontsize=8, va="top", ha="left",
                    transform=ax.transAxes)
        else:
            ax.imshow(body, interpolation="antialiased")
            ax.set_anchor("W")
    png = figure_png(figure)
    plt.close(figure)
    return png


def rich_bundle(text: str, png: bytes | None = None, **forms: Any) -> dict[str, Any]:
    """A MIME bundle: ``text`` as ``text/plain``, ``png`` as ``image/png`` and any other
    forms given by MIME type (``**{"image/svg+xml": svg}``); ``None`` forms are left out."""
    bundle: dict[str, Any] = {TEXT: text}
    if png is not None:
        bundle[PNG] = encode_png(png)
    bundle.update({mime: value for mime, value in forms.items() if value is not None})
    return bundle


def widget_bundle(widget: Any, text: str, png: bytes | None) -> dict[str, Any]:
    """The bundle of an instrument: the widget's view, its PNG snapshot and its text."""
    bundle = rich_bundle(text, png)
    if widget is not None:
        view = widget._repr_mimebundle_()  # ipywidgets 8: {"text/plain", widget view}
        if isinstance(view, tuple):  # (data, metadata) from some IPython versions
            view = view[0]
        if view and WIDGET_VIEW in view:
            bundle[WIDGET_VIEW] = view[WIDGET_VIEW]
    return bundle


class Instrument:
    """Base of every instrument's view (queue stepper, schedule explorer, pass explorer,
    speed-up plot ...).

    A subclass sets ``self.widget`` (an ipywidgets widget, or None) and implements
    :meth:`summary` and :meth:`snapshot_png`; displaying it then gives the three-form
    bundle described in this module's docstring, and ``repr`` gives the summary.
    """

    widget: Any = None

    def summary(self) -> str:
        """A stable plain-text description of the current state (what nbval compares)."""
        raise NotImplementedError(f"{type(self).__name__} must define summary()")

    def snapshot_png(self) -> bytes | None:
        """A PNG of the current state (None if it cannot be drawn here)."""
        raise NotImplementedError(f"{type(self).__name__} must define snapshot_png()")

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return widget_bundle(self.widget, self.summary(), self.snapshot_png())

    def __repr__(self) -> str:
        return self.summary()
