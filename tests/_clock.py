"""Deterministic clocks for the exercise checks that time something (their ``timer=`` or
``clock=`` argument): a clock counting engine tasks, and a scripted one."""

from __future__ import annotations

from typing import Callable, Sequence

from hybridlab import engine


class TaskClock:
    """A fake ``timer``: one tick (10 µs unless told) per engine task run so far. Under it, a call's
    "time" is the number of engine tasks it runs -- the cost model in which every task
    costs the same and Python around the tasks costs nothing."""

    def __init__(self, tick: float = 1e-5) -> None:
        self.tick = tick

    def __call__(self) -> float:
        current = engine.current()
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
        current = engine.current()
        waits = getattr(current, "_hand_over_waits", None)
        if waits is None:
            waits = current._hand_over_waits = [0]
            original = current.wait_for_var

            def counted(var: engine.Var) -> None:
                waits[0] += 1
                original(var)

            current.wait_for_var = counted  # this engine only: it lives as long as the check
        return super().__call__() + waits[0] * self.hand_over


def scripted_clock(durations: Sequence[float]) -> Callable[[], float]:
    """A clock read in (start, end) pairs: the i-th interval measured with it lasts
    ``durations[i % len(durations)]`` seconds, whatever the code between the reads did."""
    state = {"now": 0.0, "reads": 0}

    def clock() -> float:
        if state["reads"] % 2 == 1:  # the end of an interval
            state["now"] += durations[(state["reads"] // 2) % len(durations)]
        state["reads"] += 1
        return state["now"]

    return clock
