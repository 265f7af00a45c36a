"""Crash-safe file writes and the load-size ceiling: how every file hybridlab writes lands.

What this module teaches
------------------------
Opening a file with ``open(fname, "w")`` empties it at once; if computing what goes in
it then fails (a pending array whose kernel raises, a graph that cannot be serialised)
or the process is killed halfway, the old file is gone and a truncated one is left.
:func:`atomic_write` does it the other way round: the caller computes everything first,
the bytes go to a temporary file *in the same folder* (so the final rename stays on one
filesystem), are flushed and fsynced, and only then ``os.replace`` swaps the temporary
file in, in one step. Readers see the old file or the new one, never a half of either.
Every writer in hybridlab goes through here: ``nd.save`` and ``save_parameters``,
``Symbol.save``, both files of ``HybridBlock.export``, and ``profiler.dump``.

:func:`max_load_bytes` is the absolute ceiling a loader accepts for the bytes a file
*declares* (an array's data, a JSON document), checked before anything is allocated.
It is ``HYBRIDLAB_MAX_LOAD_BYTES`` (default 4 GiB); set it lower on a shared machine or
higher for a big model.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any, Callable, Iterable

DEFAULT_MAX_LOAD_BYTES = 4 << 30  # 4 GiB: larger than any model the course loads


def atomic_write(fname: str, write: Callable[[Any], None] | Iterable[bytes]) -> None:
    """Write ``fname`` atomically: ``write(file)`` (or the given chunks of bytes) goes to a
    temporary file next to it, which is fsynced and renamed over ``fname``. On any failure
    the temporary file is removed and ``fname`` keeps what it held before."""
    folder = os.path.dirname(os.path.abspath(fname))
    handle, temporary = tempfile.mkstemp(prefix=f".{os.path.basename(fname)}.", suffix=".tmp",
                                         dir=folder)
    try:
        with os.fdopen(handle, "wb") as file:
            if callable(write):
                write(file)
            else:
                for chunk in write:
                    file.write(chunk)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, 0o666 & ~_umask())  # mkstemp makes 0600; use the usual mode
        os.replace(temporary, fname)
    except BaseException:
        os.unlink(temporary)
        raise
    _fsync_folder(folder)


def write_text(fname: str, text: str) -> None:
    """``atomic_write`` for text already computed (UTF-8)."""
    atomic_write(fname, [text.encode("utf-8")])


def max_load_bytes() -> int:
    """The ceiling on declared bytes a loader accepts (``HYBRIDLAB_MAX_LOAD_BYTES``)."""
    raw = os.environ.get("HYBRIDLAB_MAX_LOAD_BYTES", "")
    if not raw:
        return DEFAULT_MAX_LOAD_BYTES
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value <= 0:
        raise ValueError(f"HYBRIDLAB_MAX_LOAD_BYTES={raw!r}: expected a positive whole number "
                         f"of bytes (e.g. 1073741824 for 1 GiB); unset it for the default "
                         f"{DEFAULT_MAX_LOAD_BYTES}")
    return value


def _fsync_folder(folder: str) -> None:
    """Make the rename itself durable (POSIX; folders cannot be opened on Windows)."""
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
