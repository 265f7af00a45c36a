"""A failed op nobody waits for keeps its error as text, not the frames and their buffers."""

import gc
import tracemalloc

import numpy as np
import pytest

from hybridlab.engine import ThreadedEngine, Var


def test_failed_ops_nobody_waits_for_release_their_buffers():
    """300 failures, each kernel holding 1 MB in its frame: the engine keeps their
    messages and tracebacks as text, not the frames (before: all 300 MB stayed alive)."""
    engine = ThreadedEngine(1)

    def push_failing():
        big = np.ones(1 << 17)  # 1 MB, referenced only by the kernel's frames

        def kernel():
            doubled = big * 2  # noqa: F841 -- a local the traceback would keep
            raise ValueError("kernel failed")

        engine.push(kernel, [], [Var()], "failing")

    tracemalloc.start()
    try:
        for _ in range(300):
            push_failing()
        engine._wait_idle()
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held < 30 << 20, f"{held / 2**20:.0f} MB still held by 300 failed ops"
    with pytest.raises(Exception, match="operator 'failing' failed with ValueError") as info:
        engine.wait_all()
    cause = info.value.__cause__
    assert cause.__traceback__ is None
    assert any("in kernel" in note and "raise ValueError" in note for note in cause.__notes__)
    engine.close()
