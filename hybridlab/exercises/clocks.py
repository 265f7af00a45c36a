"""Deterministic clocks for the exercise checks that time something.

What this module teaches
------------------------
A predict-then-measure check takes its clock as an argument (``timer=`` or ``clock=``), so
the same check can measure this machine for a student and, for a test or an assignment's
grade, measure a *model* instead: a grade must not depend on how loaded the grading machine
was. The reference solutions' tests (``tests/test_lessons.py``) and the autograded
assignments (``tools/assignments.py``) use these two clocks:

* :class:`TaskClock` ticks once per engine task run so far: under it, a call's "time" is
  the number of engine tasks it ran -- the cost model in which every task costs the same
  and Python around the tasks costs nothing.
* :func:`scripted_clock` makes every interval it measures last a scripted duration.
"""

from __future__ import annotations

from typing import Callable, Sequence

from hybridlab import engine


class TaskClock:
    """A fake ``timer``: one tick (10 µs unless told) per engine task run so far."""

    def __init__(self, tick: float = 1e-5) -> None:
        self.tick = tick

    def __call__(self) -> float:
        current = engine.current()
        if not getattr(current, "_task_clock", False):
            current.set_tracing(True)
            current._task_clock = True  # type: ignore[attr-defined]
        return len(current.trace) * self.tick


def scripted_clock(durations: Sequence[float]) -> Callable[[], float]:
    """A clock read in (start, end) pairs: the i-th interval measured with it lasts
    ``durations[i % len(durations)]`` seconds, whatever the code between the reads did."""
    state = {"now": 0.0, "reads": 0}

    def clock() -> float:
        if state["reads"] % 2 == 1:  # the end of an interval
            state["now"] += durations[(int(state["reads"]) // 2) % len(durations)]
        state["reads"] += 1
        return state["now"]

    return clock
