"""Tests of the dependency engine: ordering, determinism, errors, selection, traces.

Interleavings are forced with ``threading.Event`` / ``Barrier`` (with timeouts), never
with sleeps; every wait that could hang runs through :func:`within` so a deadlock
fails the test instead of freezing the suite.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
from typing import Any, Callable

import _sync
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hybridlab import config, engine
from hybridlab.engine import Dep, NaiveEngine, StepEngine, ThreadedEngine, Var
from hybridlab.errors import MXNetError, UnknownEngineError

TIMEOUT = 20.0
pytestmark = pytest.mark.timeout(120)  # pytest-timeout: a deadlocked wait fails fast


def within(fn: Callable[[], Any], timeout: float = TIMEOUT) -> Any:
    return _sync.within(fn, timeout)


@pytest.fixture(scope="module")
def engines():
    """One engine of each kind, shared by the tests of this module and closed at the end."""
    made = {"naive": NaiveEngine(), "threaded1": ThreadedEngine(1),
            "threaded2": ThreadedEngine(2), "threaded4": ThreadedEngine(4),
            "step": StepEngine()}
    yield made
    for eng in made.values():
        within(eng.close)


# ----------------------------------------------------------------------------- ordering


def gated(log, label, gate=None):
    """An op that waits for ``gate`` (if any), then logs ``label``."""
    def fn():
        if gate is not None:
            assert gate.wait(TIMEOUT), "gate never opened"
        log.append(label)
    return fn


@pytest.mark.parametrize("first, second, kind", [
    ("write", "read", "RAW"),    # read-after-write
    ("read", "write", "WAR"),    # write-after-read
    ("write", "write", "WAW"),   # write-after-write
    ("write", "inplace", "WAW"),  # an in-place update is a write of what it reads
    ("read", "inplace", "WAR"),
])
def test_conflicting_ops_run_in_push_order(engines, first, second, kind):
    eng, var, log, gate = engines["threaded2"], Var("v"), [], threading.Event()
    eng.set_tracing(True)  # an observed engine records each task's dependencies
    args = {"read": ([var], []), "write": ([], [var]), "inplace": ([var], [var])}
    task1 = eng.push(gated(log, first, gate), *args[first], name=first)
    task2 = eng.push(gated(log, second), *args[second], name=second)
    assert task2.state == "waiting" and task2.deps == (Dep(task1.seq, "v", kind),)
    gate.set()
    within(eng.wait_all)
    assert log == [first, second]
    assert task1.state == task2.state == "done"


def test_reads_of_one_var_overlap(engines):
    """Two readers meet at a barrier: this only passes if they run at the same time."""
    eng, var, barrier = engines["threaded2"], Var("v"), threading.Barrier(2, timeout=TIMEOUT)
    tasks = [eng.push(barrier.wait, [var], [], name=f"read{i}") for i in range(2)]
    within(eng.wait_all)
    assert all(t.deps == () and t.state == "done" for t in tasks)


def test_independent_writers_run_in_parallel(engines):
    eng, barrier = engines["threaded4"], threading.Barrier(4, timeout=TIMEOUT)
    for i in range(4):
        eng.push(barrier.wait, [], [Var()], name=f"write{i}")
    within(eng.wait_all)


def test_writer_waits_for_all_earlier_readers(engines):
    eng, var, log, gate = engines["threaded4"], Var("v"), [], threading.Event()
    eng.set_tracing(True)
    readers = [eng.push(gated(log, "read", gate), [var], [], name="read") for _ in range(3)]
    writer = eng.push(gated(log, "write"), [], [var], name="write")
    assert sorted(writer.deps) == sorted(Dep(t.seq, "v", "WAR") for t in readers)
    gate.set()
    within(eng.wait_all)
    assert log == ["read"] * 3 + ["write"]


def test_wait_for_var_waits_only_for_its_writers(engines):
    eng, gate = engines["threaded2"], threading.Event()
    slow, fast, out = Var("slow"), Var("fast"), []
    eng.push(gated(out, "slow", gate), [], [slow], name="slow")
    eng.push(gated(out, "fast"), [], [fast], name="fast")
    within(lambda: eng.wait_for_var(fast))
    assert out == ["fast"]
    gate.set()
    within(lambda: eng.wait_for_var(slow))
    assert out == ["fast", "slow"]


def test_a_waiting_caller_runs_a_ready_op_itself():
    """The only worker is blocked, yet waiting for an independent ready op returns:
    the caller ran it (as worker -1) instead of sleeping until a worker is free."""
    eng, gate, var, log = ThreadedEngine(1), threading.Event(), Var("v"), []
    eng.set_tracing(True)
    eng.push(gated(log, "blocked", gate), [], [Var()], name="blocker")
    eng.push(lambda: log.append("ran"), [], [var], name="quick")
    within(lambda: eng.wait_for_var(var))
    assert log == ["ran"]
    gate.set()
    within(eng.wait_all)
    within(eng.close)
    assert {(r.name, r.worker) for r in eng.trace} == {("quick", -1), ("blocker", 0)}


# ------------------------------------------------------- determinism: a property test

N_BUFFERS, SIZE = 4, 2048

op_strategy = st.one_of(
    st.tuples(st.just("assign"), st.integers(0, N_BUFFERS - 1), st.integers(0, N_BUFFERS - 1),
              st.integers(0, N_BUFFERS - 1)),
    st.tuples(st.just("inplace"), st.integers(0, N_BUFFERS - 1),
              st.integers(0, N_BUFFERS - 1), st.integers(0, N_BUFFERS - 1)),
    st.tuples(st.just("wait"), st.integers(0, N_BUFFERS - 1), st.just(0), st.just(0)),
)


def make_op(bufs, vars_, kind, target, left, right):
    """A real numpy op on the shared buffer list; ``inplace`` mutates ``bufs[target]``."""
    if kind == "assign":  # rebinds: readers of the old array must have finished (WAR)
        def fn():
            bufs[target] = np.sin(bufs[left]) * 0.5 + bufs[right] * 0.25
        return fn, [vars_[left], vars_[right]], [vars_[target]]

    def fn():  # writes into the existing array, reading it too
        np.multiply(bufs[target], 0.75, out=bufs[target])
        bufs[target] += np.cos(bufs[left]) - bufs[right] * 0.125
    return fn, [vars_[target], vars_[left], vars_[right]], [vars_[target]]


def run_program(eng, program):
    """Run ``program`` on ``eng``; return the final buffers as bytes."""
    vars_ = [Var(f"buf{i}") for i in range(N_BUFFERS)]
    rng = np.random.default_rng(0)
    bufs = [rng.standard_normal(SIZE) for _ in range(N_BUFFERS)]
    for number, (kind, target, left, right) in enumerate(program):
        if kind == "wait":
            within(lambda var=vars_[target]: eng.wait_for_var(var))
            continue
        fn, reads, writes = make_op(bufs, vars_, kind, target, left, right)
        eng.push(fn, reads, writes, name=f"op{number}")
    within(eng.wait_all)
    return [b.tobytes() for b in bufs]


def long_program(length=200, seed=0):
    """A fixed 200-op program (hypothesis mostly draws short lists), mixing all op kinds."""
    rng = random.Random(seed)
    return [(rng.choice(["assign", "inplace", "assign", "inplace", "wait"]),
             *(rng.randrange(N_BUFFERS) for _ in range(3))) for _ in range(length)]


@settings(max_examples=25, deadline=None)
@given(st.lists(op_strategy, min_size=1, max_size=200))
@example(program=long_program())
def test_every_engine_gives_bit_identical_results(engines, program):
    expected = run_program(engines["naive"], program)
    for name in ("threaded1", "threaded2", "threaded4", "step"):
        assert run_program(engines[name], program) == expected, name
    engines["step"].clear()


# ---------------------------------------------------------------- errors: the rule


def failing(message):
    def fn():
        raise ValueError(message)
    return fn


def test_naive_engine_raises_at_the_push_naming_op_and_line():
    eng = NaiveEngine()
    line = sys._getframe().f_lineno + 3
    expected = rf"(?s)'divide' failed .*boom.*test_engine.py:{line}"
    with pytest.raises(MXNetError, match=expected) as info:
        eng.push(failing("boom"), [], [Var()], name="divide")
    assert isinstance(info.value.__cause__, ValueError)
    eng.push(lambda: None, [], [Var()])  # still usable


@pytest.mark.parametrize("name", ["threaded2", "step"])
def test_failure_is_raised_once_at_the_dependent_sync_point(engines, name):
    eng = engines[name]
    bad, good, after = Var("bad"), Var("good"), Var("after")
    line = sys._getframe().f_lineno + 1
    eng.push(failing("boom"), [], [bad], name="explode")
    eng.push(lambda: None, [], [good], name="fine")
    skipped = eng.push(lambda: None, [bad], [after], name="use")
    within(lambda: eng.wait_for_var(good))  # unrelated: no error
    expected = rf"(?s)'explode' failed.*:{line}\n.*'use'.*skipped"
    with pytest.raises(MXNetError, match=expected) as info:
        within(lambda: eng.wait_for_var(after))
    assert str(info.value.__cause__) == "boom"
    assert skipped.state == "skipped"
    within(lambda: eng.wait_for_var(after))  # raised once only
    within(lambda: eng.wait_for_var(bad))
    within(eng.wait_all)


def test_wait_all_raises_the_earliest_failure_and_reports_the_others_with_it(engines):
    eng = engines["threaded4"]
    for number in range(3):
        eng.push(failing(f"boom{number}"), [], [Var()], name=f"bad{number}")
    with pytest.raises(MXNetError, match="'bad0' failed") as info:
        within(eng.wait_all)
    assert "also failed (reported here too): 'bad1'" in str(info.value)
    assert "'bad2' with ValueError: boom2" in str(info.value)
    within(eng.wait_all)  # MXNet: a waitall following a waitall raises nothing


def test_a_reported_failure_no_longer_poisons_later_ops(engines):
    eng, var, out = engines["threaded2"], Var("v"), []
    eng.push(failing("boom"), [], [var], name="explode")
    with pytest.raises(MXNetError):
        within(lambda: eng.wait_for_var(var))
    eng.push(lambda: out.append("overwrite"), [var], [var], name="heal")
    within(lambda: eng.wait_for_var(var))
    assert out == ["overwrite"]


def test_waiting_for_a_failed_reader_does_not_poison_the_writer(engines):
    eng, source, var, out = engines["step"], Var("src"), Var("v"), []
    eng.push(failing("boom"), [], [source], name="explode")
    eng.push(lambda: None, [source, var], [Var()], name="reader")  # skipped
    eng.push(lambda: out.append("write"), [], [var], name="writer")  # only WAR on reader
    within(lambda: eng.wait_for_var(var))
    assert out == ["write"]
    with pytest.raises(MXNetError, match="'explode'"):
        within(eng.wait_all)


fault_op = st.tuples(st.sampled_from(["op", "op", "op", "fail", "wait"]),
                     st.integers(0, N_BUFFERS - 1), st.integers(0, N_BUFFERS - 1))


def expected_outcome(program, report_at_push=False):
    """The rule, simulated in push order: which sync raises which failure.

    ``report_at_push``: NaiveEngine raises every failure at its push, so no later op is
    ever skipped and no wait raises.
    """
    poison, reported, failed, raises = [None] * N_BUFFERS, {}, [], []
    for number, (kind, target, source) in enumerate(program):
        if kind == "wait":
            root = poison[target]
            raises.append(root if root is not None and root not in reported else None)
            if raises[-1] is not None:
                reported[root] = number
            continue
        roots = [r for r in (poison[target], poison[source])
                 if r is not None and r not in reported]
        if roots:
            poison[target] = min(roots)
        elif kind == "fail":
            poison[target] = number
            failed.append(number)
            if report_at_push:
                reported[number] = number
        else:
            poison[target] = None
    return raises, [f for f in failed if f not in reported]


def _failed_op(exc):
    return int(str(exc).split("'op")[1].split("'")[0])


def run_faulty(eng, program):
    """Push the program; return what each push and wait raised, the wait_all failures and
    the buffers."""
    vars_ = [Var(f"buf{i}") for i in range(N_BUFFERS)]
    bufs = [np.full(8, float(i)) for i in range(N_BUFFERS)]
    raised, at_end, at_push = [], [], []
    for number, (kind, target, source) in enumerate(program):
        if kind == "wait":
            try:
                within(lambda var=vars_[target]: eng.wait_for_var(var))
                raised.append(None)
            except MXNetError as exc:
                raised.append(_failed_op(exc))
            continue

        def fn(kind=kind, target=target, source=source, number=number):
            if kind == "fail":
                raise ZeroDivisionError(f"injected {number}")
            bufs[target] = bufs[target] * 0.5 + bufs[source] + number
        try:
            eng.push(fn, [vars_[source], vars_[target]], [vars_[target]], name=f"op{number}")
        except MXNetError as exc:  # only NaiveEngine raises at the push
            at_push.append(_failed_op(exc))
    for _ in range(len(program) + 1):
        try:
            within(eng.wait_all)
            break
        except MXNetError as exc:
            at_end.append(_failed_op(exc))
    return raised, at_end, at_push, [b.tobytes() for b in bufs]


def sequential_buffers(program, report_at_push=False):
    """The buffers the rule promises: ops run in order, skipped and failed ops change nothing."""
    bufs = [np.full(8, float(i)) for i in range(N_BUFFERS)]
    poison, reported = [None] * N_BUFFERS, set()
    for number, (kind, target, source) in enumerate(program):
        if kind == "wait":
            if poison[target] is not None:
                reported.add(poison[target])
            continue
        roots = [r for r in (poison[target], poison[source]) if r is not None and r not in reported]
        if roots or kind == "fail":
            poison[target] = min(roots) if roots else number
            if report_at_push and not roots:
                reported.add(number)
            continue
        poison[target] = None
        bufs[target] = bufs[target] * 0.5 + bufs[source] + number
    return [b.tobytes() for b in bufs]


@settings(max_examples=40, deadline=None)
@given(st.lists(fault_op, min_size=1, max_size=60))
def test_fault_injection(engines, program):
    for name in ("naive", "threaded1", "threaded2", "threaded4", "step"):
        naive = name == "naive"  # NaiveEngine raises each failure at its push instead
        raises, failures = expected_outcome(program, report_at_push=naive)
        raised, at_end, at_push, buffers = run_faulty(engines[name], program)
        assert raised == raises, name
        assert at_end == failures[:1], name  # one wait_all reports them all
        assert at_push == ([n for n, (kind, *_) in enumerate(program) if kind == "fail"]
                           if naive else []), name
        assert buffers == sequential_buffers(program, report_at_push=naive), name
    engines["step"].clear()
    out = Var()
    for eng in engines.values():  # still usable afterwards
        eng.push(lambda: None, [], [out])
        within(eng.wait_all)


# ------------------------------------------------------------------ the StepEngine


def test_step_engine_shows_the_queue_and_runs_only_what_a_wait_needs():
    eng, log = StepEngine(), []
    a, b, c = Var("a"), Var("b"), Var("c")
    t_a = eng.push(lambda: log.append("a"), [], [a], name="make_a")
    t_b = eng.push(lambda: log.append("b"), [], [b], name="make_b")
    t_c = eng.push(lambda: log.append("c"), [a], [c], name="a_to_c")
    assert [t.state for t in eng.tasks] == ["ready", "ready", "waiting"]
    assert t_c.deps == (Dep(t_a.seq, "a", "RAW"),) and eng.ready == [t_a, t_b]
    eng.wait_for_var(c)
    assert log == ["a", "c"] and t_b.state == "ready"
    record = eng.step()
    assert (record.name, record.writes, record.worker) == ("make_b", ("b",), 0)
    assert eng.step() is None and log == ["a", "c", "b"]
    assert [t.state for t in eng.tasks] == ["done"] * 3


def test_ctrl_c_during_an_op_does_not_wedge_the_engine():
    eng, var, out = StepEngine(), Var("v"), []

    def interrupted():
        raise KeyboardInterrupt
    eng.push(interrupted, [], [var], name="long_op")
    eng.push(lambda: out.append("skipped?"), [var], [Var()], name="user")
    with pytest.raises(KeyboardInterrupt):
        eng.step()
    within(eng.wait_all)  # finished: no hang, and the interrupt is not raised twice
    assert out == [] and [t.state for t in eng.tasks] == ["failed", "skipped"]


def test_step_engine_run_returns_records_in_order():
    eng, var = StepEngine(), Var("x")
    for number in range(3):
        eng.push(lambda: None, [var], [var], name=f"inc{number}")
    assert [r.name for r in eng.run()] == ["inc0", "inc1", "inc2"]


# -------------------------------------------------------------- traces and callbacks


@pytest.mark.parametrize("name", ["naive", "threaded2", "step"])
def test_tracing_records_every_executed_op(engines, name):
    eng, var = engines[name], Var("t")
    eng.clear_trace()
    eng.set_tracing(True)
    for number in range(10):
        eng.push(lambda: None, [var], [var], name=f"op{number}")
    within(eng.wait_all)
    eng.set_tracing(False)
    eng.push(lambda: None, [var], [var], name="untraced")
    within(eng.wait_all)
    records = list(eng.trace)
    assert [r.name for r in records] == [f"op{n}" for n in range(10)]
    assert all(r.start <= r.end and r.reads == ("t",) == r.writes for r in records)
    assert {r.worker for r in records} <= set(range(getattr(eng, "workers", 1)))


def test_callback_hooks_fire_in_order(engines):
    eng, events = engines["threaded2"], []
    callback = engine.Callback(start=lambda e: events.append("start"),
                               pretask=lambda task, worker: events.append(("pre", task.name)),
                               posttask=lambda task: events.append(("post", task.record.name)),
                               finish=lambda e: events.append("finish"))
    eng.add_callback(callback)
    eng.push(lambda: None, [], [Var()], name="x")
    within(eng.wait_all)
    eng.remove_callback(callback)
    assert events == ["start", ("pre", "x"), ("post", "x"), "finish"]


@pytest.mark.parametrize("make", [lambda: ThreadedEngine(2), lambda: ThreadedEngine(1),
                                  NaiveEngine, StepEngine])
@pytest.mark.parametrize("hook", ["pretask", "posttask"])
def test_a_callback_that_raises_is_reported_and_the_engine_keeps_working(make, hook):
    eng, out = make(), []

    def broken(task, *worker):
        raise ZeroDivisionError("hook bug")
    callback = engine.Callback(**{hook: broken})
    eng.add_callback(callback)
    message = rf"(?s)the {hook} hook .*broken.*test_engine.py.*ZeroDivisionError: hook bug.*'op\d'"
    with pytest.raises(MXNetError, match=message) as info:
        for number in range(3):  # NaiveEngine raises at the first push, the others at the wait
            eng.push(lambda number=number: out.append(number), [], [Var()], name=f"op{number}")
        within(eng.wait_all)
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    if isinstance(eng, NaiveEngine):
        assert out == [0]
    else:  # every op ran, and the message counts the other two hook errors
        assert out == [0, 1, 2] and "and 2 more hook error(s)" in str(info.value)
    within(eng.wait_all)  # reported once
    eng.remove_callback(callback)
    var = Var()
    eng.push(lambda: out.append("after"), [], [var], name="after")  # the workers are alive
    within(lambda: eng.wait_for_var(var))
    within(eng.wait_all)
    assert out[-1] == "after"
    within(eng.close)


# ----------------------------------------------------------------- engine selection


def engine_in_subprocess(env_vars):
    env = {k: v for k, v in os.environ.items()
           if k not in ("HYBRIDLAB_ENGINE_TYPE", "MXNET_ENGINE_TYPE")}
    env.update(env_vars)
    code = "from hybridlab import engine; print(type(engine.current()).__name__)"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)
    return done.stdout.strip() or done.stderr


@pytest.mark.parametrize("env_vars, expected", [
    ({}, "ThreadedEngine"),
    ({"HYBRIDLAB_ENGINE_TYPE": "NaiveEngine"}, "NaiveEngine"),
    ({"MXNET_ENGINE_TYPE": "StepEngine"}, "StepEngine"),
    ({"MXNET_ENGINE_TYPE": "ThreadedEnginePerDevice"}, "ThreadedEngine"),
    ({"HYBRIDLAB_ENGINE_TYPE": "NaiveEngine", "MXNET_ENGINE_TYPE": "StepEngine"},
     "NaiveEngine"),
    ({"HYBRIDLAB_ENGINE_TYPE": "Turbo"}, "UnknownEngineError"),
])
def test_engine_type_comes_from_the_environment(env_vars, expected):
    output = engine_in_subprocess(env_vars)
    assert expected in output
    if expected == "UnknownEngineError":
        assert "'Turbo'" in output and "NaiveEngine, ThreadedEngine, StepEngine" in output


def test_set_engine_and_engine_scope():
    before = engine.current()
    with engine.engine_scope("StepEngine") as step:
        assert engine.current() is step
        out = []
        engine.push(lambda: out.append(1), [], [Var()])
        assert out == []
        with engine.engine_scope(NaiveEngine()) as naive:
            assert out == [1]  # switching waited for the StepEngine
            assert engine.current() is naive
        assert engine.current() is step
    assert engine.current() is before
    with pytest.raises(UnknownEngineError, match="valid: NaiveEngine"):
        engine.set_engine("FastEngine")
    assert engine.current() is before


def test_module_functions_use_the_current_engine():
    with engine.engine_scope("ThreadedEngine") as eng:
        var, out = Var(), []
        engine.set_tracing(True)
        engine.push(lambda: out.append(1), [], [var], name="w")
        within(lambda: engine.wait_for_var(var))
        within(engine.wait_all)
        assert out == [1] and [r.name for r in eng.trace] == ["w"]
        engine.clear_trace()
        engine.set_tracing(False)
        assert list(eng.trace) == []


def test_a_closed_threaded_engine_restarts_on_the_next_push():
    eng, out = ThreadedEngine(2), []
    eng.push(lambda: out.append(1), [], [Var()])
    within(eng.close)
    assert out == [1] and eng._threads == []
    eng.push(lambda: out.append(2), [], [Var()])
    within(eng.wait_all)
    within(eng.close)
    assert out == [1, 2]


BLAS_SCRIPT = """
import threading, threadpoolctl
from hybridlab.engine import ThreadedEngine, Var
def blas_threads():
    return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
