"""Notebook helpers: graph drawings (``viz.graph``), the compiler at work (``viz.views``),
speed-up plots (``viz.plots``).

Importing this package is light: graphviz, matplotlib and ipywidgets are imported inside
the functions that draw, so ``import hybridlab`` never pays for them.
"""

from hybridlab.viz.graph import draw, draw_blocks, draw_gradient, plot_network, print_summary
from hybridlab.viz.views import draw_passes, draw_with_source

__all__ = ["draw", "draw_blocks", "draw_gradient", "draw_passes", "draw_with_source",
           "plot_network", "print_summary"]
