"""Fuzzing the loaders: whatever the bytes, a documented error or a correct load.

A few hundred examples each in ``make test``; ``make fuzz`` runs the same tests with
``HYBRIDLAB_FUZZ_EXAMPLES=10000``. Every outcome must be :class:`ModelFileError` /
:class:`ArrayFileError` or a load that round-trips; the arrays a load makes never exceed
the file's size, and no load -- refused or not -- peaks above 4x the file's size + 64 MiB
(NOTE [Load memory], measured with tracemalloc, which sees numpy's buffers too). The
crafted worst cases at the end are what the loaders' pricing was calibrated on. The
counts (examples, loads, documented errors, the largest peak) are printed at the end of
the run (``tests/conftest.py``).
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import struct
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hybridlab import nd, sym
from hybridlab.errors import ArrayFileError, ModelFileError

EXAMPLES = int(os.environ.get("HYBRIDLAB_FUZZ_EXAMPLES", "0")) or 200
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
pytestmark = pytest.mark.fuzz
MIB = 2**20
TALLY: collections.Counter = collections.Counter()  # printed by conftest's summary hook
PEAK_RATIO = {"worst": 0.0}  # the largest (peak - 64 MiB) / size seen, for the summary


@contextlib.contextmanager
def bounded_memory(size: int, loader: str):
    """Fail if the block's peak allocation exceeds 4 x size + 64 MiB; count the outcome."""
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    try:
        yield
    except (ModelFileError, ArrayFileError):
        TALLY[f"{loader}: documented error"] += 1
        raise
    except Exception:
        TALLY[f"{loader}: UNDOCUMENTED exception"] += 1
        raise
    else:
        TALLY[f"{loader}: loaded"] += 1
    finally:
        peak = tracemalloc.get_traced_memory()[1] - base
        if started:
            tracemalloc.stop()
        TALLY[f"{loader}: examples"] += 1
        PEAK_RATIO["worst"] = max(PEAK_RATIO["worst"], (peak - 64 * MIB) / max(size, 1))
        if peak > 4 * size + 64 * MIB:
            TALLY[f"{loader}: OVER the memory bound"] += 1
            raise AssertionError(f"{loader} peaked at {peak} bytes for a {size}-byte file")


def _load_symbol(path) -> object:
    with bounded_memory(os.path.getsize(path), "sym.load"):
        return sym.load(str(path))


def _load_arrays(path) -> object:
    with bounded_memory(os.path.getsize(path), "nd.load"):
        return nd.load(str(path))


def _symbol_bytes() -> bytes:
    x = sym.var("x", shape=(2, 3))
    net = sym.FullyConnected(sym.relu(x), num_hidden=4, name="fc")
    return sym.Group([sym.softmax(net), sym.split(x, num_outputs=3, axis=1)[1]]
                     ).tojson().encode()


def _params_bytes(tmp_path) -> bytes:
    path = str(tmp_path / "seed.params")
    nd.save(path, {"arg:w": nd.ones((4, 3)), "aux:m": nd.array([1, 2], dtype="int64"),
                   "arg:b": nd.zeros((4,), dtype="float16")})
    with open(path, "rb") as file:
        return file.read()


_EDITS = st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255),
                            st.sampled_from(["set", "insert", "delete"])), min_size=1,
                  max_size=6)


def _edit(content: bytes, edits, cut: int | None) -> bytes:
    data = bytearray(content)
    for position, value, kind in edits:
        at = position % (len(data) + 1)
        if kind == "set" and data:
            data[at % len(data)] = value
        elif kind == "insert":
            data.insert(at, value)
        elif data:
            del data[at % len(data)]
    return bytes(data[:cut] if cut is not None else data)


@FUZZ
@given(_EDITS, st.one_of(st.none(), st.integers(0, 2000)))
def test_mutated_symbol_files_load_or_raise_model_file_error(tmp_path, edits, cut):
    path = tmp_path / "model-symbol.json"
    path.write_bytes(_edit(_symbol_bytes(), edits, cut))
    try:
        loaded = _load_symbol(path)
    except ModelFileError as err:
        assert str(path) in str(err)
        return
    assert sym.load_json(loaded.tojson()).tojson() == loaded.tojson()


