"""RecordIO (``mx.recordio``): MXNet's file of binary records, read and written byte for byte.

What this module teaches
------------------------
A data set of millions of images is slow to read as millions of files. MXNet packs them
into one *record file* read front to back (or, with an index, by key): each record is

    magic (uint32 0xced7230a) | lrec (uint32) | the bytes | zero padding to 4 bytes

where ``lrec`` holds the length in its low 29 bits and a *continuation flag* in the top
3. A record whose bytes contain the magic number at a 4-byte boundary is split there (so
a reader that lost its place can find the next record by scanning for the magic): the
parts are flagged 1 (first), 2 (middle), 3 (last), and the reader puts the magic back
between them. Flag 0 is a whole record. (dmlc-core's RecordIO, which MXNet uses.)

:class:`MXIndexedRecordIO` keeps a text index beside the file, ``key<TAB>byte offset``
per line, to read a record by key (``read_idx``) -- what a shuffling data loader needs.
:func:`pack` and :func:`unpack` put an :data:`IRHeader` (flag, label, id, id2) before the
bytes: a label that is an array is stored as float32 after the header, its length in
``flag``.

Files are written to a temporary beside the target and renamed into place when closed,
so an interrupted writer never leaves half a file under the real name. Reads are bounded:
a length beyond the end of the file, or a missing magic number, is a
:class:`~hybridlab.errors.RecordIOError` naming the file and the byte offset.
"""

from __future__ import annotations

import numbers
import os
import struct
import tempfile
from collections import namedtuple
from typing import Any, BinaryIO

import numpy as np

from hybridlab.errors import RecordIOError
from hybridlab.ndarray_io import commit_temporary, remove_stale_temporaries

MAGIC = 0xCED7230A
_MAGIC_BYTES = struct.pack("<I", MAGIC)
_LENGTH_BITS = 29
MAX_RECORD = 1 << _LENGTH_BITS  # dmlc's limit: the length must fit its 29 bits


def _padded(length: int) -> int:
    return (length + 3) & ~3


def _encode(flag: int, length: int) -> bytes:
    return _MAGIC_BYTES + struct.pack("<I", (flag << _LENGTH_BITS) | length)


def encode_record(data: bytes) -> bytes:
    """``data`` as it is stored: split where the magic number sits at a 4-byte boundary."""
    if len(data) >= MAX_RECORD:
        raise RecordIOError(f"a record holds fewer than 2**29 bytes, got {len(data)}")
    parts, start = [], 0
    for i in range(0, len(data) - len(data) % 4, 4):
        if data[i:i + 4] == _MAGIC_BYTES:
            parts.append(_encode(1 if start == 0 else 2, i - start) + data[start:i])
            start = i + 4
    parts.append(_encode(3 if start else 0, len(data) - start) + data[start:])
    return b"".join(parts) + bytes(_padded(len(data)) - len(data))


