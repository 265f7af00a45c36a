"""The weights' layout chosen by measurement (graph/autotune.py, NOTE [Layout by
measurement] in cached_op.py): deterministic here, with a fake timer."""

from __future__ import annotations

import re

import numpy as np
import pytest

import hybridlab as mx
from hybridlab import autograd, config, engine, nd
from hybridlab.gluon import nn
from hybridlab.graph.autotune import AS_STORED, MARGIN, PRETRANSPOSED, LayoutChoice, Tuner
from hybridlab.lab.passes import PassModel


class FakeTimer:
    """Seconds per call by candidate name; it runs each candidate, and counts the calls."""

    def __init__(self, seconds: dict[str, float]) -> None:
        self.seconds, self.calls = seconds, []

    def __call__(self, name, run, arrays, calls):
        self.calls.append(name)
        run(arrays)
        return self.seconds[name]


def renumbered(source: str) -> str:
    """The source with its layers' names numbered from 0 (each net gets new names)."""
    order: dict[str, str] = {}
    return re.sub(r"dense\d+", lambda m: order.setdefault(m[0], f"dense{len(order)}"),
                  source)


def mlp(autotune=None, seconds=None, **flags):
    mx.random.seed(0)
    net = nn.HybridSequential()
    net.add(nn.Dense(16, activation="relu"), nn.Dense(3))
    net.initialize()
    x = nd.random.normal(shape=(5, 8))
    expected = net(x).asnumpy()
    net.hybridize(autotune=autotune, **flags)
    timer = FakeTimer(seconds or {AS_STORED: 2e-6, PRETRANSPOSED: 1e-6})
    net._cached_op.tuner = Tuner(measure=timer)
    return net, x, expected, timer


@pytest.mark.parametrize("faster", [PRETRANSPOSED, AS_STORED])
def test_the_faster_program_is_kept_and_computes_the_same(faster):
    slower = AS_STORED if faster == PRETRANSPOSED else PRETRANSPOSED
    net, x, expected, timer = mlp(True, {faster: 1e-6, slower: 3e-6})
    for _ in range(3):
        np.testing.assert_allclose(net(x).asnumpy(), expected, rtol=1e-5, atol=1e-6)
    op = net._cached_op
    assert op.layout == LayoutChoice(faster, {AS_STORED: timer.seconds[AS_STORED],
                                              PRETRANSPOSED: timer.seconds[PRETRANSPOSED]})
    assert ("__T" in op.code) == (faster == PRETRANSPOSED)
    assert op._last.plain is op._last.forward.function  # later calls take the plain call
    assert op._last.tuning is None and op.stats == {"hits": 2, "misses": 1}
    # interleaved, both first in turn, bounded by the rounds
    assert timer.calls[:4] == [AS_STORED, PRETRANSPOSED, PRETRANSPOSED, AS_STORED]
    assert len(timer.calls) == 2 * Tuner().rounds


def test_the_choice_is_kept_per_signature():
    with config.Context(AUTOTUNE=1):  # the default outside the test suite
        kept_per_signature()


def kept_per_signature():
    net, x, _, timer = mlp()
    net(x).wait_to_read()
    measured = len(timer.calls)
    net(x).wait_to_read()
    assert len(timer.calls) == measured  # same signature: not measured again
    timer.seconds = {AS_STORED: 1e-6, PRETRANSPOSED: 5e-6}  # now as stored is faster
    net(nd.ones((2, 8))).wait_to_read()  # a new signature: measured, its own choice
    assert len(timer.calls) == 2 * measured
    chosen = {avals[0].shape: choice.chosen for avals, choice in net._cached_op.layouts()}
    assert chosen == {(5, 8): PRETRANSPOSED, (2, 8): AS_STORED}
    net(x).wait_to_read()
    assert net._cached_op.layout.chosen == PRETRANSPOSED and len(timer.calls) == 2 * measured
    report = str(net.hybridization_report())
    assert "[layout] float32[5,8]: weights pre-transposed (measured here: 1.0 us a call, " \
           "2.0 us as stored)" in report
    assert "[layout] float32[2,8]: weights as stored" in report


def test_a_layout_must_be_clearly_faster():
    nearly = {AS_STORED: 1e-6, PRETRANSPOSED: 1e-6 * (MARGIN + 0.01)}
    net, x, _, _ = mlp(True, nearly)
    net(x).wait_to_read()
    assert net._cached_op.layout.chosen == AS_STORED


def test_the_budget_bounds_the_rounds():
    timer = FakeTimer({AS_STORED: 0.1, PRETRANSPOSED: 0.05})  # one round exceeds the budget
    choice = Tuner(measure=timer).choose({AS_STORED: lambda a: None,
                                          PRETRANSPOSED: lambda a: None}, [])
    assert timer.calls == [AS_STORED, PRETRANSPOSED] and choice.chosen == PRETRANSPOSED


@pytest.mark.parametrize("how", ["flag", "hybridize"])
def test_disabled_the_program_is_the_pipelines_as_before(how):
    reference, x, expected, _ = mlp(False)
    reference(x).wait_to_read()
    if how == "flag":
        with config.Context(AUTOTUNE=0):
            net, _, _, timer = mlp()
            result = net(x)
    else:
        net, _, _, timer = mlp(False)
        result = net(x)
    np.testing.assert_allclose(result.asnumpy(), expected, rtol=1e-5, atol=1e-6)
    entry = net._cached_op._last
    assert timer.calls == [] and entry.tuning is None and entry.layout is None
    assert entry.layouts is None and entry.plain is entry.forward.function
    code, before = renumbered(net._cached_op.code), renumbered(reference._cached_op.code)
    assert code == before and "__T" not in code
    assert "[layout]" not in str(net.hybridization_report())


def test_training_and_explicit_layout_passes_are_not_measured():
    net, x, _, timer = mlp(True)
    with autograd.record():
        net(x).backward()
    assert timer.calls == [] and net._cached_op.layout is None
    from hybridlab.graph.passes.pretranspose_weights import pretranspose_weights
    net, x, _, timer = mlp(True, passes=[pretranspose_weights])
    net(x).wait_to_read()
    assert timer.calls == [] and "__T" in net._cached_op.code


def test_calls_pushed_before_the_choice_all_run_it_once():
    with engine.engine_scope("ThreadedEngine"):
        net, x, expected, timer = mlp(True)
        results = [net(x) for _ in range(6)]
        for result in results:
            np.testing.assert_allclose(result.asnumpy(), expected, rtol=1e-5, atol=1e-6)
    assert len(timer.calls) == 2 * Tuner().rounds
    assert net._cached_op.layout.chosen == PRETRANSPOSED


def test_the_pass_explorer_shows_the_layout_chosen():
    net, x, _, _ = mlp(True)
    net(x).wait_to_read()
    model = PassModel(net)
    assert "pretranspose_weights" in [stage.name for stage in model.stages]
    assert "layout chosen on the first call: weights pre-transposed" in model.summary(
        len(model.stages) - 1)
    assert "__T" in model.source


def test_the_flag_reads_its_environment_variable(monkeypatch):
    monkeypatch.setenv("HYBRIDLAB_AUTOTUNE", "maybe")
    assert isinstance(config._int_from_env("HYBRIDLAB_AUTOTUNE", 1, 0, 1, ""), config.Invalid)
    with pytest.raises(TypeError, match="autotune must be True or False"):
        nn.Dense(2).hybridize(autotune="no")
