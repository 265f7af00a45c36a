"""Every file hybridlab writes is the old one or the whole new one, never half."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from hybridlab import engine, model_files, nd, profiler, sym
from hybridlab.errors import ModelFileError, MXNetError
from hybridlab.gluon import SymbolBlock, nn
from hybridlab.ndarray_io import atomic_write, remove_stale_temporaries


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

    def broken(graph, file_attrs=None):
        raise RuntimeError("cannot serialise")

    monkeypatch.setattr(model_files, "to_json", broken)  # the one JSON writer
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


def test_saving_keeps_the_mode_refuses_read_only_and_writes_through_links(tmp_path):
    private = tmp_path / "private.params"
    nd.save(str(private), [nd.ones((2,))])
    private.chmod(0o600)
    nd.save(str(private), [nd.zeros((2,))])
    assert private.stat().st_mode & 0o777 == 0o600
    frozen = tmp_path / "frozen-symbol.json"
    sym.var("a").save(str(frozen))
    frozen.chmod(0o444)
    with pytest.raises(PermissionError, match="read-only .mode 0444.*chmod u\\+w"):
        sym.var("b").save(str(frozen))
    assert sym.load(str(frozen)).list_arguments() == ["a"]
    real = tmp_path / "real" / "w.params"
    real.parent.mkdir()
    nd.save(str(real), [nd.ones((1,))])
    link = tmp_path / "link.params"
    link.symlink_to(real)
    nd.save(str(link), [nd.full((1,), 7)])
    assert link.is_symlink() and nd.load(str(real))[0].asnumpy().tolist() == [7.0]
    dangling = tmp_path / "dangling.params"
    dangling.symlink_to(tmp_path / "real" / "new.params")
    nd.save(str(dangling), [nd.ones((1,))])  # creates the target, as open(..., "w") does
    assert dangling.is_symlink() and (tmp_path / "real" / "new.params").is_file()
    assert sorted(os.listdir(tmp_path / "real")) == ["new.params", "w.params"]


def _dead_pid() -> int:
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True).stdout)


def test_the_next_save_removes_the_temporaries_killed_saves_left_in_its_folder(tmp_path):
    from hybridlab.ndarray_io import _HOST

    path = tmp_path / "big.params"
    nd.save(str(path), {"w": nd.ones((4,))})
    dead = _dead_pid()
    stale = [tmp_path / f".tmp-net-{epoch:04d}.params.{dead}@{_HOST}-abc12345"
             for epoch in (1, 2, 3)]  # three epoch saves killed before their renames
    for file in stale:
        file.write_bytes(b"x" * 1000)
    live = tmp_path / f".tmp-big.params.{os.getppid()}@{_HOST}-def45678"  # still running
    live.write_bytes(b"z")
    elsewhere = tmp_path / f".tmp-big.params.{dead}@another-host-abc12345"  # a shared folder
    elsewhere.write_bytes(b"y")
    nd.save(str(path), {"w": nd.zeros((4,))})
    assert not any(file.exists() for file in stale)
    assert live.exists() and elsewhere.exists()
    assert remove_stale_temporaries(str(path)) == []


def test_a_killed_save_leaves_a_temporary_the_next_save_of_another_file_removes(tmp_path):
    script = textwrap.dedent(f"""
        import os
        import hybridlab.ndarray_io as io
        from hybridlab import nd
        real = io.commit_temporary
        def commit(temporary, fname):
            print(temporary, flush=True)
            os.kill(os.getpid(), 9)  # killed between the write and the rename
        io.commit_temporary = commit
        nd.save({str(tmp_path / "net-0001.params")!r}, {{"w": nd.ones((1000,))}})
    """)
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    left = child.stdout.strip()
    assert left and os.path.exists(left)
    nd.save(str(tmp_path / "net-0002.params"), {"w": nd.ones((2,))})
    assert not os.path.exists(left)
    assert sorted(os.listdir(tmp_path)) == ["net-0002.params"]


def test_saving_to_a_device_writes_into_it_and_never_replaces_it(tmp_path):
    before = os.stat("/dev/null")
    nd.save("/dev/null", {"w": nd.ones((4,))})  # MXNet's habit: write and throw away
    sym.var("a").save("/dev/null")
    after = os.stat("/dev/null")
    assert (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)
    with pytest.raises(IsADirectoryError, match="is a folder"):
        nd.save(str(tmp_path), [nd.ones((1,))])
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    nd.save(str(fifo), [nd.ones((2,))])
    assert nd.load_frombuffer(reader.communicate(timeout=30)[0])[0].asnumpy().tolist() == [1, 1]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_hard_linked_file_keeps_its_old_contents_under_its_other_name(tmp_path):
    path, other = tmp_path / "w.params", tmp_path / "also.params"
    nd.save(str(path), [nd.ones((2,))])
    os.link(path, other)
    with pytest.warns(UserWarning, match="1 other name.*keep the old contents"):
        nd.save(str(path), [nd.zeros((2,))])
    assert nd.load(str(other))[0].asnumpy().tolist() == [1, 1]  # the documented price
    assert nd.load(str(path))[0].asnumpy().tolist() == [0, 0]


def _export_pair(tmp_path, value):
    net = nn.Dense(2, in_units=3)
    net.initialize()
    net.weight.set_data(nd.full((2, 3), value))
    net.hybridize()
    net(nd.ones((1, 3)))
    prefix = str(tmp_path / "net")
    net.export(prefix)
    return prefix + "-symbol.json", prefix + "-0000.params"


def test_imports_refuses_json_and_params_from_different_exports(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    symbol_file, param_file = _export_pair(tmp_path / "a", 1.0)
    _, other_params = _export_pair(tmp_path / "b", 2.0)
    net = SymbolBlock.imports(symbol_file, "data", param_file)
    assert net(nd.ones((1, 3))).asnumpy().tolist() == [[3.0, 3.0]]
    with pytest.raises(ModelFileError) as refused:
        SymbolBlock.imports(symbol_file, "data", other_params)
    assert symbol_file in str(refused.value) and other_params in str(refused.value)
    assert "not one export" in str(refused.value)


def test_an_export_killed_between_its_two_files_is_detected(tmp_path):
    prefix = str(tmp_path / "net")
    script = textwrap.dedent(f"""
        import os, time
        import hybridlab.ndarray_io as io
        from hybridlab import nd
        from hybridlab.gluon import nn
        net = nn.Dense(2, in_units=3)
        net.initialize()
        net.hybridize()
        net(nd.ones((1, 3)))
        net.export({prefix!r})
        net.weight.set_data(nd.full((2, 3), 5.0))
        real = io.commit_temporary
        def commit(temporary, fname):
            real(temporary, fname)
            if fname.endswith(".params"):
                print("params renamed", flush=True)
                time.sleep(30)  # killed here: new params, the old JSON
        io.commit_temporary = commit
        net.export({prefix!r})
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "params renamed"
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    with pytest.raises(ModelFileError, match="not one export"):
        SymbolBlock.imports(prefix + "-symbol.json", "data", prefix + "-0000.params")


