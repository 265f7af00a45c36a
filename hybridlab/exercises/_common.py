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


def interleaved_medians(runs: dict[str, Callable[[], Any]], calls: int, rounds: int,
                        timer: Callable[[], float],
                        switches: dict[str, Callable[[], Any]] | None = None,
                        engine: Any = "NaiveEngine") -> dict[str, float]:
    """Seconds per call of each run, by the course's one protocol
    (:func:`hybridlab.lab.timing.measure`; ``calls`` calls a round, in three runs).
    ``timer`` is injectable, so a test can pass a deterministic clock (a timed check then
    gives the same verdict on every machine)."""
    from hybridlab.lab.timing import RUNS, measure

    return measure(runs, engine=engine, rounds=rounds, calls=max(1, calls // RUNS),
                   switches=switches, timer=timer).seconds


NO_EFFECT = 1.0  # the ratio that says "it makes no difference"


def effect(ratio: float) -> float:
    """What a ratio changes: ``ratio - 1`` above 1 and ``1 - 1 / ratio`` below, so that
    twice as long (2.0) and half as long (0.5) are effects of the same size, +1 and -1."""
    return ratio - 1 if ratio >= 1 else 1 - 1 / ratio


@dataclass(frozen=True)
class Judgement:
    """A prediction against a measurement: ``correct`` and how far off it was, in words."""

    correct: bool
    off: str


def _within(factor: float, within: float) -> bool:
    """Less than ``within`` off; exactly ``within`` (up to rounding: 0.2 / 0.1 is not 2.0
    in floating point) is not."""
    return factor < within * (1 - 1e-9)


def _factor_words(factor: float, side: str) -> str:
    if factor < 1.05:
        return "spot on"
    if factor < 1.5:
        return f"{factor - 1:.0%} too {side}"
    return f"{factor:.1f} times too {side}"


def judge_ratio(guess: float, measured: float, within: float = 2.0) -> Judgement:
    """Judge a predicted ratio (``a / b``) against the measured one.

    A guess of 1 ("no effect") is never right, since every ratio the course asks for
    measures an effect. A ratio of 2 or more is judged on itself: right when less than a
    factor ``within`` off. A smaller effect is judged on the effect itself
    (:func:`effect`, ``ratio - 1``): 1.1 against a measured 1.89 predicts an eighth of
    the effect, although the two ratios are only 1.7 apart. An effect in the other
    direction (faster where it is slower) is wrong whatever its size."""
    guessed, real = effect(guess), effect(measured)
    if abs(guessed) < 1e-9:
        return Judgement(False, f"no difference at all (a ratio of 1), but this run "
                                f"measured {_ratio_words(measured)}")
    if abs(real) < 1e-9:
        return Judgement(False, "this run measured no difference at all, so it cannot "
                                "judge a prediction: the machine is too noisy now; run "
                                "the check again")
    if guessed * real < 0:
        return Judgement(False, f"in the wrong direction: you predicted "
                                f"{_ratio_words(guess)}, this run measured "
                                f"{_ratio_words(measured)}")
    if abs(real) >= 1:  # a factor of 2 or more: judged on the ratio itself
        factor = max(guess / measured, measured / guess)
        return Judgement(_within(factor, within), _factor_words(
            factor, "high" if abs(guessed) > abs(real) else "low"))
    factor = max(guessed / real, real / guessed)
    words = _factor_words(factor, "large" if abs(guessed) > abs(real) else "small")
    if words != "spot on":
        words = (f"off in its effect (the ratio minus 1), {words}: you predicted "
                 f"{_ratio_words(guess)}, this run measured {_ratio_words(measured)}")
    return Judgement(_within(factor, within), words)


def _ratio_words(ratio: float) -> str:
    """A ratio with its change in percent: 1.89 is "1.89 (+89%)", 0.8 is "0.80 (-20%)"."""
    return f"{ratio:.2f} ({ratio - 1:+.0%})"


def judge_amount(guess: float, measured: float, within: float = 2.0) -> Judgement:
    """Judge a predicted amount (a time, a saving, a byte count) against the measured one:
    right when less than a factor ``within`` off. A guess of 0 says "nothing" and is
    never right; a measurement of 0 or less cannot judge anything."""
    if not guess > 0:
        return Judgement(False, f"nothing at all ({guess:g}), but this run measured "
                                f"{measured:.3g}")
    if not measured > 0:
        return Judgement(False, "this run measured nothing at all, so it cannot judge a "
                                "prediction: the machine is too noisy now; run the check "
                                "again")
    factor = max(guess / measured, measured / guess)
    return Judgement(_within(factor, within),
                     _factor_words(factor, "high" if guess > measured else "low"))


RULE = ("a prediction counts when it is less than a factor of two off -- for a ratio under 2, "
        "a factor of two off in its effect, the ratio minus 1")


def verdict(judgement: Judgement, report: str) -> Feedback:
    """The feedback of a predict-then-measure check: ``report`` (the measurement, how far
    off, and why), and the rule a wrong answer broke."""
    return Feedback(judgement.correct, report if judgement.correct else f"{report} -- {RULE}")
