"""MXNet's ``mx.base``: the error the engine raises at sync points, and the few helpers
MXNet's users import from it (``data_dir``, ``py_str``, ``_as_list``)."""

import os
from typing import Any, Sequence

import numpy as np

from hybridlab.errors import MXNetError, NotImplementedForSymbol

__all__ = ["MXNetError", "NotImplementedForSymbol", "__version__", "data_dir", "mx_real_t",
           "py_str"]

mx_real_t = np.float32  # MXNet's default real type: every array's dtype unless one is given


def data_dir() -> str:
    """Where downloaded files are kept: ``$MXNET_HOME``, else ``~/.mxnet`` (as MXNet, so
    both read one cache)."""
    return os.getenv("MXNET_HOME") or os.path.join(os.path.expanduser("~"), ".mxnet")


def py_str(text: Any) -> str:
    """A C string from MXNet's library as a Python ``str`` (bytes are decoded)."""
    return text.decode("utf-8") if isinstance(text, bytes) else str(text)


def _as_list(value: Any) -> list[Any]:
    """``value`` if it is a list, else ``[value]`` (MXNet's helper; a tuple is one item)."""
    return value if isinstance(value, list) else [value]

# The package version (``mx.__version__``), here so that modules inside the package (the
# JSON writer of symbol.py) can read it without importing the package root.
__version__ = "0.2.0"


def _flatten(value: Any) -> tuple[list[Any], Any]:
    """MXNet's nested inputs and outputs taken apart: the leaves (arrays, Symbols, None)
    in order, and the format that rebuilds them (None for a leaf, a list of formats for a
    list or a tuple)."""
    if not isinstance(value, (list, tuple)):
        return [value], None
    leaves: list[Any] = []
    formats = []
    for item in value:
        items, item_format = _flatten(item)
        leaves += items
        formats.append(item_format)
    return leaves, formats


def _regroup(leaves: Sequence[Any], structure: Any) -> Any:
    """The structure :func:`_flatten` took apart, rebuilt from ``leaves`` -- with lists,
    as a hybridized MXNet block returns them (a tuple comes back as a list)."""
    remaining = iter(leaves)

    def build(part: Any) -> Any:
        return next(remaining) if part is None else [build(item) for item in part]
    return build(structure)
