"""Every file hybridlab writes is the old one or the whole new one, never half."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from hybridlab import engine, nd, profiler, sym
from hybridlab.errors import MXNetError
from hybridlab.gluon import nn
from hybridlab.ndarray_io import atomic_write


def test_a_failure_while_writing_leaves_the_old_file(tmp_path):
    target = tmp_path / "file.bin"
    target.write_bytes(b"old")

    def fails(file):
        file.write(b"half of the new")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        atomic_write(str(target), fails)
    assert target.read_bytes() == b"old" and os.listdir(tmp_path) == ["file.bin"]
    atomic_write(str(target), "new")
    assert target.read_text() == "new"


def test_a_save_whose_values_fail_keeps_the_previous_parameters(tmp_path):
    """The values are computed (waited for) before the file is opened: an array whose
    operator fails on the engine leaves the old file, not an empty one."""
    path = str(tmp_path / "arrays.params")
    nd.save(path, {"a": nd.ones((2,))})
    with engine.engine_scope(engine.ThreadedEngine(workers=1)):
        not_positive = nd.array(-np.eye(2, dtype=np.float32)[None])
        failing = nd.linalg_potrf(not_positive)  # fails on a worker, later
        with pytest.raises(MXNetError, match="not positive definite"):
            nd.save(path, {"a": nd.array([1.0, 2.0]), "b": failing})
    np.testing.assert_array_equal(nd.load(path)["a"].asnumpy(), np.ones(2))
    assert os.listdir(tmp_path) == ["arrays.params"]  # no temporary file left behind


def test_symbol_save_and_export_make_everything_before_touching_the_files(tmp_path,
                                                                          monkeypatch):
    net = nn.Dense(2, in_units=3)
    net.initialize()
    net.hybridize()
    net(nd.ones((1, 3)))
    prefix = str(tmp_path / "net")
    net.export(prefix)
    before = {name: (tmp_path / name).read_bytes() for name in os.listdir(tmp_path)}

    def broken(self):
        raise RuntimeError("cannot serialise")

    monkeypatch.setattr(sym.Symbol, "tojson", broken)
    with pytest.raises(RuntimeError, match="cannot serialise"):
        net.export(prefix)
    with pytest.raises(RuntimeError, match="cannot serialise"):
        sym.var("x").save(prefix + "-symbol.json")
    assert {name: (tmp_path / name).read_bytes() for name in os.listdir(tmp_path)} == before


def test_the_profiler_keeps_its_records_when_the_dump_fails(tmp_path):
    profiler.set_config(filename=str(tmp_path / "missing-folder" / "trace.json"))
    profiler.set_state("run")
    (nd.ones((2,)) + 1).wait_to_read()
    profiler.set_state("stop")
    with pytest.raises(OSError):
        profiler.dump()
    assert '"_plus_scalar"' in profiler.dumps(reset=False)  # not lost
    profiler.set_config(filename=str(tmp_path / "trace.json"))
    profiler.dump()
    assert '"_plus_scalar"' in (tmp_path / "trace.json").read_text()


def test_a_save_killed_midway_leaves_the_previous_file_loadable(tmp_path):
    path = tmp_path / "big.params"
    nd.save(str(path), {"w": nd.ones((4,))})
    script = textwrap.dedent(f"""
        import os, sys, time
        import numpy as np
        import hybridlab.ndarray_io as io
        from hybridlab import nd
        real = os.fsync
        def slow(fd):
            print("writing", flush=True)
            time.sleep(30)  # killed here: the data is written, not yet renamed
            real(fd)
        os.fsync = slow
        nd.save({str(path)!r}, {{"w": nd.array(np.zeros(2_000_000, np.float32))}})
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "writing"
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    time.sleep(0.1)
    np.testing.assert_array_equal(nd.load(str(path))["w"].asnumpy(), np.ones(4))
