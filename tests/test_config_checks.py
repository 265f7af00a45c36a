"""Configuration checked at first use, bad nd.array arguments refused, failures that free."""

import gc
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest

from hybridlab import config, nd
from hybridlab.engine import ThreadedEngine, Var


def test_a_bad_worker_count_fails_at_first_use_naming_the_variable():
    code = ("import hybridlab\nfrom hybridlab import nd\nprint('imported', flush=True)\n"
            "nd.ones((2,)).asnumpy()\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={"HYBRIDLAB_ENGINE_WORKERS": "abc", "PATH": "/usr/bin:/bin"},
                          timeout=120)
    assert done.stdout.strip() == "imported"
    assert "ValueError: HYBRIDLAB_ENGINE_WORKERS='abc': expected a whole number" in done.stderr


def test_a_huge_worker_count_is_capped_with_a_warning():
    with config.Context(ENGINE_WORKERS="100000"):
        with pytest.warns(UserWarning, match="HYBRIDLAB_ENGINE_WORKERS=100000: capped at"):
            engine = ThreadedEngine()
    assert engine.workers == config.MAX_WORKERS
    assert ThreadedEngine(config.MAX_WORKERS).workers == config.MAX_WORKERS


@pytest.mark.parametrize("dtype", [object, "U3", "S2", "complex64", "datetime64[s]", "nope"])
def test_nd_array_refuses_non_numeric_dtypes(dtype):
    with pytest.raises(TypeError, match="is not a numeric dtype"):
        nd.array([1, 2], dtype=dtype)


def test_nd_array_refuses_none():
    with pytest.raises(TypeError, match=r"nd.array\(None\): there are no values"):
        nd.array(None)
    assert nd.array([1, 2], dtype="int8").dtype == np.int8  # numeric dtypes still work


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
