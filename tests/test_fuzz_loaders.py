"""Fuzzing the loaders: whatever the bytes, a documented error or a correct load.

A few hundred examples each in ``make test``; ``make fuzz`` runs the same tests with
``HYBRIDLAB_FUZZ_EXAMPLES=10000``. Every outcome must be :class:`ModelFileError` /
:class:`ArrayFileError` or a load that round-trips; the arrays a load makes never exceed
the file's size.
"""

from __future__ import annotations

import os

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
        loaded = sym.load(str(path))
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
        loaded = nd.load(str(path))
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
    for name, load, error in (("r-symbol.json", sym.load, ModelFileError),
                              ("r.params", nd.load, ArrayFileError)):
        path = tmp_path / name
        path.write_bytes(content)
        try:
            load(str(path))
        except error:
            pass
