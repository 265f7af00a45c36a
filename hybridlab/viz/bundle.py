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
import json
import re
from typing import Any

PNG = "image/png"
TEXT = "text/plain"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
# An instrument's picture at its natural size (a column box would stretch it to the output's
# width, blurred), shrunk only when the output is narrower; without the widgets' 2-px margin,
# which would push a picture shrunk to 100% past its box's edge (a sideways scroll bar).
NATURAL_SIZE = {"align_self": "flex-start", "max_width": "100%", "height": "auto", "margin": "0"}
AUTO_BUTTONS = {"button_width": "auto"}  # toggle buttons as wide as their labels, never cut
# A row of controls (or panels) that wraps onto a second line when the output is narrower
# than the row (a 1280-pixel window leaves ~850 px), instead of running off its edge.
ROW = {"flex_flow": "row wrap"}


def drop_dangling_widget_views(notebook: dict[str, Any]) -> int:
    """Remove the widget view from every output whose model the notebook's saved widget
    state does not hold and that has another form to show (its PNG); return how many.

    JupyterLab prefers a widget view to every other form of an output, and a view whose
    model is missing shows "Error displaying widget: model not found" -- the PNG beside
    it is never shown. Without the view, every reader shows the PNG; an output with a PNG
    and no HTML also gets an HTML form saying it is a snapshot (:data:`SNAPSHOT_NOTICE`)
    above that picture, as a restored widget would.
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
                if isinstance(data.get(PNG), str) and "text/html" not in data:
                    data["text/html"] = (f'<p class="hybridlab-notice"><em>{SNAPSHOT_NOTICE}'
                                         f'</em></p><img src="data:image/png;base64,'
                                         f'{data[PNG].strip()}"/>')
    return dropped


def keep_shown_widget_state(notebook: dict[str, Any]) -> int:
    """Keep in the saved widget state only the models an output still shows (and the
    models they hold); return how many were removed. A lab that does not save widget
    state (the workspace's: NOTE [Clean on open]) keeps the state the notebook came with,
    so the models of outputs the student re-ran would otherwise stay in the file."""
    holder = ((notebook.get("metadata") or {}).get("widgets") or {}).get(WIDGET_STATE) or {}
    state = holder.get("state") or {}
    todo = [(output.get("data") or {}).get(WIDGET_VIEW, {}).get("model_id")
            for cell in notebook.get("cells") or [] for output in cell.get("outputs") or []]
    shown: set[str] = set()
    while todo:
        model = todo.pop()
        if model in state and model not in shown:
            shown.add(model)
            todo += re.findall(r"IPY_MODEL_([\w-]+)", json.dumps(state[model]))
    removed = len(state) - len(shown)
    if removed:
        holder["state"] = {model: value for model, value in state.items() if model in shown}
    return removed


def pre_save_hook(model: dict[str, Any], **_: Any) -> None:
    """A Jupyter server ``ContentsManager.pre_save_hook`` (installed by the workspace):
    every notebook saved, autosaves included, goes through
    :func:`drop_dangling_widget_views`, then :func:`keep_shown_widget_state`.

    NOTE [Clean on open]: the workspace's JupyterLab does *not* turn on the widget
    manager's ``saveState``. With it on, the manager marks a notebook changed for every
    model it restores from the file, so a lesson with saved widgets was changed the
    moment it opened (autosave rewrote it, closing asked to save). Without it, a lesson's
    saved widgets still come back from the state the course saved, and an instrument the
    student ran again is saved as its PNG, marked a snapshot, by this hook."""
    if model.get("type") == "notebook" and isinstance(model.get("content"), dict):
        drop_dangling_widget_views(model["content"])
        keep_shown_widget_state(model["content"])


def fitted_svg(svg: str) -> str:
    """dot's SVG for an HTML widget: without its XML prologue, at its natural size (text as
    drawn) and shrunk to the output's width when wider -- no sideways scroll."""
    return "<svg style='max-width:100%;height:auto'" + svg[svg.index("<svg") + 4:]


# A laptop's output area (a 1280-px JupyterLab window: 848 px) in points, and how far a
# drawing may shrink to fit it: dot's smallest text is 9 pt (12 px), kept at >= 9 px.
LAPTOP_OUTPUT_PT = 630
SMALLEST_SCALE = 0.75


def laptop_svg(svg: str) -> str:
    """dot's SVG declared at most a laptop output's width, shrunk by at most
    ``SMALLEST_SCALE`` (its viewBox keeps the drawing whole). JupyterLab shows an SVG at its
    declared size, so a wider one scrolled sideways; one wider still keeps the smallest
    readable size and scrolls."""
    found = re.search(r'<svg width="([0-9.]+)pt" height="([0-9.]+)pt"', svg)
    if found is None or float(found[1]) <= LAPTOP_OUTPUT_PT:
        return svg
    scale = max(LAPTOP_OUTPUT_PT / float(found[1]), SMALLEST_SCALE)
    return (f'{svg[:found.start()]}<svg width="{float(found[1]) * scale:.0f}pt" '
            f'height="{float(found[2]) * scale:.0f}pt"{svg[found.end():]}')


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


