"""The predict-then-measure exercises of lessons 00-03: each check measures, says how far
off the guess was, and fails a guess that is too far. Timed checks run here on
:class:`TaskClock`, a deterministic clock, so the verdicts do not depend on the machine."""

from __future__ import annotations

import pytest
from _clock import TaskClock

from hybridlab import exercises, nd, random
from hybridlab.exercises._common import how_far_off
from hybridlab.gluon import nn


@pytest.fixture(autouse=True)
def _seeded():
    random.seed(0)


def tour_net():
    net = nn.HybridSequential()
    net.add(nn.Dense(128, activation="relu"), nn.Dense(64, activation="relu"), nn.Dense(10))
    net.initialize()
    net(nd.ones((1, 64)))
    return net


def test_how_far_off_is_symmetric_and_accepts_a_factor_of_two():
    assert how_far_off(4.0, 2.0) == (True, "2.0 times too high")
    assert how_far_off(1.0, 2.0) == (True, "2.0 times too low")
    assert how_far_off(2.0, 2.02) == (True, "spot on")
    assert how_far_off(10.0, 2.0)[0] is False


def test_speedup_guess_is_measured_on_the_injected_clock():
    # imperative: five engine tasks per call (3 FullyConnected + 2 relu); hybridized: one
    verdict = exercises.check_speedup_guess(tour_net(), 5, calls=3, rounds=3, timer=TaskClock())
    assert verdict and "measured 5.0" in verdict.message and "spot on" in verdict.message
    assert "runs 5 engine operations" in verdict.message


def test_speedup_guess_too_far_fails_and_says_why():
    verdict = exercises.check_speedup_guess(tour_net(), 50, calls=3, rounds=3, timer=TaskClock())
    assert not verdict and "10.0 times too high" in verdict.message
    assert "each paying the framework's Python" in verdict.message


def test_speedup_guess_rejects_nonsense():
    assert "positive number" in exercises.check_speedup_guess(tour_net(), -1).message
    assert "HybridSequential" in exercises.check_speedup_guess(None, 2).message


def test_tour_mlp_without_relu_is_rejected():
    net = nn.HybridSequential()
    net.add(nn.Dense(32), nn.Dense(16), nn.Dense(3))
    net.initialize()
    verdict = exercises.check_tour_mlp(net)
    assert not verdict and "ReLU" in verdict.message and "[]" in verdict.message
    tanh = nn.HybridSequential()
    tanh.add(nn.Dense(32, activation="tanh"), nn.Dense(16, activation="relu"), nn.Dense(3))
    tanh.initialize()
    assert "['tanh', 'relu']" in exercises.check_tour_mlp(tanh).message


def test_operator_cost_is_measured_per_extra_task():
    # coarse: 6 engine tasks per call, fine: 9 -- three extra, one tick (10 µs) each
    verdict = exercises.check_operator_cost(10, calls=3, rounds=3, timer=TaskClock())
    assert verdict and "measured 10.0 µs per extra operator" in verdict.message
    assert "3 extra engine tasks" in verdict.message


def test_operator_cost_too_far_fails_and_says_why():
    verdict = exercises.check_operator_cost(100, calls=3, rounds=3, timer=TaskClock())
    assert not verdict and "10.0 times too high" in verdict.message
    assert "extra engine task" in verdict.message
    assert "positive number" in exercises.check_operator_cost(0).message


def test_arena_bytes_are_read_from_the_compiled_program():
    assert exercises.check_arena_bytes(16 * (256 + 128) * 4)
    verdict = exercises.check_arena_bytes(16 * (512 + 256 + 128 + 2) * 4)
    assert not verdict and "2.34 times the real size" in verdict.message
    assert "relu writes in place" in verdict.message
    assert "whole number of bytes" in exercises.check_arena_bytes(1.5).message


def test_barrier_ratio_is_measured_on_the_injected_clock():
    # both loops run the same engine tasks: on a clock that counts tasks the ratio is 1
    verdict = exercises.check_barrier_ratio(1, steps=5, rounds=3, timer=TaskClock())
    assert verdict and "measured 1.00" in verdict.message and "t1 + t2 + t3" in verdict.message
    wrong = exercises.check_barrier_ratio(3, steps=5, rounds=3, timer=TaskClock())
    assert not wrong and "3.0 times too high" in wrong.message
    assert "positive ratio" in exercises.check_barrier_ratio(0).message
