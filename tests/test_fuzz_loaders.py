"""Fuzzing the two loaders that read files from elsewhere: symbol JSON and ``.params``.

Each example starts from a real ``export()`` of a small network (Dense, BatchNorm, relu)
and mutates it: JSON values replaced, deleted or inserted anywhere in the document (huge
shapes, negative or out-of-range inputs, unknown ops, wrong types), raw bytes flipped,
cut or inserted; for ``.params`` also every declared size (count, ndim, each dimension,
name lengths) set to extreme values. Every outcome must be a documented error
(:class:`ModelFileError` / :class:`ArrayFileError`, naming the file) or a correct load,
and no load may trace more than 4x the file's size plus a constant in memory.

``make test`` runs ``HYBRIDLAB_FUZZ_EXAMPLES`` examples per test (default 200);
``make fuzz`` runs 10 000 and writes the outcome counts to ``HYBRIDLAB_FUZZ_REPORT``.
"""

from __future__ import annotations

import collections
import json
import os
import struct
import tempfile
import tracemalloc
from datetime import timedelta

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hybridlab import nd
from hybridlab import symbol as sym
from hybridlab.errors import ArrayFileError, ModelFileError
from hybridlab.gluon import nn
from hybridlab.ops import registry

EXAMPLES = int(os.environ.get("HYBRIDLAB_FUZZ_EXAMPLES", "200"))
FUZZ = settings(max_examples=EXAMPLES, deadline=timedelta(seconds=5), database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
MEMORY_CONSTANT = 2 << 20  # bytes every load may use whatever the file's size
OUTCOMES: collections.Counter = collections.Counter()
_FOLDER = tempfile.mkdtemp(prefix="hybridlab-fuzz-")


def _seed_files() -> tuple[str, bytes]:
    net = nn.HybridSequential()
    net.add(nn.Dense(4), nn.BatchNorm(), nn.Activation("relu"), nn.Dense(2))
    net.initialize()
    net.hybridize()
    net(nd.ones((2, 3)))
    prefix = os.path.join(_FOLDER, "seed")
    net.export(prefix)
    with open(prefix + "-symbol.json", encoding="utf-8") as f, \
            open(prefix + "-0000.params", "rb") as g:
        return f.read(), g.read()


SEED_JSON, SEED_PARAMS = _seed_files()


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    report = os.environ.get("HYBRIDLAB_FUZZ_REPORT")
    if report:
        with open(report, "a", encoding="utf-8") as f:
            for key, count in sorted(OUTCOMES.items()):
                f.write(f"{key[0]:<7} {key[1]:<40} {count}\n")


def _load_bounded(load, fname: str, size: int):
    """``load(fname)``, checking the memory it traced stays within the bound."""
    tracemalloc.start()
    try:
        result = load(fname)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= 4 * size + MEMORY_CONSTANT, f"{peak} bytes traced for a {size}-byte file"
    return result


def _write(name: str, data: bytes) -> str:
    fname = os.path.join(_FOLDER, name)
    with open(fname, "wb") as f:
        f.write(data)
    return fname


# --- symbol JSON ---------------------------------------------------------------------------
_NASTY_TEXT = st.sampled_from([
    "(100000, 100000, 100000)", "(10000000000000,)", "(-1,)", "()", "(0, 3)", "1e309", "nan",
    "-1", "0", "99999999999999999999", "relu", "_zeros", "__import__('os')", "null",
    "float64", "int8", "bool", "{", "\udcff" * 0 + "\u00e9", "True", "(2, 3)", "[1, 2]"])
_OPS = st.sampled_from(sorted(registry.OPS) + ["NoSuchOp", "", "null"])
_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
    | st.text(max_size=12) | _NASTY_TEXT | _OPS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.text(max_size=6) | st.sampled_from(["op", "name", "inputs", "attrs", "shape",
                                               "__shape__", "__dtype__", "num_hidden"]),
        inner, max_size=4),
    max_leaves=12)


@st.composite
def _mutated_json(draw) -> bytes:
    document = json.loads(SEED_JSON)
    for _ in range(draw(st.integers(1, 4))):
        _mutate_tree(draw, document)
    text = json.dumps(document).encode("utf-8")
    if draw(st.integers(0, 4)) == 0:  # sometimes damage the bytes as well
        text = _mutate_bytes(draw, text)
    return text


