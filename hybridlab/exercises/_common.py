"""The shared part of the exercise checks: :class:`Feedback` and running student code."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np


@dataclass(frozen=True)
class Feedback:
    """The verdict of a check: ``correct`` and a sentence explaining it."""

    correct: bool
    message: str

    def __bool__(self) -> bool:
        return self.correct

    def __str__(self) -> str:
        return ("Correct: " if self.correct else "Not yet: ") + self.message

    __repr__ = __str__


def inputs(*shapes: tuple[int, ...], seed: int = 0) -> list[Any]:
    from hybridlab import nd

    rng = np.random.default_rng(seed)
    return [nd.array(rng.normal(size=shape).astype(np.float32)) for shape in shapes]


def run(fn: Callable[[], Any], what: str) -> tuple[Any, Feedback | None]:
    """Call the student's code; an exception becomes feedback instead of a traceback."""
    try:
        return fn(), None
    except Exception as err:  # noqa: BLE001 -- any error in the student's code is feedback
        return None, Feedback(False, f"{what} raised {type(err).__name__}: {err}")


def ops_in(symbol: Any) -> list[str]:
    """The operator names in a Symbol's graph, in topological order."""
    from hybridlab.viz.graph import as_graph

    graph, _ = as_graph(symbol)
    return [node.op for node in graph.nodes if node.kind == "call"]
