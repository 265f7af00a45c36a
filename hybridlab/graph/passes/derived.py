"""Inputs a pass derives from other inputs (a transposed weight, a folded one), and how
the caller computes them.

NOTE: [Derived inputs] a pass that wants a weight in another form (transposed, folded
with a BatchNorm) cannot compute it: it sees the graph, not the values. It adds a new
graph input, a ``var`` whose attributes say what it is computed from, and the caller
(CachedOp, or a test feeding ``graph.evaluate``) computes it with :func:`derived_input`.
The pass that marks such vars registers in :data:`READERS` how to read its mark:
the names of the inputs the var is computed from, the function of their values, and a
few words for drawings -- so nothing outside that pass knows its attributes' format.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, NamedTuple

import numpy as np

from hybridlab.graph.ir import Graph, Node


class Derivation(NamedTuple):
    """How a derived input is made: its ``sources`` (input names; "" for an absent one,
    whose value is None), ``make(*their values)``, and ``text`` for a drawing's label."""

    sources: tuple[str, ...]
    make: Callable[..., np.ndarray]
    text: str


# marking attribute -> how to read a var marked with it (each marking pass registers its own)
READERS: dict[str, Callable[[Node], Derivation]] = {}


def derived_input(node: Node) -> Derivation | None:
    """For an input a pass added, its :class:`Derivation`; None for any other input."""
    attrs = dict(node.attrs)
    return next((read(node) for mark, read in READERS.items() if mark in attrs), None)


def derived_values(graph: Graph, values: Mapping[str, Any]) -> list[Any]:
    """The arrays for ``graph.inputs``: ``values`` by name, and each derived input computed
    from them (for feeding ``graph.evaluate`` or a compiled program by hand)."""
    arrays = []
    for node in graph.inputs:
        derived = derived_input(node)
        if derived is None:
            arrays.append(values[node.name])
        else:
            arrays.append(derived.make(*(values[s] if s else None for s in derived.sources)))
    return arrays
