"""Devices (``mx.cpu()``, ``mx.gpu()``, ``mx.Context``): where an array lives.

What this module teaches
------------------------
MXNet tags every array with a *context*, the device that holds its buffer, and copies
between devices explicitly (``x.as_in_context(ctx)``, ``x.copyto(ctx)``). hybridlab runs
on numpy, so its devices are CPU devices: ``cpu(0)``, ``cpu(1)``, ... are distinct
devices, as in MXNet (data-parallel code splits a batch over ``[mx.cpu(0), mx.cpu(1)]``
on one machine). An array keeps the context it was made on; an operator's result is on
its first input's context (MXNet's rule: ``a + b`` lands where ``a`` is); a copy to
another device is an engine operation (``_copyto``), and a Parameter initialised on
several contexts holds one array per context (``gluon.Parameter.list_data``). Every
device shares the machine's memory, so a "copy" is a real copy of the bytes: what a
transfer costs, in miniature. ``gpu()`` raises at once with the reason and the fix
instead of failing deep inside an operator.

Invariant: contexts are interned -- ``mx.cpu(1) is mx.cpu(1)`` -- so the hot paths
compare them by identity (``x._ctx is y._ctx``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hybridlab.errors import NoGPUError


class Context:
    """A device: ``Context('cpu', 0)``; works as ``with mx.cpu(): ...`` like MXNet."""

    _default: Context | None = None
    _stack: list[Context | None] = []  # the contexts `with` blocks replaced (interned: no
    _interned: dict[tuple[str, int], Context] = {}  # per-object state for nesting)
    device_type: str
    device_id: int

    def __new__(cls, device_type: str | Context = "cpu", device_id: int = 0) -> Context:
        if isinstance(device_type, Context):
            return device_type
        if device_type in ("cpu_pinned", "cpu_shared"):  # MXNet's CPU memories: one here
            device_type = "cpu"
        if device_type != "cpu":
            raise NoGPUError(
                f"hybridlab runs on the CPU only (numpy), so device {device_type!r} does not "
                f"exist; use mx.cpu() (MXNet code often picks it with "
                f"`mx.gpu() if mx.context.num_gpus() else mx.cpu()`)"
            )
        if not isinstance(device_id, (int, np.integer)) or device_id < 0:
            raise ValueError(f"a device id is a number >= 0 (mx.cpu(0), mx.cpu(1)), "
                             f"got {device_id!r}")
        key = (device_type, int(device_id))
        found = cls._interned.get(key)
        if found is None:
            found = cls._interned[key] = super().__new__(cls)
            found.device_type, found.device_id = key
        return found

    def __reduce__(self) -> tuple:  # pickled to a Dask worker: the same interned device
        return (Context, (self.device_type, self.device_id))

    def __repr__(self) -> str:
        return f"{self.device_type}({self.device_id})"

    def __eq__(self, other: Any) -> bool:
        return (isinstance(other, Context) and other.device_type == self.device_type
                and other.device_id == self.device_id)

    def __hash__(self) -> int:
        return hash((self.device_type, self.device_id))

    def __enter__(self) -> Context:
        Context._stack.append(Context._default)
        Context._default = self
        return self

    def __exit__(self, *exc: object) -> None:
        Context._default = Context._stack.pop()


class _DefaultContext:
    """``Context.default_ctx``: MXNet's class attribute for the current context."""

    def __get__(self, obj: Any, owner: Any) -> Context:
        return current_context()


Context.default_ctx = _DefaultContext()  # type: ignore[attr-defined]


def cpu(device_id: int = 0) -> Context:
    """CPU device ``device_id``: ``cpu(0)``, where arrays live unless told otherwise."""
    return Context("cpu", device_id)


def gpu(device_id: int = 0) -> Context:
    """MXNet's GPU context; raises :class:`~hybridlab.errors.NoGPUError` (CPU only)."""
    return Context("gpu", device_id)


def cpu_pinned(device_id: int = 0) -> Context:
    """MXNet's pinned host memory: plain CPU memory here (``cpu(device_id)``)."""
    return Context("cpu", device_id)


def num_gpus() -> int:
    """The number of GPUs hybridlab can use: always 0."""
    return 0


def current_context() -> Context:
    """The context set by the innermost ``with ctx:`` block, else ``cpu(0)``."""
    return Context._default or cpu()


def check_context(ctx: Any, where: str) -> None:
    """Accept ``None``, a Context or a list of them (what MXNet's ``ctx=`` took)."""
    for item in ctx if isinstance(ctx, (list, tuple)) else [ctx]:
        if item is not None and not isinstance(item, (Context, str)):
            raise TypeError(f"{where}: ctx must be a Context such as mx.cpu(), got {item!r}")
        if isinstance(item, str):
            Context(item)


def as_context(ctx: Any, where: str) -> Context:
    """One device from ``ctx=`` (a Context, ``'cpu'``, or None for the current one)."""
    check_context(ctx, where)
    if isinstance(ctx, (list, tuple)):
        raise TypeError(f"{where}: ctx must be one Context here, got the list {ctx!r}")
    return current_context() if ctx is None else Context(ctx)


def as_context_list(ctx: Any, where: str) -> list[Context]:
    """The devices of ``ctx=`` as a list without repeats (``initialize(ctx=[...])``)."""
    check_context(ctx, where)
    items = list(ctx) if isinstance(ctx, (list, tuple)) else [ctx]
    if not items:
        raise ValueError(f"{where}: ctx is an empty list; give at least one device, e.g. "
                         f"[mx.cpu(0), mx.cpu(1)]")
    devices = [as_context(item, where) for item in items]
    if len(set(devices)) != len(devices):
        raise ValueError(f"{where}: ctx lists a device twice ({devices}); each device holds "
                         f"one copy")
    return devices
