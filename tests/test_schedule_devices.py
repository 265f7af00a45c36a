"""Typed workers (devices and copy streams), per-operator costs and graphs from Symbols in
the schedule explorer's model. Typed workers break Brent's bounds, so they are tested with
their own invariants."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hybridlab as mx
from hybridlab.lab.schedule import ScheduleModel, TaskGraph, simulate
from hybridlab.viz.schedule import schedule_explorer

KINDS = ("cpu", "gpu", "copy")


@st.composite
def typed_graphs(draw):
    n = draw(st.integers(1, 14))
    deps = [sorted(set(draw(st.lists(st.integers(0, i - 1), max_size=3)))) if i else []
            for i in range(n)]
    durations = [draw(st.sampled_from([0.5, 1.0, 2.0, 3.0])) for _ in range(n)]
    devices = [draw(st.sampled_from(KINDS)) for _ in range(n)]
    pools = {"cpu": draw(st.integers(1, 3)), "gpu": draw(st.integers(1, 2)), "copy": 1}
    return deps, durations, devices, pools


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(typed_graphs())
def test_typed_schedules_keep_their_own_invariants(case):
    deps, durations, devices, pools = case
    records = simulate([f"t{i}" for i in range(len(deps))], deps, durations, pools, devices)
    first, kind_of_worker = 0, {}
    for kind, count in pools.items():
        kind_of_worker.update({w: kind for w in range(first, first + count)})
        first += count
    for i, r in enumerate(records):
        assert kind_of_worker[r.worker] == devices[i]  # on a worker of its own kind
        assert r.end - r.start == pytest.approx(durations[i])
        for d in deps[i]:  # after everything it reads (copies before their consumers)
            assert records[d].end <= r.start + 1e-9
        # work-conserving within its pool: from the moment it was ready until it started,
        # every worker of its kind was busy
        ready = max((records[d].end for d in deps[i]), default=0.0)
        if r.start > ready + 1e-9:
            busy = {o.worker for o in records if o.start <= ready + 1e-9 < o.end
                    and kind_of_worker[o.worker] == devices[i]}
            assert len(busy) == pools[devices[i]]
    for w in kind_of_worker:  # no worker runs two tasks at once
        bars = sorted((r.start, r.end) for r in records if r.worker == w)
        assert all(a[1] <= b[0] + 1e-9 for a, b in zip(bars, bars[1:]))
    # the typed bounds: max(S, max_d W_d / k_d) <= T <= S + sum_d W_d / k_d
    model = ScheduleModel(TaskGraph([f"t{i}" for i in range(len(deps))], deps, durations,
                                    devices=devices), workers=pools["cpu"], cost="measured",
                          streams="typed")
    model.pools = lambda workers=None: pools  # the drawn pool sizes, not one per device
    n = model.numbers()
    makespan = max(r.end for r in records)
    assert n["makespan"] == makespan
    assert n["lower"] - 1e-9 <= makespan <= n["upper"] + 1e-9


def pipeline(steps: int = 4) -> TaskGraph:
    """Compute on the gpu, copy each result to the host, then a small cpu step on it."""
    tasks: dict = {}
    for i in range(steps):
        tasks[f"matmul{i}"] = (3.0, [f"matmul{i - 1}"] if i else [], "gpu")
        tasks[f"copy{i}"] = (2.0, [f"matmul{i}"], "copy")
        tasks[f"sum{i}"] = (1.0, [f"copy{i}"], "cpu")
    return TaskGraph.from_dict(tasks)


def test_a_copy_stream_overlaps_computation_and_serialising_costs_the_copies():
    overlap = ScheduleModel(pipeline(4), workers=1, cost="measured", streams="typed")
    serial = ScheduleModel(pipeline(4), workers=1, cost="measured", streams="serialised")
    # copies on their own stream: 4 products back to back, then the last copy and sum
    assert overlap.numbers()["makespan"] == 4 * 3 + 2 + 1
    # on the compute stream every copy waits for a product and holds up the next one
    assert serial.numbers()["makespan"] == 4 * (3 + 2) + 1
    assert overlap.row_names() == ["cpu", "gpu", "copy"]
    assert serial.row_names() == ["cpu", "gpu"]  # no copy stream: copies run on the gpu
    assert all(r.worker == 1 for r in serial.schedule()
               if r.name.startswith(("matmul", "copy")))
    assert "cpu, gpu, copy (typed)" in overlap.summary()
    identical = ScheduleModel(pipeline(4), workers=3, cost="measured")
    assert identical.pools() == 3 and identical.row_names()[0] == "worker 0"


def test_devices_are_offered_only_for_graphs_that_name_them():
    graph = TaskGraph.from_dict({"a": (1, []), "b": (1, ["a"])})
    assert ScheduleModel(graph).stream_options() == ["identical"]
    with pytest.raises(ValueError, match="name no devices"):
        ScheduleModel(graph, streams="typed")
    with pytest.raises(ValueError, match="every task as"):
        TaskGraph.from_dict({"a": (1, [], "gpu"), "b": (1, ["a"])})
    with pytest.raises(ValueError, match="no workers"):
        simulate(["a"], [[]], [1.0], {"cpu": 1}, ["gpu"])
    with pytest.raises(ValueError, match="devices="):
        simulate(["a"], [[]], [1.0], {"cpu": 1})


def test_per_operator_costs_from_a_table_or_from_measured_medians():
    graph = TaskGraph(["dot", "dot", "broadcast_add"], [[], [], [0, 1]],
                      measured=[4.0, 6.0, 1.0])
    measured = ScheduleModel(graph, workers=1, cost="per operator")
    assert measured.durations(graph) == [5.0, 5.0, 1.0]  # the two dots' median, each
    table = ScheduleModel(graph, workers=2, cost="per operator",
                          op_costs={"dot": 8, "broadcast_add": 2})
    assert table.numbers()["span"] == 10.0 and table.numbers()["work"] == 18.0
    with pytest.raises(ValueError, match=r"no cost for \['broadcast_add'\]"):
        ScheduleModel(graph, cost="per operator", op_costs={"dot": 1}).numbers()
    unmeasured = TaskGraph(["dot"], [[]])
    assert ScheduleModel(unmeasured).costs() == ["uniform"]
    with pytest.raises(ValueError, match="offers"):
        ScheduleModel(unmeasured, cost="per operator")


def test_a_symbol_becomes_one_task_per_operator():
    x = mx.sym.var("x")
    left, right = mx.sym.relu(x), mx.sym.sigmoid(x)
    out = mx.sym.broadcast_add(left * 2, right)
    graph = TaskGraph.from_graph(out)
    assert sorted(graph.names) == sorted(["relu", "sigmoid", "_mul_scalar", "broadcast_add"])
    add = graph.names.index("broadcast_add")
    assert sorted(graph.names[d] for d in graph.deps[add]) == ["_mul_scalar", "sigmoid"]
    assert graph.deps[graph.names.index("relu")] == []  # inputs are not tasks
    assert schedule_explorer(out).model.numbers()["span"] == 3.0
    with pytest.raises(TypeError, match="Symbol or a graph IR"):
        TaskGraph.from_graph(42)


@pytest.mark.viz
def test_the_explorer_offers_only_settings_that_change_the_schedule():
    pytest.importorskip("ipywidgets")
    from hybridlab.viz.schedule import schedule_explorer

    steps = {}  # lesson 10's devices: measured durations, no chain of additions
    for i in range(4):
        steps[f"matmul{i}"] = (3.0, [f"matmul{i - 1}"] if i else [], "gpu")
        steps[f"copy{i}"] = (2.0, [f"matmul{i}"], "copy")
        steps[f"post{i}"] = (1.0, [f"copy{i}"], "cpu")
    view = schedule_explorer(steps, workers=1, cost="measured", streams="typed")
    assert view.tree.layout.display == "none"  # no sums to rebalance
    assert view.cost.options == ("uniform", "measured")  # per operator: the same durations
    from hybridlab import engine, nd
    from hybridlab.lab.schedule import TaskGraph

    held = engine.StepEngine()  # lesson 04's sum of eight arrays: a chain of additions
    with engine.engine_scope(held):
        xs = [nd.ones((2,)) * i for i in range(8)]
        total = xs[0]
        for x in xs[1:]:
            total = total + x
        graph = TaskGraph.from_tasks(held.tasks)
        held.run()
    chain = schedule_explorer(graph, workers=2)
    assert chain.tree.layout.display != "none"
    before = chain.png
    chain.tree.value = "tree"
    assert chain.png != before