@FUZZ
@given(_EDITS, st.one_of(st.none(), st.integers(0, 400)))
def test_mutated_params_files_load_or_raise_array_file_error(tmp_path, edits, cut):
    content = _edit(_params_bytes(tmp_path), edits, cut)
    path = tmp_path / "fuzzed.params"
    path.write_bytes(content)
    try:
        loaded = _load_arrays(path)
    except ArrayFileError as err:
        assert "fuzzed.params" in str(err)
        return
    arrays = list(loaded.values()) if isinstance(loaded, dict) else loaded
    assert sum(a.size * a.dtype.itemsize for a in arrays) <= len(content)
    for array in arrays:
        np.asarray(array.asnumpy())  # every array is readable


@FUZZ
@given(st.binary(max_size=512))
def test_random_bytes_are_refused_by_both_loaders(tmp_path, content):
    for name, load, error in (("r-symbol.json", _load_symbol, ModelFileError),
                              ("r.params", _load_arrays, ArrayFileError)):
        path = tmp_path / name
        path.write_bytes(content)
        try:
            load(path)
        except error:
            pass


# --- the worst cases for memory: each would peak far above the bound if parsed naively ----
def _chain(count: int, op: str = "relu", attrs: dict | None = None) -> str:
    nodes = [{"op": "null", "name": "x", "inputs": []}] + [
        {"op": op, "name": f"r{i}", "inputs": [[i, 0, 0]], **({"attrs": attrs} if attrs else {})}
        for i in range(count)]
    return json.dumps({"nodes": nodes, "arg_nodes": [0], "heads": [[count, 0, 0]]})


WORST_JSON = {
    "empty lists": lambda: "[" + ",".join(["[]"] * 2_000_000) + "]",
    "empty objects": lambda: "[" + ",".join(["{}"] * 2_000_000) + "]",
    "empty strings": lambda: "[" + ",".join(['""'] * 2_000_000) + "]",
    "integers": lambda: "[" + ",".join(["1000"] * 2_000_000) + "]",
    "escapes": lambda: '{"nodes": ["' + "a\\n" * 3_000_000 + '"]}',
    "astral text": lambda: '{"nodes": ["' + "\U0001F600" * 3_000_000 + '"]}',
    "30 000 relu nodes": lambda: _chain(30_000),
    "60 000 relu nodes": lambda: _chain(60_000),
    "30 000 softrelu (composite) nodes": lambda: _chain(30_000, "softrelu"),
    "15 000 LeakyReLU nodes": lambda: _chain(15_000, "LeakyReLU",
                                             {"act_type": "leaky", "slope": "0.1"}),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(WORST_JSON))
def test_symbol_files_built_to_exhaust_memory_stay_within_the_bound(tmp_path, case):
    path = tmp_path / "worst-symbol.json"
    path.write_text(WORST_JSON[case](), encoding="utf-8")
    with contextlib.suppress(ModelFileError):
        _load_symbol(path)  # refused or loaded: the bound holds either way


@pytest.mark.slow
def test_the_most_arrays_a_params_file_may_hold_stay_within_the_bound(tmp_path):
    from hybridlab import ndarray_io

    count = ndarray_io.MAX_ARRAYS
    entry = struct.pack("<Iiiqiii", ndarray_io.ARRAY_MAGIC_V2, 0, 1, 0, 1, 0, 0)  # shape (0,)
    names = b"".join(struct.pack("<Q", 6) + f"{i:06d}".encode() for i in range(count))
    path = tmp_path / "many.params"
    path.write_bytes(struct.pack("<QQQ", ndarray_io.LIST_MAGIC, 0, count) + entry * count
                     + struct.pack("<Q", count) + names)
    assert len(_load_arrays(path)) == count
