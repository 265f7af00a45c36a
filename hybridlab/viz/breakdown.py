"""Where the time of one forward call goes, drawn: the kernels, and each layer around them.

The measurement -- the call peeled from the inside out, each layer timed on its own
(NOTE [A fair floor] in ``hybridlab/lab/timing.py``) -- is
:func:`hybridlab.lab.timing.where_time_goes`; ``benchmarks/hybridize_mlp.py --profile``
prints the same numbers. Here one stacked bar per breakdown shows them.
"""

from __future__ import annotations

from typing import Any

from hybridlab.lab.graphs import op_kind
from hybridlab.lab.timing import LAYERS, Breakdown
from hybridlab.viz.palette import KIND_COLOURS, OKABE_ITO, OTHER_COLOUR

LAYER_COLOURS = dict(zip(LAYERS, (  # one colour per overhead segment
    OKABE_ITO["yellow"], OKABE_ITO["orange"], OKABE_ITO["vermillion"], OKABE_ITO["blue"])))


def breakdown_figure(panels: dict[str, list[tuple[str, Breakdown]]]) -> Any:
    """One panel per entry (e.g. per batch size, each with its own time axis), one
    stacked bar per ``(label, breakdown)``: the kernels (filled by operator kind), then
    each layer around them (hatched); microseconds per call."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    bars = max(len(rows) for rows in panels.values())
    figure, axes_list = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 1.2 + 0.5 *
                                     bars), layout="constrained", squeeze=False)
    every = [b for rows in panels.values() for _, b in rows]
    for axes, (title, rows) in zip(axes_list[0], panels.items()):
        for row, (_, breakdown) in enumerate(rows):
            left = 0.0
            for _, op_name, seconds in breakdown.kernels:
                axes.barh(row, seconds * 1e6, left=left, height=0.6, edgecolor="white",
                          linewidth=0.5,
                          color=KIND_COLOURS.get(op_kind(op_name), OTHER_COLOUR))
                left += seconds * 1e6
            for name, seconds in breakdown.layers:
                width = max(seconds, 0.0) * 1e6  # a layer measured as free adds nothing
                axes.barh(row, width, left=left, height=0.6, color=LAYER_COLOURS[name],
                          hatch="///", edgecolor="white", linewidth=0.5)
                left += width
            axes.text(left, row, f" {breakdown.total * 1e6:.0f} µs", va="center", fontsize=9)
        axes.set_yticks(range(len(rows)), [label for label, _ in rows])
        axes.invert_yaxis()
        axes.margins(x=0.18)
        axes.set_title(title, fontsize=10)
        axes.set_xlabel("µs per forward call")
    kinds = sorted({op_kind(o) for b in every for _, o, _ in b.kernels})
    handles = [Patch(color=KIND_COLOURS.get(k, OTHER_COLOUR), label=f"kernels: {k}")
               for k in kinds]
    handles += [Patch(facecolor=colour, hatch="///", edgecolor="white", label=name)
                for name, colour in LAYER_COLOURS.items()
                if any(name == n for b in every for n, _ in b.layers)]
    figure.legend(handles=handles, loc="outside lower center", ncols=3, fontsize=9,
                  frameon=False)
    return figure
