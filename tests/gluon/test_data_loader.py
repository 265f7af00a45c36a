"""gluon.data: datasets, samplers, and the DataLoader's worker processes (clean shutdown,
a worker's error, a start while the engine is busy, Ctrl-C)."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import hybridlab as mx
from hybridlab import engine, gluon, nd
from hybridlab.gluon.data import dataloader

FIXTURES = pathlib.Path(__file__).parent.parent / "fixtures" / "mxnet" / "recordio"


class Squares(gluon.data.Dataset):
    """Sample i is (i, i*i); sample 13 fails when ``fail`` is set."""

    def __init__(self, length: int = 20, fail: bool = False) -> None:
        self.length, self.fail = length, fail

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i):
        if self.fail and i == 13:
            raise KeyError(f"sample {i} is missing")
        return np.float32(i), np.float32(i * i)


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting to be reaped."""
    try:
        state = pathlib.Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in state


def test_dataset_views_are_lazy_and_mxnets():
    data = gluon.data.SimpleDataset(list(range(10)))
    assert list(data.transform(lambda x: x * 2).filter(lambda x: x % 4 == 0)) == [0, 4, 8, 12,
                                                                                    16]
    assert [len(data.shard(4, i)) for i in range(4)] == [3, 3, 2, 2]
    assert list(data.take(3)) == [0, 1, 2] and data.take(None) is data
    pairs = gluon.data.ArrayDataset(np.arange(4), np.arange(4) * 10)
    assert pairs.transform_first(lambda x: -x)[2] == (-2, 20)


def test_samplers_and_rollover():
    batches = gluon.data.BatchSampler(gluon.data.SequentialSampler(7), 3, "rollover")
    assert list(batches) == [[0, 1, 2], [3, 4, 5]]
    assert list(batches) == [[6, 0, 1], [2, 3, 4]]  # the rest starts the next epoch
    assert list(gluon.contrib.data.IntervalSampler(7, 3)) == [0, 3, 6, 1, 4, 2, 5]
    assert list(gluon.contrib.data.IntervalSampler(7, 3, rollover=False)) == [0, 3, 6]
    with pytest.raises(ValueError, match="shuffle cannot be given with a sampler"):
        gluon.data.DataLoader(Squares(), 2, shuffle=True, sampler=[0, 1])


@pytest.mark.parametrize("workers, threads", [(0, False), (2, False), (2, True)])
def test_workers_give_the_batches_in_order(workers, threads):
    loader = gluon.data.DataLoader(Squares(), batch_size=3, num_workers=workers,
                                   thread_pool=threads, last_batch="discard")
    with loader:
        for _ in range(2):  # two epochs on the same workers
            got = [(x.asnumpy().tolist(), y.asnumpy().tolist()) for x, y in loader]
            assert got == [([i, i + 1, i + 2], [i * i, (i + 1) ** 2, (i + 2) ** 2])
                           for i in range(0, 18, 3)]
            assert isinstance(got, list) and len(loader) == 6


def test_close_stops_every_worker_process():
    loader = gluon.data.DataLoader(Squares(), batch_size=2, num_workers=3)
    first = next(iter(loader))
    assert first[0].shape == (2,)
    pids = [w.pid for w in loader._workers.workers]
    assert all(_alive(pid) for pid in pids)
    loader.close()
    assert not any(_alive(pid) for pid in pids)  # ended and reaped, not left running


def test_a_workers_error_is_raised_in_the_caller_with_its_traceback():
    loader = gluon.data.DataLoader(Squares(fail=True), batch_size=4, num_workers=2)
    with pytest.raises(KeyError, match="sample 13 is missing") as caught:
        list(loader)
    note = "\n".join(caught.value.__notes__)
    assert "DataLoader worker, reading the samples [12, 13, 14, 15]" in note
    assert "__getitem__" in note and "raise KeyError" in note  # the worker's own frames
    loader.close()


def test_a_loader_started_while_the_engine_is_busy_forks_safely(monkeypatch):
    """NOTE [Starting workers safely]: the workers are forked while an engine worker thread
    runs an op the dataset's arrays depend on. The loader waits for the engine first (the
    op is released only once that wait began), and the children start a fresh engine: they
    neither hang on the parent's locks nor miss the op's result."""
    gate, waited = threading.Event(), []
    real_waitall = nd.waitall

    def waitall() -> None:  # the loader's wait: the op is still running when it starts
        waited.append(gate.is_set())
        gate.set()
        real_waitall()

    monkeypatch.setattr(nd, "waitall", waitall)
    with engine.engine_scope("ThreadedEngine") as threaded:
        x = nd.ones((3,))

        def busy() -> None:
            gate.wait(timeout=60)
            x._data = x._data + 41

        threaded.push(busy, [], [x._var], "busy")
        with gluon.data.DataLoader(gluon.data.SimpleDataset([x, x * 2]), batch_size=1,
                                   num_workers=2) as loader:
            got = [b.asnumpy().tolist() for b in loader]
    assert waited == [False]
    assert got == [[[42.0] * 3], [[84.0] * 3]]


def test_spawned_workers_need_a_picklable_dataset(monkeypatch):
    monkeypatch.setattr(dataloader, "_start_method", lambda: "spawn")
    with pytest.raises(TypeError, match="cannot be pickled.*thread_pool=True"):
        gluon.data.DataLoader(gluon.data.SimpleDataset([1, 2]).transform(lambda v: v),
                              batch_size=1, num_workers=2)


def test_ctrl_c_leaves_no_worker_process(tmp_path):
    """The caller gets KeyboardInterrupt; the workers ignore it, and end with the caller."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import os, threading
        from hybridlab import gluon

        class Stuck(gluon.data.Dataset):
            def __len__(self):
                return 100
            def __getitem__(self, i):
                print(os.getpid(), flush=True)  # (the worker's pid, for the test)
                threading.Event().wait()  # a sample that never comes

        loader = gluon.data.DataLoader(Stuck(), batch_size=1, num_workers=2, prefetch=2)
        next(iter(loader))
    """))
    # Ctrl-C's default action in the child, as in a terminal: a child inherits an ignored
    # SIGINT (a shell ignores it for the commands it starts in the background, as a CI
    # runner may run `make test`), and Python then never raises KeyboardInterrupt
    process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                               env={**os.environ, "PYTHONPATH": str(pathlib.Path(
                                   mx.__file__).parent.parent)},
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    pids = sorted({int(process.stdout.readline()) for _ in range(2)})
    assert len(pids) == 2 and all(_alive(pid) for pid in pids)
    process.send_signal(signal.SIGINT)
    _, errors = process.communicate(timeout=60)
    assert "KeyboardInterrupt" in errors
    assert not any(_alive(pid) for pid in pids)


def test_record_file_dataset_reads_mxnets_records(tmp_path):
    dataset = gluon.data.RecordFileDataset(str(FIXTURES / "indexed.rec"))
    assert len(dataset) == 11 and dataset[1] == b"a"
    loader = gluon.data.DataLoader(dataset, batch_size=4, num_workers=2,
                                   batchify_fn=lambda records: [len(r) for r in records])
    assert [b for batch in loader for b in batch][:5] == [0, 1, 2, 3, 4]
    loader.close()
