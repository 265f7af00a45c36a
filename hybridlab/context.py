"""Devices (``mx.cpu()``, ``mx.gpu()``, ``mx.Context``): where an array lives.

What this module teaches
------------------------
MXNet tags every array with a *context*, the device that holds its buffer, and copies
between devices explicitly (``x.as_in_context(ctx)``, ``x.copyto(ctx)``). hybridlab runs
on numpy, so the only device is the CPU: ``cpu(0)`` exists so that MXNet code keeps
working and prints what it printed, and ``gpu()`` raises at once with the reason and the
fix instead of failing deep inside an operator.

Invariant: every NDArray's context is ``cpu(0)``; ``cpu(n)`` for another ``n`` is the
same device (MXNet code uses ``cpu(i)`` for data-parallel splits on one machine).
"""

from __future__ import annotations

from typing import Any

from hybridlab.errors import NoGPUError


class Context:
    """A device: ``Context('cpu', 0)``; works as ``with mx.cpu(): ...`` like MXNet."""

    _default: Context | None = None
    device_type: str
    device_id: int

    def __init__(self, device_type: str | Context = "cpu", device_id: int = 0) -> None:
        if isinstance(device_type, Context):
            given = device_type
            device_type, device_id = given.device_type, given.device_id
        if device_type != "cpu":
            raise NoGPUError(
                f"hybridlab runs on the CPU only (numpy), so device {device_type!r} does not "
                f"exist; use mx.cpu() (MXNet code often picks it with "
                f"`mx.gpu() if mx.context.num_gpus() else mx.cpu()`)"
            )
        self.device_type = device_type
        self.device_id = int(device_id)

    def __repr__(self) -> str:
        return f"{self.device_type}({self.device_id})"

    def __eq__(self, other: Any) -> bool:
        return (isinstance(other, Context) and other.device_type == self.device_type
                and other.device_id == self.device_id)

    def __hash__(self) -> int:
        return hash((self.device_type, self.device_id))

    def __enter__(self) -> Context:
        self._saved = Context._default
        Context._default = self
        return self

    def __exit__(self, *exc: object) -> None:
        Context._default = self._saved


def cpu(device_id: int = 0) -> Context:
    """The CPU, the device every hybridlab array lives on."""
    return Context("cpu", device_id)


def gpu(device_id: int = 0) -> Context:
    """MXNet's GPU context; raises :class:`~hybridlab.errors.NoGPUError` (CPU only)."""
    return Context("gpu", device_id)


def cpu_pinned(device_id: int = 0) -> Context:
    """MXNet's pinned host memory: plain CPU memory here."""
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
