"""Every exercise check can fail: wrong answers get a falsy verdict that explains why."""

from __future__ import annotations

import numpy as np

from hybridlab import exercises, nd, random
from hybridlab.gluon import nn


def test_feedback_prints_and_is_truthy_only_when_correct():
    assert bool(exercises.Feedback(True, "fine")) and str(exercises.Feedback(True, "x")).startswith(
        "Correct")
    assert not exercises.Feedback(False, "why") and "why" in str(exercises.Feedback(False, "why"))


def test_wrong_mlp_sizes_are_explained():
    random.seed(0)
    net = nn.HybridSequential()
    net.add(nn.Dense(32, activation="relu"), nn.Dense(3))
    net.initialize()
    verdict = exercises.check_tour_mlp(net)
    assert not verdict and "units" in verdict.message


def test_not_a_hybrid_sequential_is_explained():
    assert "HybridSequential" in exercises.check_tour_mlp(nn.Sequential()).message


def test_wrong_fc_count():
    net = nn.HybridSequential()
    net.add(nn.Dense(4), nn.Dense(2))
    net.initialize()
    assert "run the network once" in exercises.check_fc_count(net, 2).message
    net(nd.ones((1, 3)))
    assert exercises.check_fc_count(net, 2) and not exercises.check_fc_count(net, 3)


def test_different_outputs_fail():
    a, b = nd.ones((2, 2)), nd.zeros((2, 2))
    assert not exercises.check_same_outputs(a, b)
    assert "shapes differ" in exercises.check_same_outputs(a, nd.ones((3,))).message


def test_symbol_program_mistakes_are_named():
    verdict = exercises.check_symbol_program(lambda a, b, c, d: (a + b) * (c + d))
    assert not verdict and "(a + b)" in verdict.message
    assert not exercises.check_symbol_program(lambda a, b, c, d: 3)
    assert "raised" in exercises.check_symbol_program(lambda a, b, c: a).message


def test_fancy_func_node_count_wrong():
    assert not exercises.check_fancy_func_nodes(8)


def test_dense_with_fully_connected_is_rejected():
    def coarse(F, x, weight, bias):  # noqa: N803
        return F.FullyConnected(x, weight, bias, num_hidden=3)

    def wrong(F, x, weight, bias):  # noqa: N803
        return F.broadcast_add(F.dot(x, weight, transpose_b=False), bias)

    assert "still uses FullyConnected" in exercises.check_dense_from_primitives(coarse).message
    assert not exercises.check_dense_from_primitives(wrong)


def test_broken_block_fails_the_hybridize_check():
    verdict = exercises.check_hybridizable(exercises.BrokenBlock)
    assert not verdict and "F.*" in verdict.message


def test_print_count_wrong():
    assert not exercises.check_print_count(5)


def test_export_roundtrip_without_files(tmp_path):
    verdict = exercises.check_export_roundtrip(str(tmp_path / "nothing"), None, None)
    assert not verdict and "export" in verdict.message


def test_feedback_is_deterministic_numbers():
    x = nd.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert exercises.check_same_outputs(x, x)


def test_sync_point_answers_that_are_wrong_or_unknown():
    verdict = exercises.check_sync_points({"print", "shape"})
    assert not verdict and "missing" in verdict.message and "shape" in verdict.message
    assert "not among" in exercises.check_sync_points({"len"}).message


def test_ready_count_and_span_wrong_answers():
    assert not exercises.check_ready_after_two_steps(1)
    assert not exercises.check_span(2, 5)
    assert exercises.check_span(1, 5)  # one worker: the five tasks one after another
