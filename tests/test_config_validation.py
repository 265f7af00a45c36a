"""Bad configuration and bad array input get a clear message naming what to change."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from hybridlab import config, engine, nd


def run(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=60)


@pytest.mark.parametrize("value, message", [
    ("abc", "HYBRIDLAB_ENGINE_WORKERS='abc' is not a whole number; set it to 1..64"),
    ("100000", "HYBRIDLAB_ENGINE_WORKERS=100000 is out of range; set it to 1..64"),
    ("0", "HYBRIDLAB_ENGINE_WORKERS=0 is out of range"),
])
def test_a_bad_worker_count_is_reported_at_first_use_not_at_import(value, message):
    code = ("import hybridlab\nprint('imported', flush=True)\n"
            "from hybridlab import nd\n(nd.ones((2,)) + 1).wait_to_read()")
    result = run(code, HYBRIDLAB_ENGINE_WORKERS=value, HYBRIDLAB_ENGINE_TYPE="ThreadedEngine")
    assert result.stdout.startswith("imported") and result.returncode != 0
    assert f"ValueError: {message}" in result.stderr
    good = run(code + "\nprint(hybridlab.engine.current().workers)",
               HYBRIDLAB_ENGINE_WORKERS="3", HYBRIDLAB_ENGINE_TYPE="ThreadedEngine")
    assert good.stdout.split() == ["imported", "3"], good.stderr


def test_debug_and_verify_flags_say_which_values_they_take():
    code = ("import hybridlab as mx\nnet = mx.gluon.nn.Dense(2, in_units=2)\n"
            "net.initialize()\nnet.hybridize()\nnet(mx.nd.ones((1, 2)))")
    result = run(code, HYBRIDLAB_DEBUG="yes")
    assert "HYBRIDLAB_DEBUG='yes' is not a whole number; set it to 0..1" in result.stderr


def test_flag_reads_a_good_value_and_raises_a_kept_message():
    assert config.flag("ENGINE_TYPE") == config.FLAGS["ENGINE_TYPE"]
    with config.Context(VERIFY=config.Invalid("HYBRIDLAB_VERIFY=7 is out of range")):
        with pytest.raises(ValueError, match="HYBRIDLAB_VERIFY=7"):
            config.flag("VERIFY")
    with pytest.raises(ValueError, match="1..64 workers"):
        engine.ThreadedEngine(workers=65)


@pytest.mark.parametrize("source, dtype, message", [
    (None, None, r"nd.array\(None\): there are no values"),
    ([1, 2], object, "dtype=object is not numeric"),
    ([1, 2], str, "is not numeric"),
    ([1, 2], "nope", "dtype='nope' is not a dtype"),
    (["a", "b"], None, "cannot make a numeric array from list"),
])
def test_nd_array_refuses_what_is_not_numbers(source, dtype, message):
    with pytest.raises(TypeError, match=message):
        nd.array(source, dtype=dtype)
    assert nd.array([1, 2], dtype="int64").dtype == np.int64


def test_a_file_above_the_load_cap_is_refused_before_reading(tmp_path):
    path = str(tmp_path / "a.params")
    nd.save(path, {"w": nd.ones((100,))})
    size = os.path.getsize(path)
    with config.Context(MAX_LOAD_BYTES=size - 1):
        from hybridlab.errors import ArrayFileError

        with pytest.raises(ArrayFileError, match=f"more than HYBRIDLAB_MAX_LOAD_BYTES={size - 1}"):
            nd.load(path)
    with config.Context(MAX_LOAD_BYTES=size):
        assert nd.load(path)["w"].shape == (100,)


def test_constant_folding_leaves_huge_constants_to_run_time():
    from hybridlab import sym
    from hybridlab.graph.passes import run_pipeline
    from hybridlab.graph.passes.fold_constants import FOLD_MAX_BYTES

    huge = sym.zeros(shape=(100_000, 100_000, 100_000)) + 1  # 4 * 10**15 bytes: never made
    final, records = run_pipeline(huge.to_graph())
    folding = next(r for r in records if r.name == "fold_constants")
    assert folding.changes == [] and any(n.kind == "call" for n in final.nodes)
    small = sym.zeros(shape=(4, 4)) + 1
    final, _ = run_pipeline(small.to_graph())
    assert all(n.kind != "call" for n in final.nodes) and FOLD_MAX_BYTES >= 64
