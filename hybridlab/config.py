"""Every flag and environment variable hybridlab reads, in one table.

| variable                | values                                        | default          |
|-------------------------|-----------------------------------------------|------------------|
| HYBRIDLAB_ENGINE_TYPE   | NaiveEngine, ThreadedEngine, StepEngine       | ThreadedEngine   |
| MXNET_ENGINE_TYPE       | the same; read when the one above is unset    |                  |
| HYBRIDLAB_ENGINE_WORKERS| number of ThreadedEngine workers              | 2                |
| HYBRIDLAB_DEBUG         | 0 quiet, 1 print compiled programs            | 0                |
| HYBRIDLAB_VERIFY        | 1: verify the graph after every compiler pass | 0                |
| HYBRIDLAB_MAX_LOAD_BYTES| most bytes one loaded array may declare       | 4294967296 (4 GiB)|

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
    "ENGINE_WORKERS": int(os.environ.get("HYBRIDLAB_ENGINE_WORKERS", "2")),
    "DEBUG": int(os.environ.get("HYBRIDLAB_DEBUG", "0")),
    "VERIFY": int(os.environ.get("HYBRIDLAB_VERIFY", "0")),
}


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
