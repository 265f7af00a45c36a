"""The memory timeline's boxes are the planner's placements: they never overlap."""

from __future__ import annotations

import pytest

from hybridlab import nd, sym
from hybridlab.gluon import nn
from hybridlab.lab.memory import live_bytes, timeline
from hybridlab.viz.memory import memory_explorer, memory_timeline


def mlp(batch):
    net = nn.HybridSequential()
    net.add(nn.Dense(64, activation="relu"), nn.Dense(32, activation="relu"), nn.Dense(10))
    net.initialize()
    net.hybridize()
    net(nd.ones((batch, 48)))
    return net


def lenet():
    net = nn.HybridSequential()
    net.add(nn.Conv2D(6, 5, activation="relu"), nn.MaxPool2D(2), nn.Conv2D(16, 5,
            activation="relu"), nn.MaxPool2D(2), nn.Flatten(), nn.Dense(84, activation="relu"),
            nn.Dense(10))
    net.initialize()
    net.hybridize()
    net(nd.ones((4, 1, 28, 28)))
    return net


@pytest.mark.parametrize("backward", [False, True])
@pytest.mark.parametrize("make", [lambda: mlp(1), lambda: mlp(64), lenet])
def test_boxes_never_overlap_and_stay_inside_the_planned_buffers(make, backward):
    boxes, plan = timeline(make(), backward=backward)
    assert boxes
    for i, a in enumerate(boxes):
        assert 0 <= a.low < a.high <= sum(plan.buffer_bytes)
        for b in boxes[i + 1:]:
            same_time = a.first < b.last and b.first < a.last  # a shared end step is the
            same_bytes = a.low < b.high and b.low < a.high     # hand-over of an in-place op
            assert not (same_time and same_bytes), (a, b)
            if same_bytes and (a.last == b.first or b.last == a.first):  # touching in time:
                later = b if a.last == b.first else a  # only an in-place op may take over
                assert later.inplace, (a, b)
    arena = [box for box in boxes if box.high <= plan.buffer_bytes[0]]
    assert max(box.high for box in arena) == plan.buffer_bytes[0]  # the arena is all used
    assert plan.bound <= plan.planned


def test_in_place_results_continue_their_inputs_box():
    boxes, plan = timeline(mlp(64))
    assert plan.inplace == sum(box.inplace for box in boxes) > 0
    for box in (b for b in boxes if b.inplace):
        before = [b for b in boxes if b.last == box.first and (b.low, b.high) == (box.low,
                                                                                 box.high)]
        assert before, box


def test_a_symbol_needs_its_shapes():
    program = sym.relu(sym.var("x")) * 2.0
    with pytest.raises(ValueError, match="give the input shapes"):
        timeline(program)
    boxes, plan = timeline(program, shape={"x": (8, 8)})
    assert plan.unplanned > 0


@pytest.mark.viz
def test_the_figure_marks_the_arena_and_the_bound():
    import matplotlib

    matplotlib.use("Agg")
    figure, text = memory_timeline(mlp(64))
    labels = figure.axes[0].get_legend_handles_labels()[1]
    assert any(label.startswith("end of the shared arena:") for label in labels)
    assert any(label.startswith("liveness bound:") for label in labels)
    assert text.startswith("memory plan:")


@pytest.mark.parametrize("make", [lambda: mlp(64), lenet])
def test_the_bytes_in_use_peak_at_the_planners_liveness_bound(make):
    net = make()
    for backward in (False, True):
        boxes, plan = timeline(net, backward=backward)
        peak = max(live_bytes(boxes, step) for step in range(max(b.last for b in boxes) + 1))
        assert peak <= plan.bound  # the bound also counts kernel scratch (convolutions)
        if plan.workspace == 0:
            assert peak == plan.bound


def test_the_backward_keeps_activations_alive_and_marks_its_own_results():
    net = mlp(64)
    forward, forward_plan = timeline(net)
    joint, joint_plan = timeline(net, backward=True)
    assert not any(box.backward for box in forward)
    mine = [box for box in joint if box.backward]
    assert mine and all(box.name.startswith("d_") for box in mine)
    start = min(box.first for box in mine)
    # an activation of the forward is still alive when the backward starts
    assert any(not box.backward and box.last >= start for box in joint)
    assert joint_plan.bound > forward_plan.bound
    with pytest.raises(ValueError, match="give the input shapes"):
        timeline(sym.relu(sym.var("x")), backward=True)


