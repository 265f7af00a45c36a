"""Loading and saving a 100 MB ``.params`` file: hybridlab's MXNet format vs numpy's own.

Run from the repository root: ``PYTHONPATH=. python3 benchmarks/params_io.py [rounds]``.

The arrays are a model's worth of float32 weights (a few large matrices, their biases and
some small BatchNorm-sized vectors), 100 MB in all. Each round times, interleaved, in
random order, with the files in the page cache (a warm read, as a notebook reloading a
model has it):

* load:  ``nd.load`` (MXNet's format; bounded reads straight into 64-byte-aligned
  buffers, wrapped as NDArrays) vs ``np.load`` of an ``.npz`` holding the same arrays,
  every array read (``dict(np.load(...))``);
* save:  ``nd.save`` (atomic: a temporary file, flush, **fsync**, rename) vs
  ``np.savez`` of the same arrays (no fsync, so its data may still sit in the page cache
  when it returns), and ``np.savez`` followed by an fsync, the like-for-like comparison;
  and ``nd.save`` with ``os.fsync`` swapped for a no-op during the call, to show what the
  format's own writing costs apart from waiting for the disk.

Target (issue 12, section 5): each hybridlab time <= 1.5 x numpy's (medians). The machine
may be shared: the medians and ratios of one run are what to compare, not absolute times.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import tempfile
import time

import numpy as np

from hybridlab import nd

MB = 1 << 20


def model_arrays(total_bytes: int = 100 * MB) -> dict[str, np.ndarray]:
    """Float32 weights adding up to ``total_bytes``: 4 large matrices and small vectors."""
    rng = np.random.default_rng(0)
    arrays, left, i = {}, total_bytes, 0
    while left > 0:
        rows = min(2048, max(1, left // (4 * 3072)))
        arrays[f"arg:layer{i}_weight"] = rng.standard_normal((rows, 3072), np.float32)
        arrays[f"arg:layer{i}_bias"] = rng.standard_normal(rows, np.float32)
        arrays[f"aux:layer{i}_running_mean"] = rng.standard_normal(rows, np.float32)
        left -= 4 * rows * 3075
        i += 1
    return arrays


def _fsynced_savez(fname: str, arrays: dict[str, np.ndarray]) -> None:
    with open(fname, "wb") as f:
        np.savez(f, **arrays)
        f.flush()
        os.fsync(f.fileno())


def _unsynced_save(fname: str, arrays: dict) -> None:
    """``nd.save`` with fsync made a no-op for the call: the format's cost without the disk."""
    fsync, os.fsync = os.fsync, lambda fd: None
    try:
        nd.save(fname, arrays)
    finally:
        os.fsync = fsync


def main(rounds: int = 9) -> None:
    arrays = model_arrays()
    as_nd = {key: nd.array(values) for key, values in arrays.items()}
    total = sum(a.nbytes for a in arrays.values())
    folder = tempfile.mkdtemp(prefix="params_io-")
    params, npz = os.path.join(folder, "model.params"), os.path.join(folder, "model.npz")
    nd.save(params, as_nd)
    np.savez(npz, **arrays)
    cases = {
        "load  nd.load (MXNet format)": lambda: nd.load(params),
        "load  np.load (.npz)": lambda: dict(np.load(npz)),
        "save  nd.save (atomic, fsync)": lambda: nd.save(params, as_nd),
        "save  nd.save, fsync a no-op": lambda: _unsynced_save(params, as_nd),
        "save  np.savez": lambda: np.savez(npz, **arrays),
        "save  np.savez + fsync": lambda: _fsynced_savez(npz, arrays),
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        order = list(cases)
        random.shuffle(order)
        for name in order:
            start = time.perf_counter()
            cases[name]()
            times[name].append(time.perf_counter() - start)
    loaded = nd.load(params)
    assert all(np.array_equal(loaded[k].asnumpy(), v) for k, v in arrays.items())
    median = {name: statistics.median(values) * 1e3 for name, values in times.items()}
    print(f"{len(arrays)} arrays, {total / MB:.1f} MB, {rounds} interleaved rounds, medians "
          f"(the machine may be shared)")
    for name, ms in median.items():
        spread = (max(times[name]) - min(times[name])) * 1e3
        print(f"  {name:<32} {ms:8.1f} ms  (min..max spread {spread:6.1f} ms)")
    load = median["load  nd.load (MXNet format)"] / median["load  np.load (.npz)"]
    save = median["save  nd.save (atomic, fsync)"] / median["save  np.savez"]
    like = median["save  nd.save (atomic, fsync)"] / median["save  np.savez + fsync"]
    bytes_only = median["save  nd.save, fsync a no-op"] / median["save  np.savez"]
    print(f"load: nd.load / np.load = {load:.2f} x   (target <= 1.5)")
    print(f"save: nd.save / np.savez = {save:.2f} x   (target <= 1.5); "
          f"vs np.savez + fsync = {like:.2f} x; without fsync vs np.savez = {bytes_only:.2f} x")
    for name in (params, npz):
        os.remove(name)
    os.rmdir(folder)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 9)
