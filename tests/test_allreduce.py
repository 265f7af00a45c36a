"""The all-reduce models (hybridlab/lab/allreduce.py): each task graph, scheduled with one
stream per port, takes exactly its closed form's time."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridlab.lab import allreduce
from hybridlab.lab.allreduce import AllReduceModel, predicted_time


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(allreduce.KINDS), n=st.integers(2, 16),
       size=st.floats(0, 1e8), alpha=st.floats(0, 1e-3), beta=st.floats(0, 1e-8))
def test_the_simulated_schedule_takes_the_closed_forms_time(kind, n, size, alpha, beta):
    model = AllReduceModel(kind, n, size, alpha, beta)
    assert model.time == pytest.approx(predicted_time(kind, n, size, alpha, beta), rel=1e-9,
                                       abs=1e-15)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 13])
def test_the_closed_forms(n):
    a, b, s = 1e-5, 1e-9, 1e6
    assert predicted_time("server", n, s, a, b) == pytest.approx(2 * n * (a + b * s))
    assert predicted_time("ring", n, s, a, b) == pytest.approx(2 * (n - 1) * (a + b * s / n))
    assert predicted_time("tree", n, s, a, b) == pytest.approx(
        2 * math.ceil(math.log2(n)) * (a + b * s))


@pytest.mark.parametrize("n", [2, 4, 7, 16])
def test_every_device_ends_with_the_sum(n):
    """The graphs are all-reduces: follow the data, each device's final value depends on
    every device's gradient (the ring: on every chunk)."""
    for kind in allreduce.KINDS:
        graph = allreduce.task_graph(kind, n, 1.0, 0.0, 1.0)
        holds = [set() for _ in graph.names]  # the devices' gradients a message carries
        final = {i: set() for i in range(n)}
        for t, name in enumerate(graph.names):
            src, dst = name.split()[1].split(">")
            own = {int(src)} if src != "S" else set()
            holds[t] = own.union(*(holds[d] for d in graph.deps[t]))
            if dst != "S":
                final[int(dst)] |= holds[t] | {int(dst)}
        if kind == "ring":  # a device's chunks arrive over the last n-1 messages it receives
            assert all(len(final[i]) == n for i in range(n))
        else:
            assert all(final[i] == set(range(n)) for i in range(n))


def test_the_ring_sends_less_per_device_and_the_server_is_the_bottleneck():
    size = 1e6
    for n in (2, 4, 16):
        assert allreduce.bytes_per_device("ring", n, size) == pytest.approx(2 * (n - 1) / n * size)
        assert allreduce.bytes_per_device("ring", n, size) < 2 * size
        assert allreduce.bytes_per_device("server", n, size) == n * size
    large = AllReduceModel("ring", 8, 1e8, 1e-5, 1e-9)
    assert large.best() == "ring" and "bandwidth-bound" in large.summary()
    small = AllReduceModel("ring", 8, 1e2, 1e-5, 1e-9)
    assert small.best() == "tree" and "latency-bound" in small.summary()


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="n >= 2"):
        predicted_time("ring", 1, 1.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="choose one of"):
        AllReduceModel("star").graph()
    with pytest.raises(ValueError, match=">= 0"):
        predicted_time("tree", 2, -1.0, 0.0, 0.0)


def test_the_explorer_redraws_for_each_control():
    pytest.importorskip("ipywidgets")
    from hybridlab.viz.allreduce import allreduce_explorer

    explorer = allreduce_explorer("ring", 4, size=1e6)
    first = explorer.snapshot_png()
    assert first.startswith(b"\x89PNG") and explorer.summary().startswith("ring all-reduce")
    explorer.devices.value = 8
    assert "over 8 devices" in explorer.summary() and explorer.snapshot_png() != first
    explorer.kind.value = "server"
    assert explorer.model.time == pytest.approx(predicted_time("server", 8, 1e6, 50e-6, 1e-9))
    with pytest.raises(ValueError, match="n >= 2"):
        allreduce_explorer("tree", 1)
