"""MXNet's ``mx.util``: the NumPy-shape switch.

Classic MXNet reads a 0 in a shape as "unknown" (``nd.zeros((0, 3))`` is an error) and has
no 0-d arrays; ``with mx.np_shape():`` (or ``mx.util.set_np_shape(True)``) switches to
numpy's meaning, where 0 is an empty axis and ``()`` a scalar shape. hybridlab's creation
operators follow the switch; it is per thread, like MXNet's.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Iterator

_state = threading.local()


def is_np_shape() -> bool:
    """True inside ``np_shape()``: shapes with 0 and () are numpy's."""
    return bool(getattr(_state, "np_shape", False))


def set_np_shape(active: bool) -> bool:
    """Switch numpy shape semantics on or off; returns the previous setting."""
    previous = is_np_shape()
    _state.np_shape = bool(active)
    return previous


@contextlib.contextmanager
def np_shape(active: bool = True) -> Iterator[None]:
    """``with np_shape():`` numpy's shapes (0 is an empty axis, () a scalar) inside."""
    previous = set_np_shape(active)
    try:
        yield
    finally:
        set_np_shape(previous)


def is_np_array() -> bool:
    """False: hybridlab has no ``mx.np`` arrays (MXNet's switch for them)."""
    return False


class _NumpyArrayScope:
    """MXNet's scope of the ``mx.np`` switch, which hybridlab does not have: the class is
    here for code that imports it; ``is_np_array()`` stays False."""

    _current = None

    def __init__(self, is_np_array: bool) -> None:
        self._is_np_array = bool(is_np_array)


def getenv(name: str) -> str | None:
    """An environment variable as the library sees it (MXNet's C library has its own copy
    of the environment; hybridlab's is Python's)."""
    return os.environ.get(name)


def setenv(name: str, value: str | None) -> None:
    """Set an environment variable, or unset it with ``None`` (``mx.util.setenv``)."""
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
