"""The engine's events (push, pretask, posttask, fail, skip, clear) and the dependency
records (``Task.deps``, ``TaskRecord.seq`` / ``.deps``) that every instrument reads."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridlab import engine
from hybridlab.engine import Callback, NaiveEngine, StepEngine, ThreadedEngine, Var
from hybridlab.errors import MXNetError

ENGINES = {"naive": NaiveEngine, "step": StepEngine, "threaded": lambda: ThreadedEngine(2)}


def reference_deps(program: list[tuple[list[int], list[int]]]) -> list[set[tuple]]:
    """(dependency index, var, kind) for each op of ``program``, by the three rules."""
    last_writer: dict[int, int] = {}
    reads_since: dict[int, list[int]] = {}
    result = []
    for index, (reads, writes) in enumerate(program):
        deps: set[tuple] = set()
        for v in reads:
            if v not in writes:
                if v in last_writer:
                    deps.add((last_writer[v], f"v{v}", "RAW"))
                reads_since.setdefault(v, []).append(index)
        for v in writes:
            if v in last_writer:
                deps.add((last_writer[v], f"v{v}", "WAW"))
            deps |= {(r, f"v{v}", "WAR") for r in reads_since.pop(v, [])}
            last_writer[v] = index
        result.append(deps)
    return result


programs = st.lists(
    st.tuples(st.lists(st.integers(0, 3), max_size=3, unique=True),
              st.lists(st.integers(0, 3), min_size=1, max_size=2, unique=True)),
    min_size=1, max_size=12)


@pytest.mark.parametrize("kind", list(ENGINES))
@settings(max_examples=40, deadline=None)
@given(program=programs)
def test_a_trace_turns_back_into_its_dependency_graph(kind, program):
    """Records carry seq and deps; re-indexed by push order they equal the three rules."""
    eng, variables = ENGINES[kind](), [Var(f"v{i}") for i in range(4)]
    try:
        eng.set_tracing(True)
        tasks = [eng.push(lambda: None, [variables[v] for v in reads],
                          [variables[v] for v in writes], name=f"op{i}")
                 for i, (reads, writes) in enumerate(program)]
        eng.wait_all()
        records = sorted(eng.trace, key=lambda r: r.seq)
        assert len(records) == len(program)
        first = records[0].seq
        got = [{(d.seq - first, d.var, d.kind) for d in r.deps} for r in records]
        assert got == reference_deps(program)
        if kind != "naive":  # NaiveEngine returns no Task from push
            assert [t.deps for t in tasks] == [r.deps for r in records]
    finally:
        eng.close()


@pytest.mark.parametrize("kind", list(ENGINES))
def test_every_event_fires_once_per_task_in_order(kind):
    eng, events = ENGINES[kind](), []
    a, b = Var("a"), Var("b")
    hooks = Callback(push=lambda t: events.append(("push", t.name)),
                     pretask=lambda t, w: events.append(("pretask", t.name)),
                     posttask=lambda t: events.append(("posttask", t.name)))
    eng.add_callback(hooks)
    try:
        eng.push(lambda: None, [], [a], name="make_a")
        eng.push(lambda: None, [a], [b], name="a_to_b")
        eng.wait_all()
    finally:
        eng.remove_callback(hooks)
        eng.close()
    for name in ("make_a", "a_to_b"):
        mine = [e for e, n in events if n == name]
        assert mine == ["push", "pretask", "posttask"]
    assert events.index(("posttask", "make_a")) < events.index(("pretask", "a_to_b"))


@pytest.mark.parametrize("kind", ["step", "threaded"])
def test_a_failure_fires_fail_and_its_dependents_fire_skip(kind):
    eng, events = ENGINES[kind](), []
    a, b, c, other = Var("a"), Var("b"), Var("c"), Var("other")

    def boom():
        raise ValueError("not positive definite")

    hooks = Callback(fail=lambda t: events.append(("fail", t.name, str(t.error))),
                     skip=lambda t: events.append(("skip", t.name)),
                     posttask=lambda t: events.append(("ran", t.name)))
    eng.add_callback(hooks)
    try:
        eng.push(boom, [], [a], name="broken")
        eng.push(lambda: None, [a], [b], name="reads_a")
        eng.push(lambda: None, [b], [c], name="reads_b")
        eng.push(lambda: None, [], [other], name="unrelated")
        with pytest.raises(MXNetError, match="broken"):
            eng.wait_all()
    finally:
        eng.remove_callback(hooks)
        eng.close()
    assert ("fail", "broken", "not positive definite") in events
    assert sorted(e for e in events if e[0] == "skip") == [("skip", "reads_a"),
                                                          ("skip", "reads_b")]
    assert ("ran", "unrelated") in events and ("ran", "reads_a") not in events


def test_clear_fires_on_step_engine_clear_and_clear_trace():
    eng, cleared = StepEngine(), []
    eng.add_callback(Callback(clear=lambda e: cleared.append(e)))
    eng.push(lambda: None, [], [Var()], name="op")
    eng.run()
    eng.clear()
    eng.clear_trace()
    assert cleared == [eng, eng] and eng.tasks == []


def test_a_push_hook_that_raises_is_reported_at_the_next_sync_not_lost():
    eng = StepEngine()

    def broken(task):
        raise RuntimeError("hook bug")

    eng.add_callback(Callback(push=broken))
    var = Var("v")
    eng.push(lambda: None, [], [var], name="op")
    with pytest.raises(MXNetError, match="push hook .* raised RuntimeError: hook bug"):
        eng.wait_for_var(var)


def test_an_unobserved_engine_keeps_no_dependency_history():
    """NOTE [Observed engines]: with nobody listening, pushes record nothing extra."""
    eng, var = ThreadedEngine(1), Var("v")
    try:
        for _ in range(100):
            eng.push(lambda: None, [var], [], name="read")
        task = eng.push(lambda: None, [], [var], name="write")
        eng.wait_all()
        assert task.deps == () and var._read_seqs is None
    finally:
        eng.close()


def test_engine_module_exposes_the_dependency_kinds():
    assert engine.DEP_KINDS == {"RAW": "read-after-write", "WAR": "write-after-read",
                                "WAW": "write-after-write"}


@pytest.mark.parametrize("make", [lambda: engine.ThreadedEngine(workers=1),
                                  lambda: engine.NaiveEngine()])
def test_a_failed_op_nobody_waits_for_holds_no_arrays(make):
    """The failure keeps its message and its traceback as text, not the kernel's frames
    (which hold its arrays) -- until a sync point that may never come."""
    import gc
    import time
    import weakref

    import numpy as np

    from hybridlab.errors import MXNetError

    refs = []

    def failing():
        scratch = np.ones(1_000_000)  # what a kernel's frame holds when it raises
        refs.append(weakref.ref(scratch))
        raise ValueError("boom")

    eng = make()
    try:
        var = engine.Var()
        try:
            eng.push(failing, [], [var], "failing_op")
        except MXNetError:
            pass  # the NaiveEngine raises at once; the error is reported there
        for _ in range(300):  # the worker runs it and records the failure soon
            gc.collect()
            if refs and refs[0]() is None:
                break
            time.sleep(0.01)
        assert refs and refs[0]() is None  # no frame keeps the array alive
        if isinstance(eng, engine.ThreadedEngine):
            with pytest.raises(MXNetError, match="failing_op") as caught:
                eng.wait_all()
            notes = "".join(getattr(caught.value.__cause__, "__notes__", []))
            assert "Traceback" in notes and "failing" in notes and "boom" in notes
    finally:
        if hasattr(eng, "close"):
            eng.close()
