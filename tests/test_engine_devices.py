"""A worker per device (NOTE [A worker per device] in engine.py): streams decide who runs
a ready op, never when it is ready.

Interleavings are forced with ``threading.Event`` / ``Barrier`` (with timeouts), never with
sleeps; a wait that could hang runs through :func:`_sync.within`. Ops signal their own end
with an Event where the test must not wait through the engine (a waiting caller would run
a ready op itself: NOTE [help while waiting]).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from _sync import within

import hybridlab as mx
from hybridlab import engine, nd
from hybridlab.engine import ThreadedEngine, Var

TIMEOUT = 20.0
pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def eng():
    made = ThreadedEngine(1)
    made.set_tracing(True)
    yield made
    within(made.close)


def _thread_log(log: list, label: str, gate: threading.Event | None = None,
                done: threading.Event | None = None):
    def fn() -> None:
        if gate is not None:
            assert gate.wait(TIMEOUT), "gate never opened"
        log.append((label, threading.current_thread().name))
        if done is not None:
            done.set()
    return fn


def test_each_device_has_its_own_worker(eng):
    """One worker per device, yet two ops on two devices meet at a barrier: they ran at
    the same time, each on its device's thread."""
    barrier = threading.Barrier(2, timeout=TIMEOUT)
    eng.push(barrier.wait, [], [Var()], "on_a", device="a")
    eng.push(barrier.wait, [], [Var()], "on_b", device="b")
    within(eng.wait_all)
    rows = {r.name: eng.worker_names[r.worker] for r in eng.trace}
    assert rows == {"on_a": "a", "on_b": "b"}


def test_ops_of_one_device_share_its_worker_and_others_do_not_block_them(eng):
    """Device a's only worker is blocked; device b's ops still run, all on b's thread."""
    gate, done, log = threading.Event(), threading.Event(), []
    eng.push(_thread_log(log, "a", gate), [], [Var()], "blocked", device="a")
    for i in range(3):
        eng.push(_thread_log(log, f"b{i}", done=done if i == 2 else None), [], [Var()],
                 f"b{i}", device="b")
    assert done.wait(TIMEOUT), "device b's ops waited for device a's worker"
    assert [label for label, _ in log] == ["b0", "b1", "b2"]
    assert len({thread for _, thread in log}) == 1
    gate.set()
    within(eng.wait_all)
    workers = {r.name: eng.worker_names[r.worker] for r in eng.trace}
    assert workers == {"blocked": "a", "b0": "b", "b1": "b", "b2": "b"}


def test_a_copy_runs_on_its_copy_stream_beside_the_devices_compute(eng):
    """Device b's compute worker is blocked; a copy into b runs on b's copy stream."""
    gate, done, log = threading.Event(), threading.Event(), []
    eng.push(_thread_log(log, "compute", gate), [], [Var()], "compute", device="b")
    eng.push(_thread_log(log, "copy", done=done), [Var()], [Var()], "_copyto", device="b",
             copy=True)
    assert done.wait(TIMEOUT), "the copy waited for the device's compute worker"
    gate.set()
    within(eng.wait_all)
    workers = {r.name: eng.worker_names[r.worker] for r in eng.trace}
    assert workers == {"compute": "b", "_copyto": "b copy"}


def test_a_copy_from_one_device_to_another_waits_for_the_writers_on_both(eng):
    """The copy reads ``src`` (written on a) and overwrites ``dst`` (written on b, and
    read on c since): it waits for the writer of src (RAW), the writer of dst (WAW) and
    dst's reader (WAR), whatever streams they run on."""
    src, dst, log = Var("src"), Var("dst"), []
    steps = ("src", "dst", "reader")
    gates = {name: threading.Event() for name in steps}
    done = {name: threading.Event() for name in steps}
    eng.push(_thread_log(log, "src", gates["src"], done["src"]), [], [src], "write_src",
             device="a")
    eng.push(_thread_log(log, "dst", gates["dst"], done["dst"]), [], [dst], "write_dst",
             device="b")
    eng.push(_thread_log(log, "reader", gates["reader"], done["reader"]), [dst], [Var()],
             "read_dst", device="c")
    copy = eng.push(_thread_log(log, "copy"), [src], [dst], "_copyto", device="b", copy=True)
    assert copy is not None
    assert sorted(dep.kind for dep in copy.deps) == ["RAW", "WAR", "WAW"]
    for name in steps[:2]:  # each released alone: the copy still waits for the rest
        gates[name].set()
        assert done[name].wait(TIMEOUT)
        assert copy.state == "waiting", f"the copy ran before {name!r}'s followers were done"
    gates["reader"].set()
    within(eng.wait_all)
    assert [label for label, _ in log] == ["src", "dst", "reader", "copy"]
    assert copy.state == "done"
    assert {eng.worker_names[r.worker] for r in eng.trace if r.name == "_copyto"} <= {
        "b copy", "caller"}


def test_an_ndarray_copy_runs_on_the_target_devices_copy_stream_and_compute_on_its_device():
    with engine.engine_scope(ThreadedEngine(1)) as eng:
        eng.set_tracing(True)
        a = nd.ones((3,))
        b = a.copyto(mx.cpu(1))
        c = b * 2
        d = c.copyto(mx.cpu(0)) + a
        assert d.asnumpy().tolist() == [3.0, 3.0, 3.0]
        within(eng.wait_all)
        rows = [(r.name, eng.worker_names[r.worker]) for r in eng.trace if r.worker >= 0]
    assert ("_copyto", "cpu(1) copy") in rows and ("_copyto", "cpu(0) copy") in rows
    assert ("_mul_scalar", "cpu(1)") in rows and ("broadcast_add", "cpu(0)") in rows


def test_close_stops_every_stream_and_the_engine_restarts():
    eng, out = ThreadedEngine(2), []
    for device in ("a", "b"):
        eng.push(lambda: out.append(1), [], [Var()], device=device)
    eng.push(lambda: out.append(1), [], [Var()], device="b", copy=True)
    within(eng.wait_all)
    threads = list(eng._threads)
    assert len(threads) == 2 + 2 + 1  # two workers per device, one copy thread
    assert sorted(eng.worker_names.values()) == ["a #0", "a #1", "b #0", "b #1", "b copy",
                                                 "caller"]
    within(eng.close)
    assert eng._threads == [] and not any(t.is_alive() for t in threads)
    eng.push(lambda: out.append(2), [], [Var()], device="a")
    within(eng.wait_all)
    within(eng.close)
    assert out == [1, 1, 1, 2]


def test_many_devices_give_the_naive_engines_results():
    """A program over three devices with copies back and forth, on ThreadedEngine(1) and
    (2): the values NaiveEngine computes, bit for bit."""
    def program() -> list:
        mx.random.seed(3)
        devices = [mx.cpu(i) for i in range(3)]
        xs = [nd.random.normal(shape=(4, 4), ctx=d) for d in devices]
        for step in range(6):
            for i, device in enumerate(devices):
                other = xs[(i + 1) % 3].copyto(device)
                xs[i] = nd.dot(xs[i], other) * 0.5 + step
        total = nd.add_n(*[x.as_in_context(mx.cpu(0)) for x in xs])
        return [x.asnumpy() for x in xs] + [total.asnumpy()]

    with engine.engine_scope("NaiveEngine"):
        expected = program()
    for workers in (1, 2):
        with engine.engine_scope(ThreadedEngine(workers)) as eng:
            got = within(program)
            within(eng.close)
        for want, have in zip(expected, got):
            np.testing.assert_array_equal(have, want)
