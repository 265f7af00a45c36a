"""Where in the *student's* code something happened: the one user-line finder.

What this module teaches
------------------------
An error raised deep inside the engine, the graph IR or a hybridize trace is only useful
if it names the line the student wrote. All three ask this module, so the rule and the
format are written once:

* **user code** is every file outside the ``hybridlab`` package, *plus* the package's
  ``exercises/`` (the blocks and functions an exercise hands the student are the
  student's code to fix); the code hybridlab generates (``<hybridlab-...>`` file names)
  and everything else in the package are not;
* **the format** is ``file.py:12 `source line``` -- the file's base name only, because a
  notebook cell's file is ``/tmp/ipykernel_<pid>/<hash>.py``, whose directory changes
  with every kernel.

The answer per file name is cached (:data:`_IS_USER`): the engine asks on every push, and
a hybridized call is several frames deep in the package.
"""

from __future__ import annotations

import linecache
import os
import sys
from types import FrameType

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_EXERCISES = _PACKAGE + "exercises" + os.sep
UNKNOWN = "<unknown line>"


class _UserFiles(dict[str, bool]):
    """file name -> is it user code? Worked out once per file (``__missing__``)."""

    def __missing__(self, filename: str) -> bool:
        path = filename if filename.startswith("<") else os.path.abspath(filename)
        ours = path.startswith((_PACKAGE, "<hybridlab-")) and not path.startswith(_EXERCISES)
        self[filename] = not ours
        return not ours


_IS_USER = _UserFiles()


def is_user_code(filename: str) -> bool:
    """Is ``filename`` (a code object's ``co_filename``) the student's code?"""
    return _IS_USER[filename]


def is_outside_package(filename: str) -> bool:
    """Is ``filename`` outside hybridlab, exercises included? Tracing uses this narrower
    rule to decide what to *inspect or refuse* (the hybridization report, ``nd.array``
    in a trace): the exercises' deliberately broken blocks keep their planned behaviour,
    while errors still *name* their lines (:func:`is_user_code`)."""
    path = filename if filename.startswith("<") else os.path.abspath(filename)
    return not path.startswith((_PACKAGE, "<hybridlab-"))


def user_frame(depth: int = 0) -> FrameType | None:
    """The innermost frame of user code, looking from ``depth`` frames above the caller
    (0: the caller itself) outwards."""
    frame: FrameType | None = sys._getframe(depth + 1)
    while frame is not None and not _IS_USER[frame.f_code.co_filename]:
        frame = frame.f_back
    return frame


def format_line(filename: str, lineno: int) -> str:
    """``file.py:12 `source``` (the source line when it can be read)."""
    text = linecache.getline(filename, lineno).strip()
    where = f"{os.path.basename(filename)}:{lineno}"
    return f"{where} `{text}`" if text else where


def user_line(depth: int = 0) -> str:
    """The formatted innermost user line (looking outwards from ``depth`` frames above the
    caller), or ``<unknown line>``."""
    frame = user_frame(depth + 1)
    return UNKNOWN if frame is None else format_line(frame.f_code.co_filename, frame.f_lineno)
