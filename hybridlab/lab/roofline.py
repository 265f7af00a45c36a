"""A roofline: which operators are limited by arithmetic and which by memory.

What this module teaches
------------------------
A kernel reads and writes bytes and does floating-point operations. A machine can do at
most ``peak`` operations a second and move at most ``bandwidth`` bytes a second, so a
kernel of *arithmetic intensity* ``I = flops / bytes`` can reach at most
``min(peak, bandwidth * I)`` operations a second: the *roofline* (Williams, Waterman and
Patterson, 2009; d2l's chapter on hardware). Below the *ridge* ``I = peak / bandwidth`` a
kernel is memory-bound -- faster arithmetic would not help it -- and above it,
compute-bound.

:func:`operator_costs` reads both numbers of every operator off a compiled graph's
types, so they are exact for the program that runs, not estimates: a convolution does
``2 * K * (C / groups) * kh * kw`` operations per output element, a matrix product
``2 * in`` per output, an elementwise step one per element (a fused group one per element
and step), a pooling one per window element; it moves its inputs, its weights and its
output once (the least it can move: caches only ever add to it). The peaks come from a
measurement (the lesson times a large product and a large copy with ``lab.timing.measure``).

Invariants
----------
* Operators that only change how bytes are read (reshapes) do no arithmetic and are left
  out; every other call node of the graph is counted once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Cost:
    """One operator of a compiled graph: its floating-point operations and bytes moved."""

    name: str
    op: str
    flops: int
    bytes: int

    @property
    def intensity(self) -> float:
        """Floating-point operations per byte moved."""
        return self.flops / self.bytes


def _size(aval: Any) -> int:
    return int(math.prod(aval.shape))


def _flops(node: Any) -> int:
    """The floating-point operations of one call node (0 for a view such as a reshape)."""
    op, attrs, out = str(node.op), node.attr_dict, node.aval[0]
    ins = [value.aval for value in node.inputs]
    if op == "Convolution":
        kernel: tuple[int, ...] = tuple(ins[1].shape)  # (K, C / groups, kh, kw)
        return 2 * _size(out) * math.prod(kernel[1:])
    if op == "FullyConnected":
        inputs: int = ins[1].shape[1]
        return 2 * _size(out) * inputs
    if op == "Pooling":
        window: tuple[int, ...] = tuple(attrs.get("kernel") or (1,))
        return _size(out) * math.prod(window)
    if op == "_fused":
        steps: int = sum(1 for inner in attrs["program"].nodes if inner.kind == "call")
        return steps * _size(out)
    if node.opdef.view:
        return 0
    return _size(out)


def operator_costs(graph: Any) -> list[Cost]:
    """Every operator of ``graph`` (a typed graph IR, e.g. a compiled program's) that does
    arithmetic, with its operations and the bytes it must read and write."""
    costs = []
    for node in graph.nodes:
        if node.kind != "call":
            continue
        flops = _flops(node)
        if flops == 0:
            continue
        moved = sum(_size(v.aval) * v.aval.dtype.itemsize for v in node.inputs)
        moved += sum(_size(aval) * aval.dtype.itemsize for aval in node.aval)
        costs.append(Cost(node.name, str(node.op), flops, moved))
    return costs


def roof(intensity: float, peak: float, bandwidth: float) -> float:
    """The most operations a second a kernel of this intensity can reach."""
    return min(peak, bandwidth * intensity)


def ridge(peak: float, bandwidth: float) -> float:
    """The intensity where the two limits meet: below it, memory-bound."""
    return peak / bandwidth
