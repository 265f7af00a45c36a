"""What every compiler pass is given and what it gives back: ``pass(graph, context) -> PassResult``.

One calling convention for every pass, the compiler's and a user's: the graph, and the
:class:`PassContext` saying what the program is compiled for (a pass that needs nothing
of it ignores it). The result names its parts: the new graph, the changes (one line
each, for the hybridization report and the pass explorer), and :class:`Note` s, what the
pass explains beyond its changes (BatchNorm folding's formula, with its arithmetic on
real numbers) -- so the pass explorer shows any pass's notes without knowing its internals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, NamedTuple

if TYPE_CHECKING:
    from hybridlab.graph.ir import Graph


@dataclass(frozen=True)
class PassContext:
    """``training``: the program runs in training mode (BatchNorm lowers to the batch's
    statistics, Dropout drops). ``keep``: layer operators ``lower_operators`` leaves whole
    (the ONNX exporter keeps those ONNX has as one operator). ``convolutions``: what
    chooses each convolution's algorithm, ``(name, key, trials) -> AlgorithmChoice``
    (``graph.autotune.AlgorithmTuner``, which measures); None: im2col for every one."""

    training: bool = False
    keep: frozenset[str] = frozenset()
    convolutions: Callable[..., Any] | None = None


PREDICTION = PassContext()  # the default: compiled to predict, every layer operator lowered


@dataclass(frozen=True)
class Note:
    """What a pass explains beyond its changes: ``text``, and optionally ``on_values``,
    the same on real numbers -- given the graph inputs' arrays by name and which element
    to show (an output channel), the text, or None when ``values`` lacks what it needs (a
    pass sees the graph, never the values: the explorer has them)."""

    text: str
    on_values: Callable[[Mapping[str, Any], int], str | None] | None = None


class PassResult(NamedTuple):
    """What a pass returns: the new ``graph`` (the input itself when nothing changed), its
    ``changes`` (human-readable lines; empty when none) and its ``notes``."""

    graph: Graph
    changes: list[str]
    notes: tuple[Note, ...] = ()
