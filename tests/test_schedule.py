"""The schedule explorer: its task graphs and model are plain Python (tested here)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridlab import engine, nd
from hybridlab.exercises.lesson04 import chain_sum_graph
from hybridlab.lab.schedule import ScheduleModel, TaskGraph
from hybridlab.viz.bundle import PNG, TEXT, WIDGET_VIEW
from hybridlab.viz.schedule import schedule_explorer


def chain_sum(n: int) -> TaskGraph:
    """``((x0 + x1) + x2) + ...`` of n arrays, as a StepEngine saw it (lesson 04's graph)."""
    return chain_sum_graph(n)


@pytest.mark.parametrize("n", [4, 8, 13])
def test_tree_reduction_keeps_the_work_and_cuts_the_span_to_log_n(n):
    chain = ScheduleModel(chain_sum(n))
    tree = ScheduleModel(chain_sum(n), tree=True)
    assert chain.numbers()["work"] == tree.numbers()["work"] == 3 * n - 1
    assert chain.numbers()["span"] == 2 + (n - 1)  # ones, scalar multiply, n - 1 adds
    assert tree.numbers()["span"] == 2 + math.ceil(math.log2(n))
    adds = [d for name, d in zip(tree.current().names, tree.current().deps)
            if name == "broadcast_add"]
    assert len(adds) == n - 1 and all(len(d) == 2 for d in adds)


@settings(max_examples=50, deadline=None)
@given(st.integers(2, 12), st.integers(1, 16), st.booleans())
def test_the_model_reports_brents_bounds_around_its_makespan(n, workers, tree):
    model = ScheduleModel(chain_sum(n), workers=workers, tree=tree)
    numbers = model.numbers()
    assert numbers["lower"] - 1e-9 <= numbers["makespan"] <= numbers["upper"] + 1e-9
    path = model.critical_path()
    assert len(path) == numbers["span"]  # unit costs: the path's length is the span
    graph = model.current()
    assert all(a in graph.deps[b] for a, b in zip(path, path[1:]))
    speedups = dict(model.speedups())
    assert speedups[1] == pytest.approx(1.0)
    assert max(speedups.values()) <= numbers["work"] / numbers["span"] + 1e-9


def test_a_threaded_trace_gives_measured_costs():
    eng = engine.ThreadedEngine(2)
    try:
        with engine.engine_scope(eng):
            eng.set_tracing(True)
            a = nd.ones((50, 50))
            b = nd.dot(a, a) + nd.dot(a, a)
            b.wait_to_read()
            records = list(eng.trace)
    finally:
        eng.close()
    model = schedule_explorer(records).model
    assert model.costs() == ["uniform", "measured", "per operator"]
    model.cost = "measured"
    graph = model.current()
    assert graph.names.count("dot") == 2 and len(graph.measured) == len(records)
    add = graph.names.index("broadcast_add")
    assert sorted(graph.names[d] for d in graph.deps[add]) == ["dot", "dot"]
    assert model.summary().endswith(f"{model.numbers()['upper']:.4g}")


def test_from_dict_and_its_errors():
    graph = TaskGraph.from_dict({"load": (2, []), "a": (1, ["load"]), "b": (3, ["load"]),
                                 "join": (1, ["a", "b"])})
    model = ScheduleModel(graph, workers=2, cost="measured")
    assert model.numbers() == {"work": 7.0, "span": 6.0, "makespan": 6.0, "lower": 6.0,
                               "upper": 9.5}
    with pytest.raises(ValueError, match="unknown tasks \\['nope'\\]"):
        TaskGraph.from_dict({"a": (1, ["nope"])})
    with pytest.raises(ValueError, match=r"cost='measured': this graph offers \['uniform'\]"):
        ScheduleModel(chain_sum(3), cost="measured")


@pytest.mark.viz
def test_the_explorer_redraws_in_place_when_a_control_moves():
    pytest.importorskip("ipywidgets")
    view = schedule_explorer(chain_sum(8), workers=1)
    bundle = view._repr_mimebundle_()
    assert WIDGET_VIEW in bundle and bundle[PNG].startswith("iVBOR")
    assert bundle[TEXT].startswith("23 tasks on 1 worker(s)") and "makespan 23" in bundle[TEXT]
    figure, first = view.figure, view.image.value
    view.workers.value = 4
    assert "makespan 9 " in view.numbers.value and view.image.value != first
    view.tree.value = "tree"
    assert "span 5," in view.summary() and view.figure is figure  # the same figure, redrawn


@pytest.mark.viz
def test_real_vs_simulated_uses_the_traces_durations_and_worker_count():
    import re

    import matplotlib

    matplotlib.use("Agg")
    from hybridlab.viz.schedule import real_vs_simulated

    eng = engine.ThreadedEngine(2)
    try:
        with engine.engine_scope(eng):
            a = nd.ones((200, 200))  # tasks of ~ms: the printed 0.001 ms rounding is small
            eng.wait_all()
            eng.set_tracing(True)
            (nd.dot(a, a) + nd.dot(a, a)).wait_to_read()
            records = list(eng.trace)
    finally:
        eng.close()
    line, figure = real_vs_simulated(records)
    workers = len({r.worker for r in records if r.worker >= 0})
    real, ideal, ratio = map(float, re.findall(r"[\d.]+(?= ms|$)", line)[:2] +
                             [line.rsplit("= ", 1)[1]])
    assert f"on {workers} worker(s)" in line and ratio == pytest.approx(real / ideal, rel=0.02)
    total = sum(r.end - r.start for r in records)
    assert ideal * 1e-3 <= total + 5e-7  # never longer than the work (0.001 ms printed)
    assert figure.axes
