"""The front end the compiler writes new nodes with, installed from above (``symbol``).

What this module teaches
------------------------
``graph.autodiff`` builds a backward graph by calling each op's gradient rule,
``OpDef.grad(F, inputs, outputs, out_grads)``, with graph values: ``F`` must be a
namespace whose functions add IR nodes (``F.broadcast_mul(a, b)``) and whose values have
the operator methods (``a * b``, ``a.sum()``). ``sym`` is exactly that, but it sits above
this package (it is MXNet's API over the IR). So the dependency is inverted: ``symbol``
installs itself here when imported (:func:`install`), and the graph layer asks
:func:`current`. ``import hybridlab`` imports ``symbol``, so the slot is always filled.
The executor (below ``symbol`` too) hands its users Symbols the same way
(``FrontEnd.symbol``: graph values -> a Symbol).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Callable, NamedTuple

from hybridlab.errors import GraphError


class FrontEnd(NamedTuple):
    namespace: ModuleType  # F: one function per operator, returning wrapped values
    wrap: Callable[[Any], Any]  # graph Value -> front-end value
    unwrap: Callable[[Any], Any]  # front-end value (one output) -> graph Value
    symbol: Callable[[Any], Any]  # graph Values -> the user's Symbol of them (the executor's)


_installed: FrontEnd | None = None


def install(namespace: ModuleType, wrap: Callable[[Any], Any],
            unwrap: Callable[[Any], Any], symbol: Callable[[Any], Any]) -> None:
    """Make ``namespace`` the graph-building front end (``symbol`` does, when imported)."""
    global _installed
    _installed = FrontEnd(namespace, wrap, unwrap, symbol)


def current() -> FrontEnd:
    """The installed front end; a clear error if none is (import hybridlab.symbol)."""
    if _installed is None:
        raise GraphError("no graph-building front end is installed: import hybridlab "
                         "(or hybridlab.symbol) before differentiating a graph")
    return _installed
