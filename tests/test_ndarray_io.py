"""MXNet's NDArray file format: round trips, bounded reading of bad files, atomic writes."""

import os
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from hybridlab import nd, ndarray_io
from hybridlab.errors import ArrayFileError

_DTYPES = [np.dtype(t) for t in ndarray_io.DTYPE_FLAGS.values()]


@settings(max_examples=40, deadline=None)
@given(st.lists(hnp.arrays(st.sampled_from(_DTYPES), hnp.array_shapes(min_dims=1, max_dims=4,
                                                                       min_side=0, max_side=4)),
                max_size=4),
       st.booleans())
def test_round_trip_keeps_values_dtypes_and_order(tmp_path_factory, arrays, as_dict):
    fname = str(tmp_path_factory.mktemp("rt") / "arrays.nd")
    data = {f"a{i}": a for i, a in enumerate(arrays)} if as_dict and arrays else arrays
    ndarray_io.write_arrays(fname, data)
    loaded = ndarray_io.read_arrays(fname)
    assert type(loaded) is type(data)
    pairs = zip(loaded.values(), data.values()) if as_dict and arrays else zip(loaded, data)
    for got, want in pairs:
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()  # bit for bit, NaNs included
        assert got.size == 0 or got.ctypes.data % 64 == 0  # (an empty array has no data)


def _small_file(tmp_path):
    fname = str(tmp_path / "small.params")
    nd.save(fname, {"w": nd.array([[1, 2], [3, 4]]), "b": nd.array([5], dtype="int64")})
    with open(fname, "rb") as f:
        return fname, f.read()


def test_every_truncation_is_an_array_file_error_naming_the_file(tmp_path):
    fname, content = _small_file(tmp_path)
    cut = str(tmp_path / "cut.params")
    for length in range(len(content)):
        with open(cut, "wb") as f:
            f.write(content[:length])
        with pytest.raises(ArrayFileError, match="cut.params"):
            nd.load(cut)


def _patched(tmp_path, content, offset, fmt, value):
    fname = str(tmp_path / "bad.params")
    with open(fname, "wb") as f:
        f.write(content[:offset] + struct.pack(fmt, value)
                + content[offset + struct.calcsize(fmt):])
    return fname


# offsets in _small_file: 24 header bytes, then array 0: magic, storage, ndim, shape (2 x 8)
@pytest.mark.parametrize("offset, fmt, value, message", [
    (0, "<Q", 0x113, "not MXNet's array-list magic"),
    (16, "<Q", 2**62, "declares 4611686018427387904 arrays"),
    (24, "<I", 0xF993FAC7, "array 0: array magic 0xf993fac7 is neither MXNet's"),
    (24, "<I", 0xF993FAC8, "array 0: 0 dimensions in a legacy array"),
    (28, "<i", 2, "array 0: storage type csr"),
    (32, "<i", 1000, "array 0: 1000 dimensions"),
    (36, "<q", 2**40, r"array 0: shape \(1099511627776, 2\) of float32 needs "),
    (36, "<q", -3, "array 0: shape .* negative"),
    (52, "<i", 7, "array 0: device type 7"),
    (60, "<i", 12, "array 0: dtype flag 12"),
])
def test_corrupted_fields_are_named_before_anything_is_allocated(tmp_path, offset, fmt,
                                                                  value, message):
    _, content = _small_file(tmp_path)
    with pytest.raises(ArrayFileError, match=message):
        nd.load(_patched(tmp_path, content, offset, fmt, value))


def test_names_that_do_not_fit_or_do_not_match_are_refused(tmp_path):
    _, content = _small_file(tmp_path)
    names_at = content.index(struct.pack("<Q", 1) + b"w")
    bad = _patched(tmp_path, content, names_at - 8, "<Q", 1)
    with pytest.raises(ArrayFileError, match="the names: 1 names for 2 arrays"):
        nd.load(bad)
    bad = _patched(tmp_path, content, names_at, "<Q", 2**50)
    with pytest.raises(ArrayFileError, match="name 0 .* needs"):
        nd.load(bad)
    bad = _patched(tmp_path, content, names_at + 8, "<B", 0xFF)
    with pytest.raises(ArrayFileError, match="name 0 is not UTF-8"):
        nd.load(bad)
    with open(bad, "wb") as f:
        f.write(content + b"\0")
    with pytest.raises(ArrayFileError, match="1 unexpected bytes after the last name"):
        nd.load(bad)


def test_an_old_npz_file_is_refused_with_how_to_convert_it(tmp_path):
    np.savez(tmp_path / "old.npz", w=np.ones(2))
    with pytest.raises(ArrayFileError, match="numpy .npz archive"):
        nd.load(str(tmp_path / "old.npz"))


def test_save_refuses_what_mxnet_files_cannot_hold(tmp_path):
    with pytest.raises(TypeError, match="int16.*astype"):
        ndarray_io.write_arrays(str(tmp_path / "x"), [np.ones(2, np.int16)])
    with pytest.raises(ValueError, match="0-d"):
        ndarray_io.write_arrays(str(tmp_path / "x"), [np.float32(1.0).reshape(())])
    assert os.listdir(tmp_path) == []


def test_a_failed_save_leaves_the_old_file_whole_and_no_temporary(tmp_path, monkeypatch):
    fname, content = _small_file(tmp_path)

    def broken(file, array):
        file.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(ndarray_io, "_write_array", broken)
    with pytest.raises(OSError, match="disk full"):
        nd.save(fname, [nd.ones((3,))])
    with open(fname, "rb") as f:
        assert f.read() == content
    assert os.listdir(tmp_path) == ["small.params"]