class MXRecordIO:
    """A record file read (``flag='r'``) or written (``'w'``) one record after another."""

    def __init__(self, uri: str, flag: str) -> None:
        if flag not in ("r", "w"):
            raise ValueError(f"MXRecordIO: flag must be 'r' or 'w', got {flag!r}")
        self.uri, self.flag = str(uri), flag
        self.handle: BinaryIO | None = None
        self._temporary = ""
        self.is_open = False
        self.open()

    @property
    def writable(self) -> bool:
        return self.flag == "w"

    def open(self) -> None:
        if self.writable:
            target = os.path.realpath(self.uri)
            remove_stale_temporaries(target)
            folder, base = os.path.split(target)
            handle, self._temporary = tempfile.mkstemp(
                prefix=f".tmp-{base[:160]}.{os.getpid()}-", dir=folder or ".")
            self.handle = os.fdopen(handle, "wb")
        else:
            try:
                self.handle = open(self.uri, "rb")
            except FileNotFoundError:
                raise RecordIOError(f"{self.uri}: no such record file") from None
        self.pid = os.getpid()
        self.is_open = True

    def close(self) -> None:
        """Close the file; a written one is renamed into place now (complete)."""
        if not self.is_open or self.handle is None:
            return
        if self.writable and os.getpid() == self.pid:
            self.handle.flush()
            os.fsync(self.handle.fileno())
            self.handle.close()
            os.chmod(self._temporary, 0o666 & ~_umask())
            commit_temporary(self._temporary, self.uri)
        else:
            self.handle.close()
        self.is_open = False

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # (at interpreter exit the file objects may be gone already)
            pass

    def __enter__(self) -> MXRecordIO:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        """A reader travels to a worker process as its path; it opens the file there."""
        if self.writable:
            raise TypeError("a record file being written cannot be sent to another process")
        state = self.__dict__.copy()
        state.update(handle=None, is_open=False)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.open()

    def reset(self) -> None:
        """Read (or write) from the start again."""
        self.close()
        self.open()

    def tell(self) -> int:
        assert self.handle is not None
        return self.handle.tell()

    def write(self, buf: bytes) -> None:
        """Append one record."""
        if not self.writable:
            raise RecordIOError(f"{self.uri}: opened for reading; use MXRecordIO(uri, 'w')")
        if not isinstance(buf, (bytes, bytearray, memoryview)):
            raise TypeError(f"MXRecordIO.write takes bytes, got {type(buf).__name__}; encode "
                            f"text first (s.encode('utf-8')) or use recordio.pack")
        self.handle.write(encode_record(bytes(buf)))  # type: ignore[union-attr]

    def read(self) -> bytes | None:
        """The next record, or None at the end of the file."""
        if self.writable:
            raise RecordIOError(f"{self.uri}: opened for writing; use MXRecordIO(uri, 'r')")
        parts: list[bytes] = []
        while True:
            start = self.tell()
            head = self.handle.read(8)  # type: ignore[union-attr]
            if not head and not parts:
                return None
            flag, length = self._header(head, start)
            data = self.handle.read(_padded(length))  # type: ignore[union-attr]
            if len(data) < length:
                raise RecordIOError(f"{self.uri}: record at byte {start} says {length} bytes "
                                    f"but the file ends after {len(data)}: truncated")
            parts.append(data[:length])
            if flag in (0, 3):
                return _MAGIC_BYTES.join(parts)

    def _header(self, head: bytes, start: int) -> tuple[int, int]:
        if len(head) < 8:
            raise RecordIOError(f"{self.uri}: at byte {start}: the file ends inside a record "
                                f"header ({len(head)} of 8 bytes): truncated")
        magic, lrec = struct.unpack("<II", head)
        if magic != MAGIC:
            raise RecordIOError(f"{self.uri}: at byte {start}: no record starts here (magic "
                                f"{magic:#x}, expected {MAGIC:#x}); not a record file, or an "
                                f"index pointing into a record")
        return lrec >> _LENGTH_BITS, lrec & (MAX_RECORD - 1)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class MXIndexedRecordIO(MXRecordIO):
    """A record file with an index (``idx_path``: ``key<TAB>offset`` lines) to read any
    record by key (``read_idx``) and write records with keys (``write_idx``)."""

    def __init__(self, idx_path: str, uri: str, flag: str, key_type: type = int) -> None:
        self.idx_path, self.key_type = str(idx_path), key_type
        self.idx: dict[Any, int] = {}
        self.keys: list[Any] = []
        super().__init__(uri, flag)

    def open(self) -> None:
        super().open()
        self.idx, self.keys = {}, []
        if not self.writable:
            self._read_index()

    def _read_index(self) -> None:
        try:
            lines = open(self.idx_path, encoding="utf-8").read().splitlines()
        except FileNotFoundError:
            raise RecordIOError(f"{self.idx_path}: no such index file") from None
        for number, line in enumerate(lines, 1):
            fields = line.strip().split("\t")
            if not line.strip():
                continue
            try:
                key, position = self.key_type(fields[0]), int(fields[1])
            except (IndexError, ValueError):
                raise RecordIOError(f"{self.idx_path}: line {number} is {line!r}, not "
                                    f"'key<TAB>byte offset'") from None
            self.idx[key] = position
            self.keys.append(key)

    def close(self) -> None:
        if self.is_open and self.writable and os.getpid() == self.pid:
            from hybridlab.ndarray_io import atomic_write
            atomic_write(self.idx_path, "".join(f"{k}\t{p}\n" for k, p in self.idx.items()))
        super().close()

    def __getstate__(self) -> dict[str, Any]:
        return super().__getstate__()

    def seek(self, idx: Any) -> None:
        if idx not in self.idx:
            raise KeyError(f"{self.idx_path}: no record with key {idx!r}")
        self.handle.seek(self.idx[idx])  # type: ignore[union-attr]

    def read_idx(self, idx: Any) -> bytes | None:
        """The record of key ``idx``."""
        self.seek(idx)
        return self.read()

    def write_idx(self, idx: Any, buf: bytes) -> None:
        """Append a record under key ``idx``."""
        key = self.key_type(idx)
        self.idx[key] = self.tell()
        self.keys.append(key)
        self.write(buf)


