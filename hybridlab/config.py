"""Every flag and environment variable hybridlab reads, in one table.

| variable                | values                                        | default          |
|-------------------------|-----------------------------------------------|------------------|
| HYBRIDLAB_ENGINE_TYPE   | NaiveEngine, ThreadedEngine, StepEngine       | ThreadedEngine   |
| MXNET_ENGINE_TYPE       | the same; read when the one above is unset    |                  |
| HYBRIDLAB_ENGINE_WORKERS| ThreadedEngine workers, 1 to MAX_WORKERS (*)  | 2                |
| HYBRIDLAB_DEBUG         | 0 quiet, 1 print compiled programs            | 0                |
| HYBRIDLAB_VERIFY        | 1: verify the graph after every compiler pass | 0                |
| HYBRIDLAB_MAX_LOAD_BYTES| most bytes one loaded array may declare       | 4 GiB            |

(*) checked when the first ThreadedEngine starts; more than MAX_WORKERS (4 per core, at
least 8) is capped with a warning.

``HYBRIDLAB_MAX_LOAD_BYTES`` is read by the loaders each time (``fileio.max_load_bytes``):
a ``.params`` entry declaring more is refused with an ArrayFileError before anything is
allocated (and every entry must also fit in the bytes the file really has).

Read the values through :data:`FLAGS`; change them for a block of code with
``with Context(VERIFY=1): ...`` (tests do this), which restores them afterwards.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator


def _engine_type_from_env() -> str:
    return (os.environ.get("HYBRIDLAB_ENGINE_TYPE") or os.environ.get("MXNET_ENGINE_TYPE")
            or "ThreadedEngine")


FLAGS: dict[str, Any] = {
    "ENGINE_TYPE": _engine_type_from_env(),
    "ENGINE_WORKERS": os.environ.get("HYBRIDLAB_ENGINE_WORKERS", "2"),  # checked at use
    "DEBUG": int(os.environ.get("HYBRIDLAB_DEBUG", "0")),
    "VERIFY": int(os.environ.get("HYBRIDLAB_VERIFY", "0")),
}


MAX_WORKERS = max(8, 4 * (os.cpu_count() or 1))  # more threads only contend for the GIL


def worker_count(value: Any, source: str) -> int:
    """A ThreadedEngine's worker count from ``value`` (an int or the variable's text):
    a whole number >= 1; above :data:`MAX_WORKERS` it is capped with a warning."""
    try:
        count = int(str(value).strip())
    except ValueError:
        raise ValueError(f"{source}={value!r}: expected a whole number of worker threads, "
                         f"1 to {MAX_WORKERS} (default 2)") from None
    if count < 1:
        raise ValueError(f"ThreadedEngine needs at least 1 worker, got {source}={count}; use "
                         f"NaiveEngine to run every op in the caller's thread")
    if count > MAX_WORKERS:
        import warnings
        warnings.warn(f"{source}={count}: capped at {MAX_WORKERS} worker threads (4 per "
                      f"core, at least 8); more only contend for the GIL", stacklevel=3)
    return min(count, MAX_WORKERS)


@contextlib.contextmanager
def Context(**flags: Any) -> Iterator[None]:  # noqa: N802 -- reads like tinygrad's Context
    """Set flags for the duration of a ``with`` block, then restore them."""
    unknown = set(flags) - set(FLAGS)
    if unknown:
        raise KeyError(f"unknown hybridlab flag(s) {sorted(unknown)}; known: {sorted(FLAGS)}")
    saved = {k: FLAGS[k] for k in flags}
    FLAGS.update(flags)
    try:
        yield
    finally:
        FLAGS.update(saved)