def canvas_png(canvas: Any) -> bytes:
    """What an Agg canvas holds now (after ``canvas.draw()``), as PNG: one render, no
    tight-bbox second pass, zlib's fast level -- for instruments that redraw on a control."""
    from PIL import Image

    width, height = canvas.get_width_height(physical=True)
    buffer = io.BytesIO()
    Image.frombuffer("RGBA", (width, height), canvas.buffer_rgba(), "raw", "RGBA", 0, 1
                     ).save(buffer, format="png", compress_level=1)
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
            ax.text(0, 1, body, family="monospace", fontsize=9, va="top", ha="left",
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


# What a widget restored without its kernel says instead of showing dead controls. The
# style rides in the notice's own saved value, so stock JupyterLab and the site's widget
# manager both apply it: they mark every view whose model has no live kernel connection
# with the class ``jupyter-widgets-disconnected`` (ipywidgets' DOMWidgetView), and the
# rules below show the notice, hide the controls and the broken-link icons only then.
SNAPSHOT_NOTICE = "a saved snapshot \u2014 run the cell to play"
PAST_NOTE = ("an earlier moment of this instrument, as it was when this cell ran; the "
             "live one is its latest display")
_CONTROLS = ",".join(f".hybridlab-moment .jupyter-widgets-disconnected.{c}" for c in (
    "widget-button", "widget-dropdown", "widget-slider", "widget-toggle-buttons",
    "widget-checkbox", "widget-select", "widget-radio", "widget-text", "widget-play"))
_NOTICE_STYLE = (
    "<style>.hybridlab-notice:not(.jupyter-widgets-disconnected),"
    ".hybridlab-past-note.jupyter-widgets-disconnected{display:none !important}"
    f"{_CONTROLS}{{display:none !important}}"
    ".hybridlab-moment.jupyter-widgets-disconnected::before,"
    ".hybridlab-moment .jupyter-widgets-disconnected::before{display:none !important}"
    ".hybridlab-notice{font-style:italic}</style>")
_notice: Any = None  # one notice widget per kernel, shared by every moment


def notice_widget() -> Any:
    """The snapshot notice (an ipywidgets HTML, made once per kernel)."""
    global _notice
    import ipywidgets as widgets

    if _notice is None:
        _notice = widgets.HTML(f"{_NOTICE_STYLE}<span>{SNAPSHOT_NOTICE}</span>")
        _notice.add_class("hybridlab-notice")
    return _notice


def freeze(widget: Any) -> Any:
    """A copy of what ``widget`` shows now, without its controls: boxes are rebuilt
    around frozen children, HTML, labels and images are copied by value, anything else
    (buttons, sliders, menus) is left out. ``None`` when nothing is left."""
    import ipywidgets as widgets

    if isinstance(widget, widgets.Box):
        children = [c for c in map(freeze, widget.children) if c is not None]
        if not children:
            return None
        box = type(widget)(children, layout=widget.layout)
        box._dom_classes = tuple(c for c in widget._dom_classes if not c.startswith("hybridlab-"))
        return box
    if isinstance(widget, (widgets.HTML, widgets.HTMLMath, widgets.Label)):
        return type(widget)(value=widget.value, layout=widget.layout)
    if isinstance(widget, widgets.Image):
        return widgets.Image(value=widget.value, format=widget.format, layout=widget.layout)
    return None


class Instrument:
    """Base of every instrument's view (queue stepper, schedule explorer, pass explorer,
    speed-up plot ...).

    A subclass sets ``self.widget`` (an ipywidgets widget, or None) and gives
    :meth:`summary` and :meth:`snapshot_png` (by default the model's summary and the
    drawing kept in ``self.png``); displaying it then gives the three-form
    bundle described in this module's docstring, and ``repr`` gives the summary.

    Each display is its own moment (ARCHITECTURE.md, "Instruments as documents"): the
    widget view of a display is a new box holding the notice and the live widget; the
    next display turns the previous box into a frozen copy of what it showed when its
    cell ran (:func:`freeze`), so a saved notebook shows every moment, and only the
    latest display has controls.
    """

    widget: Any = None
    _canvas: Any = None  # figure instruments: the matplotlib canvas, its Image widget,
    image: Any = None  # and the line of numbers under it (show_canvas)
    numbers: Any = None
    model: Any = None  # the instrument's model (lab/), when it has one
    png: bytes | None = None  # the latest drawing, when the view keeps one
    _live_moment: Any = None  # (the box of the latest display, its frozen copy)

    def summary(self) -> str:
        """A stable plain-text description of the current state (what nbval compares);
        by default the model's ``summary()``."""
        if self.model is None:
            raise NotImplementedError(f"{type(self).__name__} must define summary()")
        return str(self.model.summary())

    def show_canvas(self) -> None:
        """Render the view's matplotlib canvas into its Image widget and its numbers line
        (the figure already redrawn): the last steps of a figure instrument's refresh."""
        self._canvas.draw()
        self.png = canvas_png(self._canvas)
        self.image.value = self.png
        self.numbers.value = f"<code>{self.model.summary()}</code>"

    def snapshot_png(self) -> bytes | None:
        """A PNG of the current state (None if it cannot be drawn here); by default the
        drawing the view keeps in ``self.png``."""
        return self.png

    def before_display(self) -> None:
        """Bring the widget up to date before a display records it (default: nothing)."""

    def moment(self) -> Any:
        """The widget of one display: the live widget in a new box (see the class doc)."""
        if self.widget is None:
            return None
        import ipywidgets as widgets

        self.before_display()
        frozen = freeze(self.widget)
        box = widgets.VBox([notice_widget(), self.widget])
        box.add_class("hybridlab-moment")
        if self._live_moment is not None:
            previous, previous_frozen = self._live_moment
            note = widgets.HTML(f"<i>{PAST_NOTE}</i>")
            note.add_class("hybridlab-past-note")
            previous.children = [notice_widget(), note] + (
                [previous_frozen] if previous_frozen is not None else [])
            previous.add_class("hybridlab-past")
        self._live_moment = (box, frozen)
        return box

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        moment = self.moment()
        return widget_bundle(moment, self.summary(), self.snapshot_png())

    def __repr__(self) -> str:
        return self.summary()