IRHeader = namedtuple("IRHeader", ["flag", "label", "id", "id2"])
IRHeader.__doc__ = ("A record's header: ``flag`` (the label's length when it is an array), "
                    "``label`` (a number or float32 array), ``id`` and ``id2`` (uint64).")
_IR_FORMAT = "IfQQ"
_IR_SIZE = struct.calcsize(_IR_FORMAT)


def pack(header: Any, s: bytes) -> bytes:
    """``header`` (an :data:`IRHeader` or a 4-tuple) and the bytes ``s`` as one record."""
    header = IRHeader(*header)
    if isinstance(header.label, numbers.Number):
        header = header._replace(flag=0)
    else:
        label = np.asarray(header.label, dtype=np.float32).ravel()
        header = header._replace(flag=label.size, label=0)
        s = label.tobytes() + s
    return struct.pack(_IR_FORMAT, *header) + s


def unpack(s: bytes) -> tuple[Any, bytes]:
    """A record made by :func:`pack` as ``(IRHeader, the bytes)``."""
    if len(s) < _IR_SIZE:
        raise RecordIOError(f"recordio.unpack: {len(s)} bytes, fewer than a header's "
                            f"{_IR_SIZE}: not a record made by recordio.pack")
    header = IRHeader(*struct.unpack(_IR_FORMAT, s[:_IR_SIZE]))
    s = s[_IR_SIZE:]
    if header.flag > 0:
        if len(s) < 4 * header.flag:
            raise RecordIOError(f"recordio.unpack: the header announces {header.flag} labels "
                                f"but only {len(s)} bytes follow")
        header = header._replace(label=np.frombuffer(s, np.float32, header.flag))
        s = s[4 * header.flag:]
    return header, s


def unpack_img(s: bytes, iscolor: int = -1) -> tuple[Any, np.ndarray]:
    """``(header, image)`` of a record made by :func:`pack_img`; the image as MXNet
    returns it (height, width, channels in BGR order). Needs Pillow."""
    import io
    header, data = unpack(s)
    image = np.asarray(_pillow().open(io.BytesIO(data)))
    if iscolor == 0 and image.ndim == 3:
        image = image[..., :3].mean(axis=2).astype(np.uint8)
    return header, image[..., ::-1].copy() if image.ndim == 3 else image


def pack_img(header: Any, img: np.ndarray, quality: int = 95, img_fmt: str = ".jpg") -> bytes:
    """``header`` and an image (height, width, channels in BGR order) encoded as
    ``img_fmt`` ('.jpg' or '.png'). Needs Pillow."""
    import io
    buffer = io.BytesIO()
    pixels = img[..., ::-1] if np.ndim(img) == 3 else img
    kind = {".jpg": "JPEG", ".jpeg": "JPEG", ".png": "PNG"}.get(img_fmt.lower())
    if kind is None:
        raise ValueError(f"pack_img: img_fmt is '.jpg' or '.png', got {img_fmt!r}")
    _pillow().fromarray(np.ascontiguousarray(pixels)).save(buffer, kind, quality=quality)
    return pack(header, buffer.getvalue())


def _pillow() -> Any:
    try:
        from PIL import Image
    except ImportError:
        raise ImportError("recordio's images need Pillow: pip install pillow") from None
    return Image
