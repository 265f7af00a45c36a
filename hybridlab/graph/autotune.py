"""Autotuning: of two programs that compute the same thing, keep the one that is faster here.

What this module teaches
------------------------
Whether a rewrite pays can depend on the machine, not on the graph. The layout pass
``pretranspose_weights`` gives each dense layer its weight stored ``(in, out)``; one
BLAS kernel (OpenBLAS's for AVX-512) multiplies that layout faster at batch 64, another
(its Haswell kernel) runs both layouts at the same speed, and at batch 1 the pass's extra
bias addition makes the program slower everywhere. No rule written in advance gets all
three right; a measurement does. cuDNN does this for convolution algorithms, and MXNet
switched it on with ``MXNET_CUDNN_AUTOTUNE_DEFAULT``.

So, on the first call of a new input signature in inference, ``CachedOp`` compiles the
program twice -- as the pipeline makes it, and with the layout pass -- and :func:`choose`
times both on that call's own inputs: a few rounds, the two taking turns (A B, B A, ...)
so that drift on a shared machine hits both alike, each round a warm call and then
``CALLS`` timed ones, stopping after ``ROUNDS`` rounds or once ``BUDGET`` seconds were
spent. The medians decide, and the choice is kept for that signature. The layout must be
clearly faster (``MARGIN``) to be chosen: it costs a second copy of every weight.

The same measurement chooses each convolution's algorithm (:class:`AlgorithmTuner`, NOTE
[Convolution algorithms] in ``graph/passes/choose_convolutions.py``): im2col, Winograd's
F(2x2, 3x3), or the direct depthwise one, timed on random inputs of the convolution's
shapes the first time a signature is compiled, and remembered for the process, as
cuDNN's algorithm search is.

The timer is a parameter (:class:`Tuner`'s ``measure``), so a test decides which program
is faster; ``HYBRIDLAB_AUTOTUNE=0`` (the ``AUTOTUNE`` flag) or ``hybridize(autotune=
False)`` switch the measurement off, and the program is then exactly the pipeline's.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Sequence, TypeVar

AS_STORED, PRETRANSPOSED = "as stored", "pre-transposed"
ROUNDS = 21  # at most, rounds of (a warm call, CALLS timed calls) per candidate
CALLS = 3
BUDGET = 0.1  # seconds of timing at most: a large network stops after a round or two
# Chosen only if at most 95% of the default's time: the copies cost memory, and at batch 1
# the two programs of the seeds' MLP measure within a few percent of each other, where a
# 3% margin let the noise of a shared machine flip the choice from run to run.
MARGIN = 0.95

Run = Callable[[Sequence[Any]], Any]  # runs one candidate on the call's input arrays
Measure = Callable[[str, Run, Sequence[Any], int], float]


def wall_clock(name: str, run: Run, arrays: Sequence[Any], calls: int) -> float:
    """Seconds per call of ``run``: one warm call (the other candidate ran last, its data
    fills the caches), then ``calls`` calls timed together."""
    run(arrays)
    start = time.perf_counter()
    for _ in range(calls):
        run(arrays)
    return (time.perf_counter() - start) / calls


@dataclass(frozen=True)
class LayoutChoice:
    """What was measured for one signature: the candidates' median seconds per call."""

    chosen: str
    seconds: dict[str, float] = field(default_factory=dict)

    def __str__(self) -> str:
        other = [name for name in self.seconds if name != self.chosen]
        times = f"{self.seconds[self.chosen] * 1e6:.1f} us a call" + "".join(
            f", {self.seconds[name] * 1e6:.1f} us {name}" for name in other)
        return f"weights {self.chosen} (measured here: {times})"


@dataclass(frozen=True)
class AlgorithmChoice:
    """The algorithm measured fastest for one convolution's signature, and the candidates'
    median seconds per call."""

    chosen: str
    seconds: dict[str, float] = field(default_factory=dict)

    def __str__(self) -> str:
        others = "".join(f", {name} {seconds * 1e3:.2f} ms" for name, seconds
                         in self.seconds.items() if name != self.chosen)
        return (f"{self.chosen} (measured here: {self.seconds[self.chosen] * 1e3:.2f} ms a "
                f"call{others})")


Choice = TypeVar("Choice", LayoutChoice, AlgorithmChoice)


@dataclass(frozen=True)
class Tuner:
    """How candidates are timed: ``measure(name, run, arrays, calls) -> seconds a call``
    (:func:`wall_clock`, or a fake in tests), ``rounds`` and ``budget`` bound the work."""

    measure: Measure = wall_clock
    rounds: int = ROUNDS
    budget: float = BUDGET

    def choose(self, candidates: dict[str, Run], arrays: Sequence[Any],
               kind: type[Choice] = LayoutChoice) -> Choice:  # type: ignore[assignment]
        """The fastest of ``candidates`` (the first is the default, kept unless another
        takes at most ``MARGIN`` of its time), as a ``kind``."""
        names = list(candidates)
        samples: dict[str, list[float]] = {name: [] for name in names}
        spent = 0.0
        for round_number in range(self.rounds):
            order = names if round_number % 2 == 0 else names[::-1]  # neither always first
            for name in order:
                seconds = self.measure(name, candidates[name], arrays, CALLS)
                samples[name].append(seconds)
                spent += seconds * (CALLS + 1)
            if spent > self.budget:
                break
        medians = {name: statistics.median(times) for name, times in samples.items()}
        default, best = names[0], min(names[1:], key=medians.__getitem__)
        chosen = best if medians[best] <= MARGIN * medians[default] else default
        return kind(chosen, medians)


class AlgorithmTuner:
    """Chooses among a convolution's algorithms by timing them (``tuner``), once per
    signature: ``tuner(name, key, trials) -> AlgorithmChoice`` for the layer ``name``,
    where ``trials()`` gives the candidates (the default first) and the inputs to time
    them on. A choice is remembered for the process (with the timer that made it: a test's
    fake timer has its own); ``chosen`` keeps this tuner's answers by layer name."""

    remembered: ClassVar[dict[Any, AlgorithmChoice]] = {}

    def __init__(self, tuner: Tuner | None = None) -> None:
        self.tuner = Tuner() if tuner is None else tuner
        self.chosen: dict[str, AlgorithmChoice] = {}

    def __call__(self, name: str, key: Any,
                 trials: Callable[[], tuple[dict[str, Run], Sequence[Any]]]) -> AlgorithmChoice:
        memo = (self.tuner.measure, key)
        choice = self.remembered.get(memo)
        if choice is None:
            candidates, arrays = trials()
            choice = self.remembered[memo] = self.tuner.choose(candidates, arrays,
                                                               AlgorithmChoice)
        self.chosen[name] = choice
        return choice