def _mutate_tree(draw, document) -> None:
    """Walk to a random place in the document and replace, delete or insert a value."""
    parent = document
    while True:
        keys = list(parent) if isinstance(parent, dict) else list(range(len(parent)))
        if not keys:
            break
        key = draw(st.sampled_from(keys))
        child = parent[key]
        if isinstance(child, (dict, list)) and child and draw(st.integers(0, 3)):
            parent = child
            continue
        action = draw(st.sampled_from(["replace", "delete", "insert"]))
        if action == "replace":
            parent[key] = draw(_JSON_VALUES)
        elif action == "delete":
            del parent[key]
        elif isinstance(parent, list):
            parent.insert(key, draw(_JSON_VALUES))
        else:
            parent[draw(st.text(max_size=8))] = draw(_JSON_VALUES)
        return


def _mutate_bytes(draw, data: bytes) -> bytes:
    data = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        action = draw(st.sampled_from(["flip", "cut", "insert"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if action == "flip" and data:
            data[at] = draw(st.integers(0, 255))
        elif action == "cut":
            del data[at:at + draw(st.integers(1, 64))]
        else:
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
    return bytes(data)


@FUZZ
@given(_mutated_json())
def test_fuzzed_symbol_json_loads_or_is_a_model_file_error(text):
    fname = _write("fuzz-symbol.json", text)
    try:
        loaded = _load_bounded(sym.load, fname, len(text))
    except ModelFileError as err:
        assert "fuzz-symbol.json" in str(err)
        OUTCOMES["json", "ModelFileError"] += 1
        return
    # a correct load: a graph that lists its inputs and writes itself out again
    assert loaded.list_arguments() is not None
    again = sym.load_json(loaded.tojson())
    assert again.tojson() == loaded.tojson()
    OUTCOMES["json", "loaded"] += 1


# --- .params -------------------------------------------------------------------------------
def _header_offsets(data: bytes) -> list[tuple[int, str]]:
    """(offset, struct format) of every size field the seed file declares."""
    fields = [(16, "<Q")]  # the number of arrays
    at = 24
    (count,) = struct.unpack_from("<Q", data, 16)
    for _ in range(count):
        (ndim,) = struct.unpack_from("<i", data, at + 8)
        fields.append((at + 8, "<i"))
        shape = struct.unpack_from(f"<{ndim}q", data, at + 12)
        fields += [(at + 12 + 8 * i, "<q") for i in range(ndim)]
        (flag,) = struct.unpack_from("<i", data, at + 12 + 8 * ndim + 8)
        fields.append((at + 12 + 8 * ndim + 8, "<i"))
        at += 12 + 8 * ndim + 12 + int(np.prod(shape)) * 4
        assert flag == 0  # the seed is all float32
    fields.append((at, "<Q"))  # the number of names
    at += 8
    for _ in range(count):
        (length,) = struct.unpack_from("<Q", data, at)
        fields.append((at, "<Q"))
        at += 8 + length
    assert at == len(data)
    return fields


_FIELDS = _header_offsets(SEED_PARAMS)
_EXTREMES = {"<Q": [0, 1, 2**31, 2**63 - 1, 2**64 - 1], "<i": [-2**31, -1, 0, 1, 33, 2**31 - 1],
             "<q": [-2**63, -1, 0, 1, 2**31, 10**12, 2**63 - 1]}


@st.composite
def _mutated_params(draw) -> bytes:
    data = bytearray(SEED_PARAMS)
    for _ in range(draw(st.integers(0, 3))):
        offset, fmt = draw(st.sampled_from(_FIELDS))
        value = draw(st.sampled_from(_EXTREMES[fmt]) | st.integers(0, 64))
        if fmt != "<Q" or value >= 0:
            struct.pack_into(fmt, data, offset, value)
    if draw(st.booleans()):
        data = bytearray(_mutate_bytes(draw, bytes(data)))
    return bytes(data)


@FUZZ
@given(_mutated_params())
def test_fuzzed_params_load_or_are_an_array_file_error(data):
    fname = _write("fuzz.params", data)
    try:
        loaded = _load_bounded(nd.load, fname, len(data))
    except ArrayFileError as err:
        assert "fuzz.params" in str(err)
        OUTCOMES["params", "ArrayFileError"] += 1
        return
    arrays = list(loaded.values()) if isinstance(loaded, dict) else loaded
    assert sum(a.size * a.dtype.itemsize for a in arrays) <= len(data)
    OUTCOMES["params", "loaded"] += 1
