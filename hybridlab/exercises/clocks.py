"""Deterministic clocks for the exercise checks that time something.

What this module teaches
------------------------
A predict-then-measure check takes its clock as an argument (``timer=``), so the same check
can measure this machine for a student and, for a test or an assignment's grade, measure a
*cost model* instead: a grade must not depend on how loaded the grading machine was. The
reference solutions' tests (``tests/test_lessons.py``) and the autograded assignments
(``tools/assignments.py``) call the checks with these clocks, in which a time is computed
from what the code did -- engine tasks, waits, workers, compiles -- or steps by fixed
amounts:

* :class:`TaskClock`: one tick per engine task run, the model in which every task costs
  the same and Python around the tasks costs nothing;
* :class:`HandOverClock`: a task clock charging a hand-over for every wait on an array
  (d2l's model of a loop with barriers);
* :class:`WorkerClock`: a task's computing shared among the engine's workers;
* :class:`CompileClock`: a task clock charging every program a CachedOp compiles;
* :func:`stepping_clock`: a clock that moves on by fixed steps at each reading.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from hybridlab import engine

__all__ = ["CompileClock", "HandOverClock", "TaskClock", "WorkerClock", "stepping_clock"]


class TaskClock:
    """A fake ``timer``: one tick (10 µs unless told) per engine task run so far. Under it,
    a call's "time" is the number of engine tasks it runs."""

    def __init__(self, tick: float = 1e-5) -> None:
        self.tick = tick

    def __call__(self) -> float:
        current: Any = engine.current()
        if not getattr(current, "_task_clock", False):
            current.set_tracing(True)
            current._task_clock = True
        return len(current.trace) * self.tick


class HandOverClock(TaskClock):
    """A :class:`TaskClock` that also charges ``hand_over`` seconds for every wait on one
    array (``wait_to_read``, ``asnumpy``, ``print``): d2l's cost model of a loop, in which a
    task costs ``t2`` and a barrier adds the hand-over ``t3``."""

    def __init__(self, tick: float = 1e-5, hand_over: float = 2e-5) -> None:
        super().__init__(tick)
        self.hand_over = hand_over

    def __call__(self) -> float:
        current: Any = engine.current()
        waits = getattr(current, "_hand_over_waits", None)
        if waits is None:
            waits = current._hand_over_waits = [0]
            original = current.wait_for_var

            def counted(var: engine.Var) -> None:
                waits[0] += 1
                original(var)

            current.wait_for_var = counted  # this engine only: it lives as long as the check
        return super().__call__() + waits[0] * self.hand_over


class WorkerClock(TaskClock):
    """A clock in which a task costs ``tick`` of computing, shared among the current
    engine's workers as if they ran side by side, plus ``overhead`` that nothing shares
    (the Python around a task): two workers come close to half the time, not quite."""

    def __init__(self, tick: float = 1e-5, overhead: float = 1e-6) -> None:
        super().__init__(tick)
        self.overhead = overhead

    def __call__(self) -> float:
        workers = getattr(engine.current(), "workers", 1)
        tasks = super().__call__() / self.tick
        return tasks * (self.tick / workers + self.overhead)


class CompileClock(TaskClock):
    """A :class:`TaskClock` that also charges ``compile_cost`` for every program a
    CachedOp compiles. It counts them by wrapping ``CachedOp._compile``: through
    ``monkeypatch.setattr`` when given (a pytest fixture, which puts it back after the
    test), else for good (a graded notebook's kernel ends with the check)."""

    def __init__(self, monkeypatch: Any = None, tick: float = 1e-4,
                 compile_cost: float = 8e-3) -> None:
        from hybridlab.graph.cached_op import CachedOp

        super().__init__(tick)
        self.compile_cost, self.compiles = compile_cost, 0
        original = CachedOp._compile

        def counted(op: CachedOp, *args: Any, **kwargs: Any) -> Any:
            self.compiles += 1
            return original(op, *args, **kwargs)

        (monkeypatch.setattr if monkeypatch is not None else setattr)(
            CachedOp, "_compile", counted)

    def __call__(self) -> float:
        return super().__call__() + self.compiles * self.compile_cost


def stepping_clock(steps: Sequence[float]) -> Callable[[], float]:
    """A clock that moves on by ``steps[i % len(steps)]`` at its i-th reading: with
    ``[0, 0, call, wait]`` each run of a way timed with one lap reads run start, lap
    start, lap end (``call`` later) and run end (``wait`` after that)."""
    state = {"now": 0.0, "reads": 0}

    def clock() -> float:
        state["now"] += steps[int(state["reads"]) % len(steps)]
        state["reads"] += 1
        return state["now"]

    return clock
