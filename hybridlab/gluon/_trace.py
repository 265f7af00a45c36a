"""The trace of ``hybrid_forward``: run the user's Python once, with Symbols.

What this module teaches
------------------------
``hybridize()`` runs a block's Python exactly once, with Symbols, and keeps only the
operators it recorded. Everything else the Python did (prints, branches, numbers read
from ``self``) happens at trace time only: ``_report.py`` explains and reports those.

While a block is traced, :func:`tracing` keeps a :class:`TraceFrame` on a thread-local
stack and watches the user's own ``hybrid_forward``/``forward`` lines with
``sys.settrace``; it writes what it saw into a :class:`HybridizationReport`
(``_report.inspect_line`` before each line). The frame
also carries the running-statistics updates BatchNorm asks for (the compiled program
returns them as extra outputs). Shapes need no help: the traced inputs are
``sym.var('data', shape=...)``, so every traced node knows its shape, and layers size
their deferred parameters from it (:func:`shape_of`, the same for an NDArray).

:func:`~hybridlab.userline.user_line` finds "where" for teaching errors: the innermost frame of
user code (outside the package, or in exercises/), i.e. the line inside ``hybrid_forward``;
:func:`user_stacklevel` points a warning at that line.
"""

from __future__ import annotations

import builtins
import contextlib
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator

from hybridlab.errors import (
    ArrayInTraceError,
    HybridizeError,
    SymbolBoolError,
    SymbolShapeError,
    attribute_message,
)
from hybridlab.gluon._report import HybridizationReport, inspect_line
from hybridlab.userline import UNKNOWN, format_line, is_outside_package, is_user_code, user_line

_EXTRA_FIX = {
    SymbolBoolError: "; for data-dependent control flow use F.contrib.cond / "
                     "F.contrib.while_loop",
}


class _State(threading.local):
    def __init__(self) -> None:  # run once in each thread that reads _STATE
        self.stack: list[TraceFrame] = []  # the traces in progress, innermost last


_STATE = _State()


@dataclass
class TraceFrame:
    """One block being traced: its report and the running-stat updates layers ask for."""

    block: Any
    report: HybridizationReport
    static_shape: bool = False
    aux_updates: list[tuple[Any, Any]] = field(default_factory=list)  # (Parameter, Symbol)


def current() -> TraceFrame | None:
    """The innermost trace in progress on this thread, or None when running imperatively."""
    stack = _STATE.stack  # (a hybridized block's call reads _STATE.stack itself)
    return stack[-1] if stack else None


@contextlib.contextmanager
def tracing(frame: TraceFrame) -> Iterator[TraceFrame]:
    """Trace with ``frame`` current; watch prints and the user's lines meanwhile.

    NOTE: [Interception per thread] a trace reports ``print`` and refuses ``nd.array`` in
    the user's code -- in *this thread* only. Nothing is swapped for the trace's duration
    (that would be visible to every other thread, and two threads restoring in the wrong
    order would leave the swap in place): :func:`_intercept` installs once, for good, a
    ``print`` that reports only when the calling thread is tracing, and ndarray's guard
    hook, which does the same. Outside a trace both cost one thread-local read.
    """
    from hybridlab import symbol

    _intercept()
    stack = _STATE.stack
    stack.append(frame)
    old_tracer = sys.gettrace()
    sys.settrace(_make_tracer(frame.report))
    shapes = symbol.static_shapes() if frame.static_shape else contextlib.nullcontext()
    try:
        with shapes, symbol.traced():
            yield frame
    except HybridizeError as err:
        raise locate(err, frame.block) from None
    except AttributeError as err:
        # an NDArray-only attribute (x.grad, x.T) read from a Symbol teaches; a typo
        # (x.resahpe) stays Python's AttributeError, with its "did you mean" hint
        from hybridlab import ndarray
        owner, name = getattr(err, "obj", None), getattr(err, "name", None)
        if not isinstance(owner, symbol.Symbol) or not hasattr(ndarray.NDArray, name or ""):
            raise
        raise locate(SymbolShapeError(attribute_message(name, repr(owner)))  # type: ignore[arg-type]
                     .with_traceback(err.__traceback__), frame.block) from None
    finally:
        sys.settrace(old_tracer)
        stack.pop()


_INSTALLED = threading.Lock()


def _intercept() -> None:
    """Install, once per process, the thread-aware ``print`` and ``nd.array`` guard."""
    from hybridlab import ndarray

    with _INSTALLED:
        if ndarray._array_guard is not None:
            return
        real_print = builtins.print

        def traced_print(*args: Any, **kwargs: Any) -> None:
            frame = current()
            if frame is not None:  # only a tracing thread reports
                frame.report.add("print", user_line(), "prints only while tracing; later "
                                 "calls run the compiled program and print nothing")
            real_print(*args, **kwargs)

        builtins.print = traced_print
        ndarray._array_guard = _refuse_array_in_trace


def _refuse_array_in_trace() -> None:
    """ndarray's guard: ``nd.array`` written in the user's code while this thread traces."""
    if _STATE.stack and is_outside_package(sys._getframe(2).f_code.co_filename):
        raise ArrayInTraceError(
            "nd.array(...) inside a traced hybrid_forward: the compiled program can only "
            "hold F.* operators, and an NDArray made here would be frozen or rejected. "
            "Fix: F.ones / F.zeros / F.full for constants, or a parameter "
            "(self.params.get(..., grad_req='null')) for a fixed array")


def locate(err: HybridizeError, block: Any) -> HybridizeError:
    """The same error, its message extended with the block and the user's line."""
    line, traceback = UNKNOWN, err.__traceback__
    while traceback is not None:
        code = traceback.tb_frame.f_code
        if is_user_code(code.co_filename):
            line = format_line(code.co_filename, traceback.tb_lineno)
        traceback = traceback.tb_next
    hint = _EXTRA_FIX.get(type(err), "")  # type: ignore[arg-type]
    located = type(err)(f"in block {block.name!r} at {line}:\n  {err}{hint}")
    located.__cause__ = err.__cause__
    return located


def _make_tracer(report: HybridizationReport) -> Any:
    def on_line(frame: Any, event: str, arg: Any) -> Any:
        if event == "line":
            inspect_line(report, frame)
        return on_line

    def on_call(frame: Any, event: str, arg: Any) -> Any:
        code = frame.f_code
        if code.co_name in ("hybrid_forward", "forward") and is_outside_package(code.co_filename):
            return on_line
        return None

    return on_call


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes ``warnings.warn``, called by the caller of this
    function, point at the innermost line outside the hybridlab package."""
    frame: Any = sys._getframe(1)
    level = 1
    while frame is not None and not is_outside_package(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    return level


def where() -> str:
    """Block and user line for an error message raised while tracing."""
    frame = current()
    block = f"in block {frame.block.name!r} " if frame is not None else ""
    return f"{block}at {user_line()}"


def shape_of(x: Any) -> tuple[int, ...]:
    """The shape of an NDArray, or of a traced Symbol (known from the traced input shapes)."""
    return tuple(x.shape) if not hasattr(x, "list_outputs") else tuple(x._static_shape())


def known_shape_of(x: Any) -> tuple[int, ...] | None:
    """The shape of an NDArray or a shaped Symbol; None for ``sym.var('data')``."""
    if not hasattr(x, "list_outputs"):
        return tuple(x.shape)
    aval = x._outputs[0].aval
    return None if aval is None else tuple(aval.shape)
