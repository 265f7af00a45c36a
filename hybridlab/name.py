"""Automatic names for symbols: MXNet's ``mx.name.NameManager`` and ``mx.name.Prefix``.

What this module teaches
------------------------
Every node of a symbolic graph needs a name: a saved model refers to its parameters by
name (``fc1_weight``), and an error message is only useful if it can say *which* node
failed. Users name few nodes, so the framework makes up the rest from a *hint* (the
operator's name in lower case) and a counter per hint, exactly as MXNet 1.x did::

    >>> import hybridlab as mx
    >>> with mx.name.NameManager():               # fresh counters
    ...     a = mx.sym.var('a')
    ...     print(mx.sym.relu(a), mx.sym.relu(a), a + a, mx.sym.relu(a, name='act'))
    <Symbol relu0> <Symbol relu1> <Symbol _plus0> <Symbol act>
    >>> with mx.name.Prefix('net_'):              # what a Gluon block does while tracing
    ...     print(mx.sym.relu(a), mx.sym.relu(a, name='act'))
    <Symbol net_relu0> <Symbol net_act>

Invariants
----------
* The current manager is per thread (two threads tracing blocks never share counters).
* ``with`` a manager makes it current and restores the previous one on exit, even on error.
* A name the user gives is kept as is; a :class:`Prefix` adds its prefix to it as well.
* Variables (``sym.var``) are named by the user and never go through a manager.
"""

from __future__ import annotations

import threading
from typing import Any


class _CurrentManager(type):
    """Makes ``NameManager.current`` a class-level property, as in MXNet."""

    @property
    def current(cls) -> NameManager:
        manager = getattr(_LOCAL, "manager", None)
        if manager is None:  # each thread starts with its own default manager
            manager = _LOCAL.manager = NameManager()
        return manager

    @current.setter
    def current(cls, manager: NameManager) -> None:  # this thread's, as MXNet's
        _LOCAL.manager = manager


_LOCAL = threading.local()


class NameManager(metaclass=_CurrentManager):
    """Names nodes ``<hint><n>`` with one counter per hint; ``with`` it for fresh counters."""

    def __init__(self) -> None:
        self._counter: dict[str, int] = {}

    def get(self, name: str | None, hint: str) -> str:
        """The user's ``name`` if given, otherwise ``hint`` followed by its next number."""
        if name:
            return name
        number = self._counter.get(hint, 0)
        self._counter[hint] = number + 1
        return f"{hint}{number}"

    def __call__(self) -> NameManager:
        """``NameManager.current()`` also works (older MXNet spelled it as a call)."""
        return self

    def __enter__(self) -> NameManager:
        # the manager to restore is kept per thread: two threads may enter one manager
        _previous().append(NameManager.current)
        _LOCAL.manager = self
        return self

    def __exit__(self, *exc_info: Any) -> None:
        _LOCAL.manager = _previous().pop()


class Prefix(NameManager):
    """A manager that puts ``prefix`` in front of every name it gives, including users'."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self._prefix = prefix

    def get(self, name: str | None, hint: str) -> str:
        return self._prefix + super().get(name, hint)


def _previous() -> list[NameManager]:
    """This thread's stack of managers to restore (one per ``with`` entered)."""
    stack = getattr(_LOCAL, "previous", None)
    if stack is None:
        stack = _LOCAL.previous = []
    return stack


def current() -> NameManager:
    """The manager in effect for this thread (``NameManager.current``)."""
    return NameManager.current