def test_every_epoch_exported_with_one_graph_loads_with_the_shared_json(tmp_path):
    net = nn.Dense(2, in_units=3)
    net.initialize()
    net.hybridize()
    net(nd.ones((1, 3)))
    prefix = str(tmp_path / "net")
    for epoch in (1, 2, 3):  # MXNet's checkpoints: one -symbol.json, a .params per epoch
        net.weight.set_data(nd.full((2, 3), float(epoch)))
        net.export(prefix, epoch=epoch)
    for epoch in (1, 2, 3):
        loaded = SymbolBlock.imports(prefix + "-symbol.json", "data",
                                     f"{prefix}-{epoch:04d}.params")
        assert loaded(nd.ones((1, 3))).asnumpy().tolist() == [[3.0 * epoch] * 2]
    net.weight.set_data(nd.full((2, 3), 7.0))
    net.export(prefix, epoch=2)  # epoch 2 again: its old weights are no longer vouched for
    again = SymbolBlock.imports(prefix + "-symbol.json", "data", prefix + "-0002.params")
    assert again(nd.ones((1, 3))).asnumpy().tolist() == [[21.0, 21.0]]
    wider = nn.Dense(4, in_units=3)  # another graph under the same prefix
    wider.initialize()
    wider.hybridize()
    wider(nd.ones((1, 3)))
    wider.export(prefix, epoch=4)
    with pytest.raises(ModelFileError, match="not one export.*epoch 0004"):
        SymbolBlock.imports(prefix + "-symbol.json", "data", prefix + "-0001.params")
    SymbolBlock.imports(prefix + "-symbol.json", "data", prefix + "-0004.params")


def test_a_json_with_one_bare_digest_still_checks_its_params(tmp_path):
    import re

    symbol_file, param_file = _export_pair(tmp_path, 1.0)
    text = open(symbol_file).read()
    old_style = re.sub(r'"0000:([0-9a-f]{64})"', r'"\1"', text)  # as hybridlab 0.2 wrote it
    assert old_style != text
    open(symbol_file, "w").write(old_style)
    SymbolBlock.imports(symbol_file, "data", param_file)
    nd.save(param_file, {"arg:dense0_weight": nd.zeros((2, 3)), "arg:dense0_bias": nd.zeros(2)})
    with pytest.raises(ModelFileError, match="not one export"):
        SymbolBlock.imports(symbol_file, "data", param_file)
