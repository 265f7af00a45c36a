"""Where the time goes: the peeled call's layers add up, and the kernels are the program's."""

from __future__ import annotations

import pytest

import hybridlab as mx
from hybridlab import nd
from hybridlab.gluon import nn
from hybridlab.lab.graphs import cached_op_of
from hybridlab.lab.timing import LAYERS, where_time_goes
from hybridlab.viz.breakdown import breakdown_figure


def small_mlp():
    mx.random.seed(0)
    net = nn.HybridSequential()
    net.add(nn.Dense(16, activation="relu"), nn.Dense(3))
    net.initialize()
    return net


def test_the_layers_add_up_to_the_call_and_the_kernels_are_the_programs():
    net, x = small_mlp(), nd.ones((2, 8))
    hybridized, imperative = where_time_goes(net, x, calls=5, rounds=2)
    program = cached_op_of(net).last_program
    calls = [(n.name, n.op) for n in program.graph.nodes if n.kind == "call"]
    assert [(name, op) for name, op, _ in hybridized.kernels] == calls
    assert all(seconds > 0 for *_, seconds in hybridized.kernels)
    for breakdown in (hybridized, imperative):
        kernels = sum(t for *_, t in breakdown.kernels)
        layers = sum(t for _, t in breakdown.layers)
        assert kernels + layers == pytest.approx(breakdown.total)
        assert {name for name, _ in breakdown.layers} <= set(LAYERS)
    assert [n for n, _ in hybridized.layers] == ["generated function",
                                                 "CachedOp call + engine push", "block call"]
    assert imperative.total > hybridized.total  # one engine task per operator costs more
    assert net._active and str(hybridized).startswith("hybridized: ")
    assert net(x).shape == (2, 3)  # left hybridized and working


@pytest.mark.viz
def test_the_figure_has_a_panel_per_entry_and_a_legend():
    import matplotlib

    matplotlib.use("Agg")
    net = small_mlp()
    panels = {f"batch {b}": list(zip(("hybridized", "imperative"),
                                     where_time_goes(net, nd.ones((b, 8)), calls=3, rounds=1)))
              for b in (1, 4)}
    figure = breakdown_figure(panels)
    assert [a.get_title() for a in figure.axes] == ["batch 1", "batch 4"]
    labels = [t.get_text() for t in figure.legends[0].get_texts()]
    assert "kernels: opaque" in labels and "framework per operator" in labels