@pytest.mark.viz
def test_the_memory_explorer_follows_its_controls():
    net = mlp(64)
    explorer = memory_explorer(net)
    boxes, _ = timeline(net)
    assert explorer.step.max == max(box.last for box in boxes)
    first = min(box.first for box in boxes)
    explorer.step.value = first
    made = [box.name for box in boxes if box.first == first]
    assert f"step {first} computes {', '.join(made)}" in explorer.summary()
    before = explorer.png
    explorer.mode.value = "forward + backward"
    assert explorer.summary().startswith("forward + backward: step")
    assert explorer.step.max > max(box.last for box in boxes)
    assert explorer.png != before and explorer.png.startswith(b"\x89PNG")
    bundle = explorer._repr_mimebundle_()
    assert "image/png" in bundle and bundle["text/plain"] == explorer.summary()


@pytest.mark.parametrize("backward", [False, True])
@pytest.mark.parametrize("make", [lambda: mlp(64), lenet])
def test_the_profile_is_the_live_bytes_of_every_step(make, backward):
    from hybridlab.lab.memory import live_profile

    boxes, plan = timeline(make(), backward=backward)
    profile = live_profile(boxes)
    assert profile == [live_bytes(boxes, step) for step in range(len(profile))]
    assert len(profile) == max(box.last for box in boxes) + 1
    assert max(profile) <= plan.bound


def test_a_result_written_in_place_counts_once_at_the_hand_over():
    from hybridlab.lab.memory import Box, live_profile

    boxes = [Box("a", "opaque", 0, 2, 0, 64, False), Box("b", "elementwise", 2, 4, 0, 64, True),
             Box("c", "opaque", 1, 3, 64, 96, False)]
    assert live_profile(boxes) == [live_bytes(boxes, step) for step in range(5)]
    assert live_profile(boxes) == [64, 96, 96, 96, 64]


@pytest.mark.slow
def test_a_real_network_is_drawn_as_its_profile_of_live_bytes():
    pytest.importorskip("onnx")
    from hybridlab.exercises import lesson09
    from hybridlab.viz.memory import MANY_BOXES

    explorer = memory_explorer(lesson09.imported("densenet121")[0],
                               shape=lesson09.shapes("densenet121"))
    boxes, _ = explorer.plans["forward"]
    assert len(boxes) > MANY_BOXES
    figure = explorer._drawn["forward"][0]
    assert figure.axes[0].get_ylabel().startswith("bytes alive")
    explorer.step.value = 700
    assert explorer.snapshot_png()


def test_the_explorer_offers_only_the_programs_asked_for():
    explorer = memory_explorer(mlp(4), modes=["forward"])
    assert explorer.MODES == ("forward",) and list(explorer.plans) == ["forward"]
    assert explorer.mode.options == ("forward",)
    with pytest.raises(ValueError, match="including the program shown first"):
        memory_explorer(mlp(4), backward=True, modes=["forward"])
    with pytest.raises(ValueError, match="give some of"):
        memory_explorer(mlp(4), modes=["sideways"])


def test_lifetimes_follow_each_local_array_until_the_interpreter_frees_it():
    import numpy as np

    from hybridlab.lab.memory import lifetimes

    def chain(x):
        h1 = np.tanh(x)
        h2 = np.tanh(h1)
        return np.tanh(h2)

    def rebinding(x):
        h = np.tanh(x)
        h = None  # the array is freed here, not at the return
        return h

    steps, lives = lifetimes(chain, np.ones(8, np.float32))
    assert steps == ["h1 = np.tanh(x)", "h2 = np.tanh(h1)", "return np.tanh(h2)", "(returned)"]
    assert [(life.name, life.born, life.last_read, life.freed, life.nbytes) for life in lives] \
        == [("h1", 0, 1, 3, 32), ("h2", 1, 2, 3, 32)]  # x is the caller's: not followed
    _, (dropped,) = lifetimes(rebinding, np.ones(8, np.float32))
    assert (dropped.born, dropped.freed) == (0, 1)


@pytest.mark.viz
def test_a_memory_explorer_of_one_program_shows_no_program_toggle():
    pytest.importorskip("ipywidgets")
    from hybridlab import nd
    from hybridlab.gluon import nn
    from hybridlab.viz.memory import memory_explorer

    net = nn.HybridSequential()
    net.add(nn.Dense(16, activation="relu"), nn.Dense(4))
    net.initialize()
    net.hybridize()
    net(nd.ones((8, 12)))
    assert memory_explorer(net, modes=("forward",)).mode.layout.display == "none"
    assert memory_explorer(net).mode.layout.display != "none"
