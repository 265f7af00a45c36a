"""MXNet's binary NDArray file format: what ``nd.save``, ``export`` and ``.params`` files hold.

What this module teaches
------------------------
A model's weights leave Python as plain bytes in a layout MXNet 1.x defined, so a file
written here loads in real MXNet and the other way round. Everything is little-endian::

    uint64 0x112 (list magic) | uint64 0 (reserved) | uint64 N (number of arrays)
    N times:  uint32 0xF993FAC9 (array magic, "V2") | int32 storage type (0 = dense)
              int32 ndim | int64 x ndim shape | int32 device type, int32 device id
              int32 dtype flag | prod(shape) x itemsize bytes of data, C order
    uint64 K (0 for a list, N for a dict) | K times: uint64 length, UTF-8 name

The file is read with ``struct`` and raw reads, never with pickle and never by running
anything it contains. Reading is *bounded*: every size the file declares (N, ndim, each
dimension, the data's byte count, each name's length) is checked against the bytes the
file still has before anything is allocated, so a corrupted or hostile file gives an
:class:`~hybridlab.errors.ArrayFileError` naming the file, the entry and the problem
instead of a huge allocation. Each array's data is read straight into a fresh 64-byte-
aligned buffer (NOTE [Aligned weights] in ``gluon/parameter.py``): one copy, and no view
keeps the whole file alive. Writing is atomic: a temporary file in the same folder,
flushed and fsynced, then renamed over the target, so a failed save never destroys the
file that was there.

This module works on numpy arrays only; ``nd.save``/``nd.load`` wrap them as NDArrays.
"""

from __future__ import annotations

import errno
import io
import math
import os
import re
import socket
import stat
import struct
import tempfile
import warnings
from typing import Any, BinaryIO, Callable

import numpy as np

from hybridlab import config
from hybridlab.errors import ArrayFileError

LIST_MAGIC = 0x112
ARRAY_MAGIC_V1, ARRAY_MAGIC_V2, ARRAY_MAGIC_V3 = 0xF993FAC8, 0xF993FAC9, 0xF993FACA
DTYPE_FLAGS = {0: np.float32, 1: np.float64, 2: np.float16, 3: np.uint8, 4: np.int32,
               5: np.int8, 6: np.int64, 7: np.bool_}  # what MXNet 1.9.1 stores
FLAG_OF_DTYPE = {np.dtype(t): flag for flag, t in DTYPE_FLAGS.items()}
_STORAGE_NAMES = {1: "row_sparse", 2: "csr"}
_MAX_NDIM = 32  # MXNet's own limit on dimensions
_SMALLEST_ENTRY = 12  # magic, storage type and ndim: the least bytes an array can take
_ALIGN = 64  # bytes: a cache line, and the widest vector load (AVX-512)
_MAX_BYTES = 2**63 - 1  # numpy's limit on an array's bytes, even with a 0 in its shape
# NOTE [Load memory]: loading peaks below 4x the file's size + 64 MiB (tests/
# test_fuzz_loaders.py measures it). Data goes straight into its array (1x); what is not
# data -- an array object and a name per entry, ~300 bytes -- is bounded by this cap.
MAX_ARRAYS = 100_000


