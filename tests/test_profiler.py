"""The profiler turns the engine's TaskRecords into valid Chrome Trace Event JSON."""

from __future__ import annotations

import json
import threading

import pytest

from hybridlab import engine, nd, profiler
from hybridlab.engine import Var

pytestmark = pytest.mark.timeout(60)  # pytest-timeout: a deadlocked wait fails fast


def run_two_chains(n_ops: int) -> None:
    """Two independent chains; a barrier makes their first ops meet on two workers."""
    barrier = threading.Barrier(2, timeout=20)
    for chain in range(2):
        var = Var(f"chain{chain}")
        engine.push(barrier.wait, [], [var], name=f"start{chain}")
        for number in range(n_ops - 1):
            engine.push(lambda: None, [var], [var], name=f"step{chain}_{number}")


def test_dump_writes_one_complete_event_per_op(tmp_path):
    filename = tmp_path / "profile.json"
    with engine.engine_scope(engine.ThreadedEngine(2)):
        profiler.set_config(profile_all=True, filename=str(filename))
        profiler.set_state("run")
        run_two_chains(5)
        engine.wait_all()
        profiler.set_state("stop")
        engine.push(lambda: None, [], [Var()], name="not_profiled")
        engine.wait_all()
        profiler.dump()
    events = json.loads(filename.read_text())["traceEvents"]
    ops = [e for e in events if e["ph"] == "X"]
    assert sorted(e["name"] for e in ops) == sorted(
        [f"start{c}" for c in range(2)] + [f"step{c}_{n}" for c in range(2) for n in range(4)])
    assert {e["tid"] for e in ops} == {0, 1}  # the barrier forced both workers to work
    names = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert names == {0: "worker 0: default #0", 1: "worker 1: default #1"}  # (no device)
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in ops)
    assert json.loads(profiler.dumps())["traceEvents"][1:] == []  # dump() forgot them


def test_dumps_keeps_records_unless_reset():
    with engine.engine_scope("NaiveEngine"):
        profiler.set_state("run")
        engine.push(lambda: None, [Var("a")], [Var("b")], name="copy")
        profiler.set_state("stop")
    first = json.loads(profiler.dumps())["traceEvents"]
    (event,) = [e for e in first if e["ph"] == "X"]
    assert (event["name"], event["tid"], event["args"]) == ("copy", 0,
                                                            {"reads": ["a"], "writes": ["b"]})
    assert json.loads(profiler.dumps(reset=True))["traceEvents"] == first
    assert [e for e in json.loads(profiler.dumps())["traceEvents"] if e["ph"] == "X"] == []


def test_bad_state_is_a_clear_error():
    with pytest.raises(ValueError, match="'run' or 'stop'"):
        profiler.set_state("go")


def test_the_profiler_follows_engine_switches():
    with engine.engine_scope("NaiveEngine"):
        profiler.set_state("run")
        engine.push(lambda: None, [], [Var()], name="on_naive")
        with engine.engine_scope(engine.ThreadedEngine(1)):
            engine.push(lambda: None, [], [Var()], name="on_threaded")
        with engine.engine_scope("StepEngine"):
            engine.push(lambda: None, [], [Var()], name="on_step")
        engine.set_engine("StepEngine")
        engine.push(lambda: None, [], [Var()], name="after_set_engine")
        engine.wait_all()
        profiler.set_state("stop")
        engine.push(lambda: None, [], [Var()], name="not_profiled")
        engine.wait_all()
    events = json.loads(profiler.dumps(reset=True))["traceEvents"]
    assert [e["name"] for e in events if e["ph"] == "X"] == [
        "on_naive", "on_threaded", "on_step", "after_set_engine"]


def test_each_row_is_named_by_the_stream_its_worker_works_for():
    """NOTE [A worker per device]: a row per device's worker and per copy stream."""
    import hybridlab as mx
    from hybridlab import nd

    with engine.engine_scope(engine.ThreadedEngine(1)):
        profiler.set_state("run")
        doubled = nd.ones((4,)).copyto(mx.cpu(1)) * 2
        doubled.wait_to_read()
        engine.wait_all()
        profiler.set_state("stop")
    events = json.loads(profiler.dumps(reset=True))["traceEvents"]
    rows = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    ran = {e["name"]: rows[e["tid"]] for e in events if e["ph"] == "X"}
    assert ran["_ones"].endswith(": cpu(0)") and ran["_copyto"].endswith(": cpu(1) copy")
    # (the caller may run the op it waits for itself: NOTE [help while waiting])
    assert ran["_mul_scalar"] == "caller" or ran["_mul_scalar"].endswith(": cpu(1)")


def test_the_programs_own_spans_counters_and_markers_and_pause(tmp_path):
    from hybridlab import profiler

    profiler.set_config(filename=str(tmp_path / "own.json"))
    profiler.set_state("run")
    try:
        domain = profiler.Domain("lesson")
        task = profiler.Task(domain, "load")
        task.start()
        nd.ones((4,)).asnumpy()
        task.stop()
        counter = profiler.Counter(domain, "items", 5)
        counter += 2
        profiler.Marker(domain, "epoch").mark("process")
        profiler.pause()
        hidden = profiler.Task(domain, "hidden")
        hidden.start()
        hidden.stop()
        profiler.resume()
        events = json.loads(profiler.dumps())["traceEvents"]
        stats = json.loads(profiler.dumps(format="json", sort_by="count", ascending=True))
    finally:
        profiler.set_state("stop")
        profiler.dumps(reset=True)
    names = {(e["name"], e["ph"]) for e in events}
    assert {("load", "X"), ("items", "C"), ("epoch", "i")} <= names
    assert ("hidden", "X") not in names  # recorded nothing while paused
    assert counter.value == 7
    assert stats["Time"]["lesson"]["load"]["Count"] == 1 and "operator" in stats["Time"]
    assert set(stats["Unit"]) == {"Time", "Memory"}
    table = profiler.dumps(format="table")
    assert table.startswith("Name")
