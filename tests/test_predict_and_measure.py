"""The predict-then-measure exercises: every check measures, says how far off the guess was
and why, and cannot be fooled -- it fails the "no effect" answer (a ratio of 1, a saving
or a size of 0), and an answer off by a factor of two or more (for an effect under 2x,
judged on the effect itself, the ratio minus 1). Timed checks run here on deterministic
clocks (``tests/_clock.py``), so the verdicts do not depend on the machine."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _clock import CompileClock, HandOverClock, TaskClock, WorkerClock, stepping_clock

from hybridlab import exercises, nd, random
from hybridlab.exercises._common import effect, judge_amount, judge_ratio
from hybridlab.gluon import nn

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _seeded():
    random.seed(0)


def tour_net():
    net = nn.HybridSequential()
    net.add(nn.Dense(128, activation="relu"), nn.Dense(64, activation="relu"), nn.Dense(10))
    net.initialize()
    net(nd.ones((1, 64)))
    return net


# ---- the judges -------------------------------------------------------------------------

def test_a_ratio_of_one_is_never_right():
    for measured in (1.05, 1.89, 5.0, 0.7):
        judgement = judge_ratio(1.0, measured)
        assert not judgement.correct and "no difference at all" in judgement.off


def test_a_small_effect_is_judged_on_the_effect():
    # 1.1 against 1.89 is only 1.7 times off as a ratio, but predicts an eighth of the effect
    assert not judge_ratio(1.1, 1.89).correct
    assert "effect" in judge_ratio(1.1, 1.89).off
    assert judge_ratio(1.5, 1.8).correct  # +50% against +80%
    # exactly a factor of two off in the effect is wrong, either way
    assert not judge_ratio(1.4, 1.2).correct and not judge_ratio(1.1, 1.2).correct
    assert judge_ratio(1.39, 1.2).correct and judge_ratio(1.11, 1.2).correct


def test_a_large_ratio_is_judged_on_itself():
    assert judge_ratio(6.0, 5.0).correct and judge_ratio(2.6, 5.0).correct
    assert not judge_ratio(10.0, 5.0).correct and not judge_ratio(2.5, 5.0).correct
    assert judge_ratio(10.0, 5.0).off == "2.0 times too high"
    assert judge_ratio(5.1, 5.0).off == "spot on"


def test_the_wrong_direction_is_wrong_whatever_its_size():
    judgement = judge_ratio(0.9, 1.3)
    assert not judgement.correct and "in the wrong direction" in judgement.off
    assert judge_ratio(0.6, 0.5).correct  # faster, and by about as much


def test_effects_below_one_are_symmetric_with_those_above():
    assert effect(2.0) == 1.0 and effect(0.5) == -1.0 and effect(1.0) == 0.0


def test_an_amount_of_zero_is_never_right_and_a_factor_two_off_is_wrong():
    assert not judge_amount(0, 4.0).correct and "nothing" in judge_amount(0, 4.0).off
    assert not judge_amount(8.0, 4.0).correct and not judge_amount(2.0, 4.0).correct
    assert judge_amount(7.9, 4.0).correct and judge_amount(2.1, 4.0).correct
    assert judge_amount(4.0, 4.0).off == "spot on"
    assert not judge_amount(1.0, 0.0).correct  # a measurement of nothing judges nothing


# ---- every check, fed the answers that must fail ----------------------------------------

def ratio_answers(measured: float) -> list[float]:
    """No effect, and a factor of two off (a little more: printed figures are rounded)
    either way -- on the effect itself when it is under 2x."""
    if abs(effect(measured)) < 1:
        change = measured - 1
        return [1.0, 1 + 2.1 * change, 1 + change / 2.1]
    return [1.0, measured * 2.1, measured / 2.1]


def amount_answers(measured: float) -> list[float]:
    if isinstance(measured, int):  # a byte count: whole numbers
        return [0, measured * 2, measured // 2]
    return [0.0, measured * 2, measured / 2]


def measured_in(message: str) -> float:
    """The measured figure a check printed ("measured 1.79x", "measured 5.0 (...")."""
    return float(re.search(r"measured ([0-9.]+)", message).group(1))


# name -> (call(answer) -> Feedback, "ratio" or "amount", the measured value or None to read
# it from the check's own message)
def _speedup_guess(answer):
    return exercises.check_speedup_guess(tour_net(), answer, calls=3, rounds=3,
                                         timer=TaskClock())


def _barrier_ratio(answer):
    return exercises.check_barrier_ratio(answer, steps=20, rounds=3,
                                         timer=HandOverClock(tick=1e-5, hand_over=2e-5))


def _two_workers(answer):
    return exercises.check_speedup(answer, timer=WorkerClock(), rounds=3)


def _retrace(answer):
    with pytest.MonkeyPatch.context() as patch:
        return exercises.check_retrace_cost(answer, timer=CompileClock(patch))


def _two_devices(answer):
    return exercises.check_two_device_step(answer, timer=TaskClock(), rounds=3)


def _dispatch(answer):
    from hybridlab.exercises import lesson11

    return lesson11.check_dispatch_ratio(answer, size=64,
                                         timer=stepping_clock([0, 0, 1e-4, 1.9e-3]))


def _tape(answer):
    from hybridlab.exercises import lesson07

    return lesson07.check_tape_bytes(answer)


def _params(answer):
    from hybridlab.exercises import lesson08

    return lesson08.check_params_size(answer)


def _dense_concat(answer):
    pytest.importorskip("onnx")
    from hybridlab.exercises import lesson09

    return lesson09.check_dense_concat_bytes(answer)


def _inception(answer):
    pytest.importorskip("onnx")
    from hybridlab.exercises import lesson09

    return lesson09.check_inception_speedup(answer)


def _allreduce(answer):
    return exercises.check_allreduce_time(answer, "ring", 8, 10e6, 20e-6, 2e-9)


def _allreduce_seconds():
    from hybridlab.lab import allreduce

    return allreduce.AllReduceModel("ring", 8, 10e6, 20e-6, 2e-9).time


def _unrolled_nodes(answer):
    from hybridlab.exercises import lesson12

    return lesson12.check_unrolled_nodes(answer, 50)


def _bptt(answer):
    from hybridlab.exercises import lesson12

    return lesson12.check_bptt_bytes(answer, 32)


def _inception_speedup():
    from hybridlab.exercises import lesson09
    from hybridlab.lab.schedule import ScheduleModel, TaskGraph

    numbers = ScheduleModel(TaskGraph.from_graph(lesson09.imported("inception_v1")[0]),
                            4).numbers()
    return numbers["work"] / numbers["makespan"]


CHECKS = {
    "check_speedup_guess": (_speedup_guess, "ratio", 5.0),  # 5 engine tasks against 1
    "check_held_bytes": (exercises.check_held_bytes, "amount", 3 * 250_000 * 4),
    "check_arena_bytes": (exercises.check_arena_bytes, "amount", 16 * (256 + 128) * 4),
    "check_barrier_ratio": (_barrier_ratio, "ratio", None),
    "check_speedup": (_two_workers, "ratio", 16 * 11e-6 / (16 * 6e-6)),
    "check_liveness_bound": (exercises.check_liveness_bound, "amount", (32 * 256 + 32 * 128) * 4),
    "check_retrace_cost": (_retrace, "ratio", 82.0),  # 2 tasks and a compile against 1 task
    "check_tape_bytes": (_tape, "amount", 33 * 32 * 64 * 4),
    "check_params_size": (_params, "amount", 208),
    "check_dense_concat_bytes": (_dense_concat, "amount", 512 * 28 * 28 * 4),
    "check_inception_speedup": (_inception, "ratio", _inception_speedup),
    "check_allreduce_time": (_allreduce, "amount", _allreduce_seconds),
    "check_two_device_step": (_two_devices, "ratio", None),
    "check_dispatch_ratio": (_dispatch, "ratio", 20.0),
    "check_unrolled_nodes": (_unrolled_nodes, "amount", lambda: _lesson12("unrolled_nodes", 50)),
    "check_bptt_bytes": (_bptt, "amount", lambda: _lesson12("bptt_bytes", 32)),
}


def _lesson12(name, length):
    from hybridlab.exercises import lesson12

    return getattr(lesson12, name)(length)


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_every_check_fails_no_effect_and_a_factor_of_two_and_says_why(name):
    call, kind, measured = CHECKS[name]
    if callable(measured):
        measured = measured()
    if measured is None:  # read from the check itself, which prints what it measured
        measured = measured_in(call(1.0).message)
    answers = ratio_answers(measured) if kind == "ratio" else amount_answers(measured)
    for answer in answers:
        verdict = call(answer)
        assert not verdict, (name, answer, verdict.message)
        assert len(verdict.message) > 60, verdict.message  # a reason, not only a verdict
    assert call(measured), (name, measured)


def test_no_effect_answers_are_called_by_their_name():
    assert "no difference" in _speedup_guess(1.0).message
    assert "no difference" in _two_devices(1.0).message
    assert "nothing" in exercises.check_arena_bytes(0).message


def predict_exercises() -> list[tuple[str, str]]:
    """(lesson, check name) of every "Predict, then measure/check" exercise of the lessons."""
    found = []
    for path in sorted((ROOT / "lessons").glob("[0-9][0-9]-*.md")):
        part = path.read_text(encoding="utf-8").split("## Exercises", 1)[-1]
        for item in re.split(r"\n(?=\d+\. )", part.split("\n```", 1)[0]):
            # (an item may start with its points, "**(2 points)**": they grade assignments)
            if re.match(r"\d+\. (?:\*\*\(\d+ points?\)\*\* )?\*Predict, then (?:measure|check)",
                        item):
                found += [(path.name[:2], n) for n in re.findall(r"(check_\w+)\(", item)]
    return found


def test_every_predict_then_measure_exercise_has_its_check_fooled_above():
    found = predict_exercises()
    assert len(found) >= 12
    missing = [(lesson, name) for lesson, name in found if name not in CHECKS]
    assert not missing, f"predict-then-measure checks not fed the answers above: {missing}"


# ---- what each check says ---------------------------------------------------------------

def test_speedup_guess_is_measured_on_the_injected_clock():
    # imperative: five engine tasks per call (3 FullyConnected + 2 relu); hybridized: one
    verdict = _speedup_guess(5)
    assert verdict and "measured 5.0" in verdict.message and "spot on" in verdict.message
    assert "runs 5 engine operations" in verdict.message


def test_speedup_guess_too_far_fails_and_says_why():
    verdict = _speedup_guess(50)
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


def test_held_bytes_count_every_local_until_the_return():
    assert exercises.check_held_bytes(3_000_000)
    only_the_last = exercises.check_held_bytes(1_000_000)
    assert not only_the_last and "only the array the last statement reads" in \
        only_the_last.message and "not until its last use" in only_the_last.message
    assert "whole number of bytes" in exercises.check_held_bytes(1.5).message


def test_arena_bytes_are_read_from_the_compiled_program():
    assert exercises.check_arena_bytes(16 * (256 + 128) * 4)
    verdict = exercises.check_arena_bytes(16 * (512 + 256 + 128 + 2) * 4)
    assert not verdict and "2.34 times the real size" in verdict.message
    assert "relu writes in place" in verdict.message
    assert "whole number of bytes" in exercises.check_arena_bytes(1.5).message


def test_barrier_ratio_is_measured_on_the_injected_clock():
    # d2l's model on the clock: a task costs 10 µs, a barrier's hand-over 20 µs; 20 steps
    # of two tasks (and three to make the arrays): (43 + 2 * 21) / (43 + 2) units
    verdict = _barrier_ratio(1.9)
    assert verdict and "measured 1.89" in verdict.message and "t1 + t2 + t3" in verdict.message
    wrong = _barrier_ratio(1.0)
    assert not wrong and "no difference" in wrong.message
    assert "positive ratio" in exercises.check_barrier_ratio(0).message


def test_two_workers_prediction_far_from_the_measurement_fails_and_says_why():
    assert _two_workers(1.7)
    too_high = _two_workers(2.5)
    assert not too_high and "at most halve" in too_high.message and "1.83x" in too_high.message
    too_low = _two_workers(1.3)
    assert not too_low and "side by side" in too_low.message and "effect" in too_low.message
    assert not exercises.check_speedup(-1)


def test_two_device_step_is_judged_on_its_effect():
    measured = measured_in(_two_devices(1.0).message)
    assert measured > 1.2  # two devices: copies, a sum, more tasks per step
    verdict = _two_devices(1.1)
    assert not verdict and "interpreter's lock" in verdict.message