def aligned_empty(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """An uninitialised array whose first byte sits at a multiple of 64 (NOTE [Aligned
    weights]): a slice of a slightly larger byte buffer."""
    nbytes = math.prod(shape) * np.dtype(dtype).itemsize  # (math.prod: no array made)
    if nbytes == 0:  # nothing to align; one small object (NOTE [Load memory])
        return np.empty(shape, dtype)
    raw = np.empty(nbytes + _ALIGN, np.uint8)
    start = -raw.ctypes.data % _ALIGN
    aligned_array: np.ndarray = raw[start:start + nbytes].view(dtype).reshape(shape)
    return aligned_array


def aligned(values: np.ndarray) -> np.ndarray:
    """``values`` itself when it is contiguous and aligned already, else an aligned copy."""
    if values.ctypes.data % _ALIGN == 0 and values.flags.c_contiguous:
        return values
    copy = aligned_empty(values.shape, values.dtype)
    copy[...] = values
    return copy


# --- reading ------------------------------------------------------------------------------
class _Reader:
    """A file plus how many bytes it has left; every read is checked against that."""

    def __init__(self, file: BinaryIO, fname: str, size: int | None = None) -> None:
        self.file, self.fname = file, fname
        self.left = os.fstat(file.fileno()).st_size if size is None else size
        self.entry = "the header"  # what is being read, for error messages

    def fail(self, problem: str) -> ArrayFileError:
        return ArrayFileError(f"{self.fname}: {self.entry}: {problem}. Fix: check the path, "
                              f"or write the file again with nd.save / export")

    def need(self, nbytes: int, what: str) -> None:
        if nbytes > self.left:
            raise self.fail(f"{what} needs {nbytes} bytes but the file has only {self.left} "
                            f"left (truncated or corrupted)")

    def unpack(self, fmt: str, what: str) -> tuple[Any, ...]:
        size = struct.calcsize(fmt)
        self.need(size, what)
        self.left -= size
        return struct.unpack(fmt, self.file.read(size))

    def read_into(self, target: np.ndarray, what: str) -> None:
        view = memoryview(target.reshape(-1).view(np.uint8))  # type: ignore[arg-type]
        self.need(view.nbytes, what)
        if self.file.readinto(view) != view.nbytes:  # type: ignore[attr-defined]
            raise self.fail(f"{what}: the file ended early")
        self.left -= view.nbytes


def open_regular_file(fname: str, error: type[Exception]) -> BinaryIO:
    """``open(fname, "rb")``, refusing at once what is not a regular file: a directory, a
    FIFO (reading would block forever) or a device (``/dev/zero`` never ends)."""
    try:
        handle = os.open(fname, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except IsADirectoryError:
        raise error(f"{fname}: is a directory, not a model file; give the file's path") from None
    mode = os.fstat(handle).st_mode
    if not stat.S_ISREG(mode):
        os.close(handle)
        kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO (named pipe)"
                if stat.S_ISFIFO(mode) else "a device or socket")
        raise error(f"{fname}: is {kind}, not a regular file; hybridlab reads models only "
                    f"from files (copy the data into one first)")
    if hasattr(os, "set_blocking"):
        os.set_blocking(handle, True)
    return os.fdopen(handle, "rb")


def read_arrays(fname: str) -> list[np.ndarray] | dict[str, np.ndarray]:
    """The arrays of an MXNet NDArray file: a list, or a dict when the file names them."""
    with open_regular_file(fname, ArrayFileError) as file:
        reader = _Reader(file, fname)
        cap = config.flag("MAX_LOAD_BYTES")
        if cap and reader.left > cap:
            raise reader.fail(f"the file holds {reader.left} bytes, more than "
                              f"HYBRIDLAB_MAX_LOAD_BYTES={cap} allows (raise the variable, "
                              f"or 0 for no limit, to read it)")
        if file.read(4) == b"PK\x03\x04":
            raise reader.fail("this is a numpy .npz archive (hybridlab's format before it "
                              "wrote MXNet's); convert it with nd.save(new, {k: nd.array(v) "
                              "for k, v in np.load(old).items()})")
        file.seek(0)
        return _read_list(reader)


def read_arrays_from_bytes(data: bytes, what: str = "buffer"
                           ) -> list[np.ndarray] | dict[str, np.ndarray]:
    """:func:`read_arrays` of a file's bytes already in memory (``nd.load_frombuffer``)."""
    return _read_list(_Reader(io.BytesIO(data), what, size=len(data)))


def _read_list(reader: _Reader) -> list[np.ndarray] | dict[str, np.ndarray]:
    magic, _reserved = reader.unpack("<QQ", "the list magic")
    if magic != LIST_MAGIC:
        raise reader.fail(f"starts with {magic:#x}, not MXNet's array-list magic "
                          f"{LIST_MAGIC:#x}: not a file written by nd.save or export")
    (count,) = reader.unpack("<Q", "the number of arrays")
    if count * _SMALLEST_ENTRY > reader.left or count > MAX_ARRAYS:
        raise reader.fail(f"declares {count} arrays, more than its {reader.left} bytes "
                          f"can hold or the {MAX_ARRAYS} a file may have")
    arrays = []
    for index in range(count):
        reader.entry = f"array {index}"
        arrays.append(_read_array(reader))
    reader.entry = "the names"
    names = _read_names(reader, count)
    if reader.left:
        raise reader.fail(f"{reader.left} unexpected bytes after the last name")
    return dict(zip(names, arrays)) if names else arrays


def _read_array(reader: _Reader) -> np.ndarray:
    (magic,) = reader.unpack("<I", "the array magic")
    shape = _shape_v2(reader, magic) if magic in (ARRAY_MAGIC_V2, ARRAY_MAGIC_V3) else (
        _shape_legacy(reader, magic))
    if any(size < 0 for size in shape):
        raise reader.fail(f"shape {shape} has a negative size")
    if math.prod(size for size in shape if size) * 8 > _MAX_BYTES:  # (8: widest itemsize)
        raise reader.fail(f"shape {shape} is larger than any array can be (its sizes "
                          f"multiply past 2**63 bytes)")
    device, _device_id, flag = reader.unpack("<iii", "the device and dtype")
    if device not in (1, 2, 3):
        raise reader.fail(f"device type {device} (MXNet writes 1 cpu, 2 gpu, 3 cpu_pinned)")
    if flag not in DTYPE_FLAGS:
        raise reader.fail(f"dtype flag {flag}, which hybridlab cannot store (it reads "
                          f"{sorted(DTYPE_FLAGS)}, the dtypes MXNet 1.x saves)")
    dtype = np.dtype(DTYPE_FLAGS[flag]).newbyteorder("<")
    reader.need(math.prod(shape) * dtype.itemsize, f"shape {shape} of {dtype.name}")
    values = aligned_empty(shape, dtype)
    reader.read_into(values, "the data")
    return values if dtype.isnative else values.astype(dtype.newbyteorder("="))


def _shape_v2(reader: _Reader, magic: int) -> tuple[int, ...]:
    (storage,) = reader.unpack("<i", "the storage type")
    if storage != 0:
        kind = _STORAGE_NAMES.get(storage, f"unknown ({storage})")
        raise reader.fail(f"storage type {kind}: hybridlab reads dense arrays only; save "
                          f"it as dense in MXNet (x.tostype('default'))")
    (ndim,) = reader.unpack("<i", "the number of dimensions")
    if ndim == -1 or (ndim == 0 and magic == ARRAY_MAGIC_V2):
        raise reader.fail("an empty (None) NDArray, which hybridlab does not represent")
    if not 0 <= ndim <= _MAX_NDIM:
        raise reader.fail(f"{ndim} dimensions (MXNet allows 0 to {_MAX_NDIM})")
    return reader.unpack(f"<{ndim}q", "the shape")


def _shape_legacy(reader: _Reader, magic: int) -> tuple[int, ...]:
    """NOTE: [Legacy arrays] before MXNet 1.0 an array began with its shape, no storage
    type: "V1" (magic 0xF993FAC8) as an int32 ndim and int64 sizes; older files have no
    magic at all -- the first uint32 *is* the ndim, followed by uint32 sizes."""
    if magic == ARRAY_MAGIC_V1:
        (ndim,) = reader.unpack("<i", "the number of dimensions")
    elif magic <= _MAX_NDIM:
        ndim = magic
    else:
        raise reader.fail(f"array magic {magic:#x} is neither MXNet's ({ARRAY_MAGIC_V2:#x}, "
                          f"{ARRAY_MAGIC_V3:#x}, legacy {ARRAY_MAGIC_V1:#x}) nor the dimension "
                          f"count (0 to {_MAX_NDIM}) that starts an array older than that")
    if not 0 < ndim <= _MAX_NDIM:
        raise reader.fail(f"{ndim} dimensions in a legacy array (an empty NDArray, or more than "
                          f"MXNet's {_MAX_NDIM})")
    size = "q" if magic == ARRAY_MAGIC_V1 else "I"
    return reader.unpack(f"<{ndim}{size}", "the shape")


def array_to_bytes(array: np.ndarray) -> bytes:
    """One array in MXNet's single-array bytes (what MXNet's NDArray pickles as)."""
    buffer = io.BytesIO()
    _write_array(buffer, array)
    return buffer.getvalue()


def array_from_bytes(data: bytes) -> np.ndarray:
    """The array of :func:`array_to_bytes`'s bytes (or MXNet's), checked as a file is."""
    reader = _Reader(io.BytesIO(data), "pickled NDArray", size=len(data))
    reader.entry = "the array"
    values = _read_array(reader)
    if reader.left:
        raise reader.fail(f"{reader.left} unexpected bytes after the array")
    return values


def _read_names(reader: _Reader, count: int) -> list[str]:
    (found,) = reader.unpack("<Q", "the number of names")
    if found not in (0, count):
        raise reader.fail(f"{found} names for {count} arrays (a dict names every array)")
    names = []
    for index in range(found):
        (length,) = reader.unpack("<Q", f"the length of name {index}")
        reader.need(length, f"name {index} ({length} bytes)")
        reader.left -= length
        try:
            names.append(reader.file.read(length).decode("utf-8"))
        except UnicodeDecodeError:
            raise reader.fail(f"name {index} is not UTF-8 text") from None
    if len(set(names)) != len(names):
        raise reader.fail("two arrays have the same name")
    return names


# --- writing ------------------------------------------------------------------------------
def write_arrays(fname: str, arrays: list[np.ndarray] | dict[str, np.ndarray], *,
                 commit: bool = True, caller: str = "nd.save") -> str | None:
    """Write a list or dict of arrays in MXNet's format, atomically (temp file + rename).
    ``commit=False``: only the synced temporary, whose path is returned (``write_temporary``).
    ``caller`` is what the user called (``nd.save``, ``export``): errors start with it."""
    names, values = (list(arrays), list(arrays.values())) if isinstance(arrays, dict) else (
        [], list(arrays))
    for index, array in enumerate(values):
        where = repr(names[index]) if names else str(index)
        if array.dtype.newbyteorder("=") not in FLAG_OF_DTYPE:
            raise TypeError(f"{caller}: entry {where} has dtype {array.dtype}, which MXNet's "
                            f"format cannot store; convert it (x.astype(...)) to one of "
                            f"{sorted(str(d) for d in FLAG_OF_DTYPE)}")
        if array.ndim == 0:  # MXNet 1.x reads a 0-d array as "None"
            raise ValueError(f"{caller}: entry {where} is 0-d; MXNet 1.x files cannot hold "
                             f"a 0-d array, reshape it to (1,)")

    def write(file: BinaryIO) -> None:
        file.write(struct.pack("<QQQ", LIST_MAGIC, 0, len(values)))
        for array in values:
            _write_array(file, array)
        file.write(struct.pack("<Q", len(names)))
        for name in names:
            encoded = name.encode("utf-8")
            file.write(struct.pack("<Q", len(encoded)) + encoded)

    if not commit:
        return write_temporary(fname, write)
    atomic_write(fname, write)
    return None


def atomic_write(fname: str, write: Callable[[BinaryIO], None] | bytes | str) -> None:
    """Write a file so that it is either the old file or the whole new one, never half:
    into a temporary file in the same folder, flushed and synced to disk, then renamed
    over ``fname`` (``os.replace`` is atomic). A failure -- or a kill -- before the rename
    leaves the previous file as it was. ``write`` is the content (str: UTF-8), or a
    function that writes it to the open binary file. Every file hybridlab writes goes
    through here (parameters, symbols, exports, profiler traces).

    As ``open(fname, "w")`` would: a symlink is written through (its target is replaced,
    the link stays), an existing file keeps its mode, a read-only file (no write bit for
    its owner, even for root) is refused with ``PermissionError``, a folder with
    ``IsADirectoryError``, and a character device or a FIFO (``/dev/null``) is written
    straight into -- it holds no contents to keep, and a rename would replace the device
    itself. A block device or a socket is refused (``OSError``).

    The price of atomic saves: the saved name is a *new* file, so another name of the old
    one (a hard link) keeps the old contents; the save warns when the file had one.

    The temporary is named ``.tmp-<name>.<pid>@<host>-<random>``; every save removes the
    temporaries in its folder that a killed save on this machine left (their pid no longer
    runs), whichever file they were for, and never another machine's (a shared folder):
    see :func:`remove_stale_temporaries`.
    """
    if _is_stream(fname):
        _write_through(fname, write)
        return
    temporary = write_temporary(fname, write)
    try:
        commit_temporary(temporary, fname)
    except BaseException:
        _unlink_quietly(temporary)
        raise


def write_temporary(fname: str, write: Callable[[BinaryIO], None] | bytes | str) -> str:
    """The first half of :func:`atomic_write`: the whole content in a synced temporary
    beside ``fname``'s real file, with the mode ``fname`` will have; returns its path.
    ``commit_temporary`` renames it into place (two files written by one save -- export's
    -- are both made first, then both renamed)."""
    if not callable(write):
        content = write.encode("utf-8") if isinstance(write, str) else write
        write = lambda file: file.write(content)  # type: ignore[assignment]  # noqa: E731
    target = os.path.realpath(fname)  # through symlinks, as open(fname, "w") writes
    mode = _mode_for(fname, target)
    _warn_other_names(fname, target)
    remove_stale_temporaries(target)
    folder, base = os.path.split(target)
    handle, temporary = tempfile.mkstemp(
        prefix=f"{_temporary_prefix(base)}{os.getpid()}@{_HOST}-", dir=folder)
    try:
        with os.fdopen(handle, "wb") as file:
            write(file)  # type: ignore[operator]  # (made callable above)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, mode)
    except BaseException:
        _unlink_quietly(temporary)
        raise
    return temporary


def commit_temporary(temporary: str, fname: str) -> None:
    """Rename a temporary from :func:`write_temporary` over ``fname``'s real file."""
    os.replace(temporary, os.path.realpath(fname))


def remove_stale_temporaries(fname: str) -> list[str]:
    """Remove the temporaries in ``fname``'s folder that killed saves left behind: those
    written on this machine (the host in the name) whose writer (the pid) no longer runs,
    whatever file they were for. Another machine's temporary (a folder shared over the
    network) is never touched: its pid means nothing here. Returns what it removed. Saves
    call it; call it yourself to clean up without saving."""
    folder = os.path.dirname(os.path.realpath(fname))
    removed: list[str] = []
    try:
        names = os.listdir(folder or ".")
    except OSError:
        return removed
    for name in names:
        found = _TEMPORARY.match(name)
        if found is None or found["host"] != _HOST:
            continue
        pid = int(found["pid"])
        path = os.path.join(folder, name)
        if pid != os.getpid() and not _running(pid) and not os.path.islink(path) \
                and os.path.isfile(path):
            _unlink_quietly(path)
            removed.append(path)
    return removed


def _temporary_prefix(base: str) -> str:
    return f".tmp-{base[:160]}."  # (a long name is cut: the temporary must fit 255 bytes)


# The machine's name as it goes into a temporary's name (letters, digits, '.', '-').
_HOST = re.sub(r"[^A-Za-z0-9.-]", "", socket.gethostname())[:64] or "localhost"
# .tmp-<name>.<pid>@<host>-<mkstemp's 8 random characters>
_TEMPORARY = re.compile(r"\.tmp-.+\.(?P<pid>\d+)@(?P<host>[A-Za-z0-9.-]+)-[a-z0-9_]{8}\Z")


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _mode_for(fname: str, target: str) -> int:
    """The mode the saved file gets: the existing file's (refusing a read-only one), else
    the usual 0666 less the umask (a temp file starts as 0600)."""
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return 0o666 & ~_umask()
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(f"{fname}: is a folder; save to a file name instead")
    if not stat.S_ISREG(mode):
        raise OSError(errno.EINVAL, f"{fname}: is a device, a FIFO or a socket, not a "
                                    f"regular file; save to a file name instead", fname)
    if not mode & stat.S_IWUSR:
        raise PermissionError(f"{fname} is read-only (mode {stat.S_IMODE(mode):04o}); make "
                              f"it writable (chmod u+w) to replace it, or save elsewhere")
    return stat.S_IMODE(mode)


def _is_stream(fname: str) -> bool:
    """A character device or a FIFO: written into, never replaced (``/dev/null``)."""
    try:
        mode = os.stat(fname).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def _write_through(fname: str, write: Callable[[BinaryIO], None] | bytes | str) -> None:
    with open(fname, "wb") as file:
        if callable(write):
            write(file)
        else:
            file.write(write.encode("utf-8") if isinstance(write, str) else write)


def _warn_other_names(fname: str, target: str) -> None:
    """A hard-linked file's other names keep the old contents after an atomic save."""
    try:
        links = os.stat(target).st_nlink
    except OSError:
        return
    if links > 1:
        warnings.warn(f"{fname} has {links - 1} other name(s) (hard links); they keep the "
                      f"old contents, since a save replaces the file whole (atomically) "
                      f"instead of writing into it", stacklevel=4)


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _write_array(file: BinaryIO, array: np.ndarray) -> None:
    header = struct.pack(f"<Iii{array.ndim}qiii", ARRAY_MAGIC_V2, 0, array.ndim, *array.shape,
                         1, 0, FLAG_OF_DTYPE[array.dtype.newbyteorder("=")])
    file.write(header)
    data = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
    file.write(memoryview(data.reshape(-1).view(np.uint8)))  # type: ignore[arg-type]


def _umask() -> int:
    """The process's umask (a temp file is 0600; the saved file gets the usual mode)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask
