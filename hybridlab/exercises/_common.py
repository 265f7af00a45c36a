"""The shared part of the exercise checks: :class:`Feedback` and running student code."""

from __future__ import annotations

import functools
import statistics
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


def interleaved_medians(runs: dict[str, Callable[[], Any]], calls: int, rounds: int,
                        timer: Callable[[], float],
                        switches: dict[str, Callable[[], Any]] | None = None,
                        engine_factory: Callable[[], Any] | None = None
                        ) -> dict[str, float]:
    """Seconds per call of each run, by the course's protocol (lesson 00, "How the course
    measures"): the naive engine, one BLAS thread, rounds of ``calls`` calls of every run
    in rotating order, the median round. ``timer`` is injectable, so a test can pass a
    deterministic clock (a timed check then gives the same verdict on every machine).
    ``switches[name]()``, if given, runs (untimed, with one untimed call) before each round
    of ``name``: ``net.hybridize(...)`` forgets the compiled program, so it cannot sit in
    the timed loop. ``engine_factory`` makes another engine than the naive one."""
    from threadpoolctl import threadpool_limits

    from hybridlab import engine
    from hybridlab import ndarray as nd

    names = list(runs)
    samples: dict[str, list[float]] = {name: [] for name in names}
    chosen = engine.NaiveEngine() if engine_factory is None else engine_factory()
    with engine.engine_scope(chosen), threadpool_limits(1, user_api="blas"):
        for round_index in range(rounds):
            for offset in range(len(names)):
                name = names[(round_index + offset) % len(names)]
                (switches or {}).get(name, lambda: None)()
                runs[name]()  # warm up: a first hybridized call traces and compiles
                nd.waitall()
                start = timer()
                for _ in range(calls):
                    runs[name]()
                nd.waitall()
                samples[name].append((timer() - start) / calls)
    return {name: statistics.median(values) for name, values in samples.items()}


def how_far_off(guess: float, measured: float) -> tuple[bool, str]:
    """(within a factor of two?, a sentence saying by how much the guess was off)."""
    factor = max(guess / measured, measured / guess)
    side = "high" if guess > measured else "low"
    if factor < 1.05:
        return True, "spot on"
    return factor <= 2.0, f"{factor:.1f} times too {side}"
