"""The shared part of the exercise checks: :class:`Feedback` and running student code."""

from __future__ import annotations

import functools
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
    except Exception as err:
        return None, Feedback(False, f"{what} raised {type(err).__name__}: {err}")


def ops_in(symbol: Any) -> list[str]:
    """The operator names in a Symbol's graph, in topological order."""
    from hybridlab.lab.graphs import as_graph

    graph, _ = as_graph(symbol)
    return [str(node.op) for node in graph.nodes if node.kind == "call"]


def compare_block(block_class: type, reference: Callable[[np.ndarray], np.ndarray],
                  batches: list[Any], what: str, fix: str, success: str,
                  **flags: Any) -> Feedback:
    """Run a fresh ``block_class()`` on every batch imperatively, then hybridized with
    ``flags`` (one block, so a branch frozen by the first trace would show); ``success``
    when every output matches ``reference`` on the numpy input, else the reason why not."""
    block, error = run(block_class, "creating the block")
    if error is not None:
        return error
    block.initialize()
    for mode in ("imperatively", "hybridized"):
        if mode == "hybridized":
            block.hybridize(**flags)
        for x in batches:
            out, error = run(functools.partial(block, x), f"the block, {mode}, on a {x.shape} "
                                                          "input,")
            if error is not None:
                return Feedback(False, f"{error.message}\n  Hint: {fix}" if mode == "hybridized"
                                else error.message)
            want = reference(x.asnumpy())
            if out.shape != want.shape:
                return Feedback(False, f"{mode}, a {x.shape} input gives shape {out.shape}; "
                                       f"wanted {want.shape} ({what})")
            if not np.allclose(out.asnumpy(), want, atol=1e-5):
                return Feedback(False, f"{mode}, on a {x.shape} input, the numbers are not "
                                       f"{what}")
    return Feedback(True, success)
