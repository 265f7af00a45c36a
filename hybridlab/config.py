"""Every flag and environment variable hybridlab reads, in one table.

| variable                | values                                        | default          |
|-------------------------|-----------------------------------------------|------------------|
| HYBRIDLAB_ENGINE_TYPE   | NaiveEngine, ThreadedEngine, StepEngine       | ThreadedEngine   |
| MXNET_ENGINE_TYPE       | the same; read when the one above is unset    |                  |
| HYBRIDLAB_ENGINE_WORKERS| ThreadedEngine workers per device, 1..64      | 2                |
| HYBRIDLAB_DEBUG         | 0 quiet, 1 print compiled programs            | 0                |
| HYBRIDLAB_VERIFY        | 1: verify the graph after every compiler pass | 0                |
| HYBRIDLAB_MAX_LOAD_BYTES| largest .params / nd.save file read (bytes)   | 0 (no limit)     |
| HYBRIDLAB_ONNX_MAX_BYTES| most bytes an ONNX import may hold: its file,  | 2**30 (1 GiB)    |
|                         | initializers and folded constants (declared   |                  |
|                         | sizes, checked before anything is allocated)  |                  |
| HYBRIDLAB_AUTOTUNE      | 1: time the weights' layouts on a signature's | 1                |
|                         | first call and keep the faster; 0: as stored  |                  |
| MXNET_ELIMINATE_COMMON_EXPR | 0: an Executor is compiled without common-| 1             |
|                         | subexpression elimination (read at each bind) |                  |

Whatever the limit, a file's arrays are never allocated beyond the bytes the file holds
(each declared size is checked against what is left to read).

Read the values with :func:`flag` (it reports a bad environment value when the flag is
first used); change them for a block of code with
``with Context(VERIFY=1): ...`` (tests do this), which restores them afterwards.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator


def _engine_type_from_env() -> str:
    return (os.environ.get("HYBRIDLAB_ENGINE_TYPE") or os.environ.get("MXNET_ENGINE_TYPE")
            or "ThreadedEngine")


MAX_WORKERS = 64  # more engine threads than this only take turns on the cores


class Invalid(str):
    """A flag whose environment variable could not be used: the message saying why. It is
    kept until the flag is first used (:func:`flag` raises it then), so that a bad value
    in the environment does not break ``import hybridlab`` for code that never uses it."""


def _int_from_env(variable: str, default: int, low: int, high: int, meaning: str
                  ) -> int | Invalid:
    """An integer environment variable, checked; an :class:`Invalid` message naming the
    variable and its valid values when it is not one."""
    text = os.environ.get(variable, "").strip() or str(default)
    try:
        value = int(text)
    except ValueError:
        return Invalid(f"{variable}={text!r} is not a whole number; set it to {low}..{high} "
                       f"({meaning}) or unset it (default {default})")
    if not low <= value <= high:
        return Invalid(f"{variable}={value} is out of range; set it to {low}..{high} "
                       f"({meaning}) or unset it (default {default})")
    return value


FLAGS: dict[str, Any] = {
    "ENGINE_TYPE": _engine_type_from_env(),
    "ENGINE_WORKERS": _int_from_env("HYBRIDLAB_ENGINE_WORKERS", 2, 1, MAX_WORKERS,
                                    "ThreadedEngine worker threads"),
    "DEBUG": _int_from_env("HYBRIDLAB_DEBUG", 0, 0, 1, "1 prints compiled programs"),
    "VERIFY": _int_from_env("HYBRIDLAB_VERIFY", 0, 0, 1, "1 verifies every pass"),
    "AUTOTUNE": _int_from_env("HYBRIDLAB_AUTOTUNE", 1, 0, 1,
                              "1 chooses the weights' layout by timing; 0 keeps it as stored"),
    "MAX_LOAD_BYTES": _int_from_env("HYBRIDLAB_MAX_LOAD_BYTES", 0, 0, 2**62,
                                    "the largest array file to read; 0: no limit"),
    "ONNX_MAX_BYTES": _int_from_env("HYBRIDLAB_ONNX_MAX_BYTES", 2**30, 0, 2**62,
                                    "the most bytes an ONNX import may hold"),
}


def eliminate_common_expr() -> bool:
    """MXNet's switch, read when an Executor is bound (MXNet code sets it around a bind)."""
    value = _int_from_env("MXNET_ELIMINATE_COMMON_EXPR", 1, 0, 1, "0 binds without CSE")
    if isinstance(value, Invalid):
        raise ValueError(str(value))
    return bool(value)


def flag(name: str) -> Any:
    """The value of flag ``name``; raises the message of a bad environment value here, at
    the flag's first use."""
    value = FLAGS[name]
    if isinstance(value, Invalid):
        raise ValueError(str(value))
    return value


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
