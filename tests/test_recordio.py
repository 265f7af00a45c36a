"""mx.recordio against real MXNet 1.9.1's files (tools/mxnet_fixtures.py mxnet-recordio):
the same bytes written, the same records read; bounded errors on broken files."""

from __future__ import annotations

import json
import pathlib
import pickle

import numpy as np
import pytest

from hybridlab import recordio
from hybridlab.errors import RecordIOError

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "mxnet" / "recordio"
PAYLOADS = [bytes.fromhex(h) for h in json.loads((FIXTURES / "payloads.json").read_text())]


def test_the_fixtures_hold_records_split_at_the_magic_number():
    magic = recordio.MAGIC.to_bytes(4, "little")
    assert any(magic in p for p in PAYLOADS) and b"" in PAYLOADS


def test_written_files_are_mxnets_byte_for_byte(tmp_path):
    writer = recordio.MXRecordIO(str(tmp_path / "plain.rec"), "w")
    for data in PAYLOADS:
        writer.write(data)
    writer.close()
    assert (tmp_path / "plain.rec").read_bytes() == (FIXTURES / "plain.rec").read_bytes()
    indexed = recordio.MXIndexedRecordIO(str(tmp_path / "i.idx"), str(tmp_path / "i.rec"), "w")
    for i, data in enumerate(PAYLOADS):
        indexed.write_idx(10 * (i + 1), data)
    del indexed  # (closing writes both files, as MXNet's writer does when collected)
    assert (tmp_path / "i.rec").read_bytes() == (FIXTURES / "indexed.rec").read_bytes()
    assert (tmp_path / "i.idx").read_text() == (FIXTURES / "indexed.idx").read_text()
    with recordio.MXRecordIO(str(tmp_path / "packed.rec"), "w") as writer:
        for i, data in enumerate(PAYLOADS):
            label = 1.5 * i if i % 2 else np.arange(i, dtype=np.float32)
            writer.write(recordio.pack((0, label, i, 2 * i), data))
    assert (tmp_path / "packed.rec").read_bytes() == (FIXTURES / "packed.rec").read_bytes()


def test_mxnets_files_read_back_to_the_records():
    reader = recordio.MXRecordIO(str(FIXTURES / "plain.rec"), "r")
    assert [reader.read() for _ in PAYLOADS] == PAYLOADS and reader.read() is None
    indexed = recordio.MXIndexedRecordIO(str(FIXTURES / "indexed.idx"),
                                         str(FIXTURES / "indexed.rec"), "r")
    assert indexed.keys == [10 * (i + 1) for i in range(len(PAYLOADS))]
    for key in reversed(indexed.keys):
        assert indexed.read_idx(key) == PAYLOADS[key // 10 - 1]
    packed = recordio.MXRecordIO(str(FIXTURES / "packed.rec"), "r")
    for i, data in enumerate(PAYLOADS):
        header, content = recordio.unpack(packed.read())
        assert content == data and (header.id, header.id2) == (i, 2 * i)
        expected = 1.5 * i if i % 2 else np.arange(i, dtype=np.float32)
        np.testing.assert_array_equal(header.label, expected)


def test_a_reader_travels_to_another_process_as_its_path():
    indexed = recordio.MXIndexedRecordIO(str(FIXTURES / "indexed.idx"),
                                         str(FIXTURES / "indexed.rec"), "r")
    copy = pickle.loads(pickle.dumps(indexed))
    assert copy.read_idx(30) == PAYLOADS[2] and copy.handle is not indexed.handle


def test_broken_files_are_clear_errors_and_an_open_writer_leaves_no_file(tmp_path):
    data = (FIXTURES / "plain.rec").read_bytes()
    (tmp_path / "cut.rec").write_bytes(data[:-1000])
    reader = recordio.MXRecordIO(str(tmp_path / "cut.rec"), "r")
    with pytest.raises(RecordIOError, match=r"cut.rec: record at byte \d+ says 1001 bytes"):
        while reader.read() is not None:
            pass
    (tmp_path / "junk.rec").write_bytes(b"not a record file")
    with pytest.raises(RecordIOError, match=r"at byte 0: no record starts here"):
        recordio.MXRecordIO(str(tmp_path / "junk.rec"), "r").read()
    writer = recordio.MXRecordIO(str(tmp_path / "new.rec"), "w")
    writer.write(b"half")
    assert not (tmp_path / "new.rec").exists()  # complete only once closed
    writer.close()
    assert recordio.MXRecordIO(str(tmp_path / "new.rec"), "r").read() == b"half"
    with pytest.raises(TypeError, match="takes bytes, got str"):
        recordio.MXRecordIO(str(tmp_path / "x.rec"), "w").write("text")