def busy(eng):
    gate = threading.Event()
    eng.push(lambda: gate.wait(30), [], [Var()])
    return gate
threadpoolctl.threadpool_limits(2, user_api="blas")
seen = [blas_threads()]                               # 2: before any engine
eng = ThreadedEngine(2)
gate = busy(eng)
seen.append(blas_threads())                           # 1: 2 workers busy
gate.set(); eng.wait_all()
seen.append(blas_threads())                           # 2: a sync point found it idle
one = ThreadedEngine(1)
gate = busy(one)
seen.append(blas_threads())                           # 2: one worker never limits BLAS
gate.set(); one.wait_all()
first, second = ThreadedEngine(2), ThreadedEngine(2)
gates = busy(first), busy(second)
gates[0].set(); first.wait_all()
seen.append(blas_threads())                           # 1: the second engine is still busy
gates[1].set(); second.wait_all()
seen.append(blas_threads())                           # 2: both idle
eng.push(lambda: None, [], [Var()]); eng.close()
seen.append(blas_threads())                           # 2: close() of a busy engine restores
per_device = ThreadedEngine(1)
gate = busy(per_device)
seen.append(blas_threads())                           # 2: one device, one worker
gate.set(); per_device.wait_all()
gates = gate, threading.Event()
per_device.push(lambda: gates[1].wait(30), [], [Var()], device="cpu(1)")
seen.append(blas_threads())                           # 1: a second device's worker
gates[1].set(); per_device.wait_all()
seen.append(blas_threads())                           # 2: idle again
print(*[n for threads in seen for n in threads])
"""


def test_threaded_engine_limits_blas_only_while_busy():
    """NOTE [BLAS threads]: one BLAS thread while a multi-worker engine (several workers,
    or one on each of several devices: NOTE [A worker per device]) is busy, all of
    them again once a sync point finds it idle (numpy timed afterwards is not slowed)."""
    pytest.importorskip("threadpoolctl")
    done = subprocess.run([sys.executable, "-c", BLAS_SCRIPT], capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.split() == "2 1 2 2 1 2 2 2 1 2".split(), done.stdout + done.stderr


@pytest.mark.parametrize("workers", [0, -1])
def test_threaded_engine_needs_at_least_one_worker(workers):
    with pytest.raises(ValueError, match=f"1..64 workers, got workers={workers}"):
        ThreadedEngine(workers)
    with config.Context(ENGINE_WORKERS=workers):
        with pytest.raises(ValueError, match="got HYBRIDLAB_ENGINE_WORKERS="):
            ThreadedEngine()
    with config.Context(ENGINE_WORKERS=3):
        assert ThreadedEngine().workers == 3 and ThreadedEngine(1).workers == 1


def test_bulk_changes_no_result_and_restores_the_size():
    from hybridlab import nd

    before = engine.set_bulk_size(0)
    with engine.bulk(10):
        x = nd.ones((3,))
        x += 1
        assert engine.set_bulk_size(10) == 10
    assert engine.set_bulk_size(before) == 0
    assert x.asnumpy().tolist() == [2.0, 2.0, 2.0]
