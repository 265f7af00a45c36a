"""The bucket explorer: sequence lengths, bucket keys, and what each choice costs.

What this module teaches
------------------------
Left, the histogram of the sequences' lengths (a text's lines), coloured by the bucket
each falls in, a dashed line at every bucket key, and above each bucket the share of
its tokens that are padding (every sequence in it is padded to its key). Right, the
trade-off for 1 to
:data:`~hybridlab.lab.buckets.MAX_BUCKETS` buckets of the chosen spacing: the padding
wasted (falling) against the first epoch's time, compiles included (the cost of each new
program climbs with the buckets), the current choice circled. Move the buckets slider to
trade padding for programs; switch the way from *unrolled* to *foreach* to make a compile
cheap and watch the best number of buckets move.

The model is :class:`~hybridlab.lab.buckets.BucketModel`; this is its view.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from hybridlab.gluon.contrib.data import SPACINGS
from hybridlab.lab.buckets import MAX_BUCKETS, WAYS, BucketModel, Costs
from hybridlab.viz.bundle import AUTO_BUTTONS, NATURAL_SIZE, Instrument
from hybridlab.viz.palette import OKABE_ITO, lighten

BUCKET_COLOURS = (lighten(OKABE_ITO["blue"], 0.35), lighten(OKABE_ITO["orange"], 0.3))
CURVE_COLOURS = {"padding": OKABE_ITO["vermillion"], "time": OKABE_ITO["blue"]}


def draw(model: BucketModel, figure: Any = None) -> Any:
    """The histogram with the buckets, and the padding/time trade-off curve."""
    import matplotlib.pyplot as plt

    if figure is None:
        figure = plt.figure(figsize=(9, 3.4))
    hist_axes, curve_axes, time_axes = _axes(figure)
    _draw_histogram(hist_axes, model)
    _draw_curve(curve_axes, time_axes, model)
    return figure


def _axes(figure: Any) -> tuple[Any, Any, Any]:
    """The histogram's axes, the curve's and its twin (time), made once per figure; a
    redraw removes only what the last one drew (making axes is most of a redraw's cost)."""
    made = getattr(figure, "_hybridlab_bucket_axes", None)
    if made is None or tuple(figure.axes) != made:
        figure.clear()
        left, right = figure.subplots(1, 2, width_ratios=[3, 2], gridspec_kw=dict(
            left=0.07, right=0.92, bottom=0.16, top=0.88, wspace=0.42))
        made = figure._hybridlab_bucket_axes = (left, right, right.twinx())
    for axes in made:
        for artist in [*axes.collections, *axes.lines, *axes.texts, *axes.patches]:
            artist.remove()
    return made


def _draw_histogram(axes: Any, model: BucketModel) -> None:
    lengths = np.asarray(model.lengths)
    counts = np.bincount(lengths, minlength=model.longest + 1)
    keys = model.bucket_keys()
    top = counts.max() * 1.18
    low, width_pt = 0, 430 / (model.longest + 1)  # the plot is about 430 points wide
    paddings = _bucket_padding(model, keys)
    for index, (key, n, waste) in enumerate(zip(keys, model.counts(keys), paddings)):
        # one filled outline per bucket (a bar per length would be hundreds of patches)
        axes.stairs(counts[low + 1:key + 1], np.arange(low, key + 1) + 0.5, fill=True,
                    color=BUCKET_COLOURS[index % 2], linewidth=0)
        if n and (key - low) * width_pt >= 26:  # its padding, where the label fits
            axes.text((low + key + 1) / 2, top * 0.985, f"{waste:.0%}", ha="center",
                      va="top", fontsize=8, color="#555555")
        low = key
    axes.vlines(np.asarray(keys) + 0.5, 0, top, color="#555555", linestyle="--", linewidth=0.8)
    numbers = model.numbers()
    axes.set(xlim=(0, model.longest + 1), ylim=(0, top), xlabel="sequence length (tokens)",
             ylabel="sequences")
    axes.set_title(f"{numbers['programs']} buckets ({model.spacing}), "
                   f"{numbers['padding']:.1%} of the tokens padding", fontsize=9)


def _bucket_padding(model: BucketModel, keys: Sequence[int]) -> list[float]:
    """Each bucket's share of padding among the tokens it computes."""
    lengths, shares, low = np.asarray(model.lengths), [], 0
    for key in keys:
        inside = lengths[(lengths > low) & (lengths <= key)]
        shares.append(1 - inside.sum() / (key * len(inside)) if len(inside) else 0.0)
        low = key
    return shares


def _draw_curve(axes: Any, twin: Any, model: BucketModel) -> None:
    points = model.curve()
    ks = [k for k, _ in points]
    padding = [100 * n["padding"] for _, n in points]
    first = [n["first_epoch_s"] for _, n in points]
    axes.plot(ks, padding, "o-", markersize=2.5, color=CURVE_COLOURS["padding"])
    twin.plot(ks, first, "s-", markersize=2.5, color=CURVE_COLOURS["time"])
    now = model.numbers()
    twin.plot([len(model.bucket_keys())], [now["first_epoch_s"]], "o", markersize=9,
              markerfacecolor="none", color=CURVE_COLOURS["time"])
    best = model.best()
    twin.vlines([best], 0, max(first) * 1.1, color=CURVE_COLOURS["time"], linestyle=":",
                linewidth=1)
    axes.set(xlim=(0.5, MAX_BUCKETS + 0.5), ylim=(0, max(max(padding), 1) * 1.1),
             xlabel="buckets")
    axes.set_ylabel("padding (% of tokens)", color=CURVE_COLOURS["padding"])
    twin.set_ylim(0, max(first) * 1.1)
    twin.set_ylabel("first epoch (s)", color=CURVE_COLOURS["time"])
    axes.set_title(f"{model.way}: fastest first epoch at {best} buckets", fontsize=9)


class BucketExplorer(Instrument):
    """The widget: the buckets slider, their spacing, the way (the batch size is the
    model's: the step costs were measured at it)."""

    def __init__(self, model: BucketModel) -> None:
        import ipywidgets as widgets
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        self.model = model
        self.buckets = widgets.IntSlider(value=len(model.bucket_keys()), min=1,
                                         max=MAX_BUCKETS, description="buckets",
                                         continuous_update=False)
        self.spacing = widgets.ToggleButtons(options=list(SPACINGS), value=model.spacing,
                                             description="spacing", style=AUTO_BUTTONS)
        self.way = widgets.ToggleButtons(options=list(WAYS), value=model.way,
                                         description="way", style=AUTO_BUTTONS)
        self.numbers = widgets.HTML()
        self.image = widgets.Image(format="png", layout=NATURAL_SIZE)
        self.figure = Figure(figsize=(9, 3.4))
        self._canvas: Any = FigureCanvasAgg(self.figure)
        for control in (self.buckets, self.spacing, self.way):
            control.observe(self._changed, names="value")
        self.widget = widgets.VBox([self.buckets, widgets.HBox([self.spacing, self.way]),
                                    self.numbers, self.image])
        self.widget.add_class("hybridlab-bucket-explorer")
        self.refresh()

    def _changed(self, change: Any = None) -> None:
        m = self.model
        m.keys = None  # the controls choose the keys from now on
        m.buckets, m.spacing = self.buckets.value, self.spacing.value
        m.way = self.way.value
        self.refresh()

    def refresh(self) -> None:
        draw(self.model, self.figure)
        self.show_canvas()

    def summary(self) -> str:
        return self.model.summary()

    def snapshot_png(self) -> bytes | None:
        return self.png


def bucket_explorer(lengths: Sequence[int], costs: dict[str, Costs], buckets: int = 4,
                    spacing: str = "equal width", way: str = "unrolled",
                    batch_size: int = 32, keys: Sequence[int] | None = None) -> BucketExplorer:
    """The explorer over :class:`~hybridlab.lab.buckets.BucketModel`'s settings."""
    model = BucketModel(lengths, costs, buckets, spacing, way, batch_size,
                        None if keys is None else tuple(keys))
    return BucketExplorer(model)