def test_big_endian_arrays_are_written_little_endian(tmp_path):
    values = np.arange(6, dtype=">f4").reshape(2, 3)
    ndarray_io.write_arrays(str(tmp_path / "x"), [values])
    (loaded,) = ndarray_io.read_arrays(str(tmp_path / "x"))
    assert loaded.dtype == np.float32 and loaded.tolist() == values.tolist()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1,
                max_size=4))
def test_any_corrupted_bytes_load_or_give_an_array_file_error(tmp_path_factory, flips):
    """Whatever bytes change, nd.load either reads arrays or raises ArrayFileError: never
    another exception, never an allocation larger than the file."""
    folder = tmp_path_factory.mktemp("flip")
    fname, content = _small_file(folder)
    corrupted = bytearray(content)
    for position, value in flips:
        corrupted[position % len(corrupted)] = value
    with open(fname, "wb") as f:
        f.write(corrupted)
    try:
        loaded = nd.load(fname)
    except ArrayFileError as err:
        assert "small.params" in str(err)
    else:
        arrays = loaded.values() if isinstance(loaded, dict) else loaded
        assert sum(a.size * a.dtype.itemsize for a in arrays) <= len(content)


@pytest.mark.timeout(30)  # before the fix a FIFO blocked forever and /dev/zero ran out of memory
@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_what_is_not_a_regular_file_is_refused_at_once(tmp_path, kind):
    from hybridlab import sym
    from hybridlab.errors import ModelFileError

    path = tmp_path / "thing"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path = "/dev/zero"
    else:
        path.mkdir()
    words = {"fifo": "FIFO", "device": "device", "directory": "directory"}[kind]
    with pytest.raises(ArrayFileError, match=words):
        nd.load(str(path))
    with pytest.raises(ModelFileError, match=words):
        sym.load(str(path))


def _one_array_file(shape: tuple[int, ...]) -> bytes:
    header = struct.pack("<QQQ", ndarray_io.LIST_MAGIC, 0, 1)
    entry = struct.pack(f"<Iii{len(shape)}qiii", ndarray_io.ARRAY_MAGIC_V2, 0, len(shape),
                        *shape, 1, 0, 0)
    return header + entry + struct.pack("<Q", 0)


def test_a_zero_size_array_with_a_huge_other_size_is_an_array_file_error(tmp_path):
    path = tmp_path / "z.params"
    path.write_bytes(_one_array_file((0, 2**62)))
    with pytest.raises(ArrayFileError, match="larger than any array"):
        nd.load(str(path))
    path.write_bytes(_one_array_file((0, 5)))  # a plain empty array still loads
    assert nd.load(str(path))[0].shape == (0, 5)


def test_more_arrays_than_the_cap_are_refused_before_reading_them(tmp_path, monkeypatch):
    monkeypatch.setattr(ndarray_io, "MAX_ARRAYS", 3)
    path = tmp_path / "many.params"
    nd.save(str(path), [nd.ones((1,))] * 4)
    with pytest.raises(ArrayFileError, match="the 3 a file may have"):
        nd.load(str(path))


def test_load_parameters_of_a_list_file_says_it_holds_no_names(tmp_path):
    from hybridlab.gluon import nn

    path = tmp_path / "list.params"
    nd.save(str(path), [nd.ones((2, 3)), nd.ones((2,))])
    net = nn.Dense(2, in_units=3)
    net.initialize()
    with pytest.raises(ArrayFileError, match="list of 2 unnamed arrays"):
        net.load_parameters(str(path))


def _legacy_file(magic_and_shape: bytes, values: np.ndarray) -> bytes:
    """A one-array list in an NDArray layout older than MXNet 1.0 (NOTE [Legacy arrays])."""
    return (struct.pack("<QQQ", 0x112, 0, 1) + magic_and_shape + struct.pack("<iii", 1, 0, 0)
            + values.astype("<f4").tobytes() + struct.pack("<Q", 0))


@pytest.mark.parametrize("head", [
    struct.pack("<III", 2, 3, 4),  # no magic: the ndim, then uint32 sizes
    struct.pack("<Iiqq", 0xF993FAC8, 2, 3, 4),  # "V1": magic, int32 ndim, int64 sizes
])
def test_arrays_older_than_mxnet_1_load(tmp_path, head):
    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    fname = tmp_path / "old.params"
    fname.write_bytes(_legacy_file(head, values))
    (loaded,) = nd.load(str(fname))
    np.testing.assert_array_equal(loaded.asnumpy(), values)
    (again,) = nd.load_frombuffer(fname.read_bytes())
    np.testing.assert_array_equal(again.asnumpy(), values)


def test_load_frombuffer_reads_what_save_wrote_and_refuses_a_cut_buffer(tmp_path):
    fname = str(tmp_path / "w.params")
    nd.save(fname, {"w": nd.array([[1, 2], [3, 4]]), "b": nd.array([5])})
    content = open(fname, "rb").read()
    loaded = nd.load_frombuffer(content)
    assert sorted(loaded) == ["b", "w"] and loaded["w"].asnumpy().tolist() == [[1, 2], [3, 4]]
    with pytest.raises(ArrayFileError, match="buffer: .*truncated"):
        nd.load_frombuffer(content[:-3])
    with pytest.raises(TypeError, match="buf must be bytes"):
        nd.load_frombuffer(fname)
