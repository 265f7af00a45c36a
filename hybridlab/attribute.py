"""Attributes a scope gives every symbol made inside it (MXNet's ``mx.AttrScope``).

What this module teaches
------------------------
A symbolic graph carries more than operators: a node may say which device group it
belongs to (``__ctx_group__``), how fast its parameter learns (``__lr_mult__``), or any
note a tool reads later. Writing ``attr=`` on every call is tedious, so a scope adds
them to each symbol made inside it::

    >>> import hybridlab as mx
    >>> with mx.AttrScope(ctx_group='stage1'):
    ...     x = mx.sym.var('x')
    >>> x.attr('ctx_group')
    'stage1'

Invariants
----------
* The current scope is per thread (``AttrScope.current``, settable, as MXNet's).
* A nested scope adds to the outer one; attributes given to a call win over the scope's.
* On an operator they are notes (``Node.notes``): its kernel never sees them, and the
  variables the call creates for missing inputs (``fc_weight``) get them too (MXNet copies
  the operator's attributes there, so ``lr_mult=`` on a layer reaches its weights).
* MXNet's hidden keys (``lr_mult``, ``wd_mult``, ``ctx_group``, ``force_mirroring``,
  ``mirror_stage``) are stored as ``__key__``: :func:`stored_key` names the stored form.
"""

from __future__ import annotations

import threading
from typing import Any

HIDDEN_KEYS = ("ctx_group", "lr_mult", "wd_mult", "force_mirroring", "mirror_stage")


def stored_key(key: str) -> str:
    """The key an attribute is stored under: ``lr_mult`` -> ``__lr_mult__`` (MXNet's)."""
    return f"__{key}__" if key in HIDDEN_KEYS else key


def is_note(key: str) -> bool:
    """A call's keyword that is an operator-level attribute, not an operator parameter:
    ``attr``, a hidden key (``lr_mult=``) or a ``__dunder__`` name (MXNet's rule)."""
    return key == "attr" or key in HIDDEN_KEYS or (
        len(key) > 4 and key.startswith("__") and key.endswith("__"))


def operator_notes(given: dict[str, Any]) -> dict[str, str]:
    """The operator-level attributes of one call (its ``attr={...}``, hidden keys and
    ``__dunder__`` keywords, over the current scope's), in their stored string form."""
    found = dict(given.get("attr") or {})
    found.update((key, value) for key, value in given.items() if key != "attr")
    return {stored_key(key): str(value) for key, value in AttrScope.current.get(found).items()}


class _CurrentScope(type):
    """Makes ``AttrScope.current`` a per-thread class property with a setter."""

    @property
    def current(cls) -> AttrScope:
        scope = getattr(_LOCAL, "scope", None)
        if scope is None:
            scope = _LOCAL.scope = AttrScope()
        return scope

    @current.setter
    def current(cls, scope: AttrScope) -> None:
        _LOCAL.scope = scope


_LOCAL = threading.local()


class AttrScope(metaclass=_CurrentScope):
    """``with AttrScope(key='value'):`` every symbol made inside gets these attributes."""

    def __init__(self, **kwargs: Any) -> None:
        for key, value in kwargs.items():
            if not isinstance(value, str):
                raise ValueError(f"AttrScope: attribute values must be strings, got "
                                 f"{key}={value!r}; write {key}={str(value)!r}")
        self._attr: dict[str, str] = dict(kwargs)
        self._previous: list[AttrScope] = []

    def get(self, attr: dict[str, Any] | None) -> dict[str, str]:
        """This scope's attributes updated with ``attr`` (the call's own win)."""
        return {**self._attr, **(attr or {})}

    def __enter__(self) -> AttrScope:
        outer = AttrScope.current
        self._previous.append(outer)
        self._attr = {**outer._attr, **self._attr}
        AttrScope.current = self
        return self

    def __exit__(self, *exc_info: Any) -> None:
        AttrScope.current = self._previous.pop()
