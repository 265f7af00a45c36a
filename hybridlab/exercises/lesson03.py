"""Exercise checks for lesson 03 (lazy evaluation and automatic parallelism)."""

from __future__ import annotations

from typing import Any, Callable

from hybridlab.exercises._common import Feedback

SYNC_CANDIDATES: dict[str, Callable[[Any], Any]] = {  # what a student may call on x
    "print": str, "asnumpy": lambda x: x.asnumpy(), "asscalar": lambda x: x.asscalar(),
    "wait_to_read": lambda x: x.wait_to_read(), "shape": lambda x: x.shape,
    "dtype": lambda x: x.dtype, "reshape": lambda x: x.reshape((1,)),
    "nd.waitall": lambda x: _waitall(),
}


def _waitall() -> None:
    from hybridlab import nd

    nd.waitall()


def _is_sync_point(call: Callable[[Any], Any]) -> bool:
    """Push ``x = ones * 3`` on a StepEngine, make the call, and see whether x was computed."""
    from hybridlab import engine, nd

    with engine.engine_scope("StepEngine") as step:
        x = nd.ones((1,)) * 3
        call(x)
        return all(task.state == "done" for task in step.tasks[:2])


def check_sync_points(answer: set[str]) -> Feedback:
    """Which of :data:`SYNC_CANDIDATES` make Python wait for the value?"""
    unknown = set(answer) - set(SYNC_CANDIDATES)
    if unknown:
        return Feedback(False, f"{sorted(unknown)} are not among {sorted(SYNC_CANDIDATES)}")
    expected = {name for name, call in SYNC_CANDIDATES.items() if _is_sync_point(call)}
    if set(answer) == expected:
        return Feedback(True, f"{sorted(expected)} need the values; the others need only "
                              "the shape and dtype, which are known at push time")
    missing, extra = sorted(expected - set(answer)), sorted(set(answer) - expected)
    return Feedback(False, f"missing {missing}, should not be there {extra}: a call waits "
                           "only if it needs the numbers themselves")


def _diamond_tasks() -> list[Any]:
    """The tasks of ``(a + b) * (a - b)`` on two fresh arrays, held by a StepEngine."""
    from hybridlab import engine, nd

    with engine.engine_scope("StepEngine") as step:
        a, b = nd.ones((2, 2)), nd.ones((2, 2))
        (a + b) * (a - b)
        tasks = list(step.tasks)
        step.run()
    return tasks


def check_ready_after_two_steps(answer: int) -> Feedback:
    """After the two ``ones`` tasks of ``(a + b) * (a - b)`` ran, how many tasks are ready?"""
    from hybridlab import engine, nd

    with engine.engine_scope("StepEngine") as step:
        a, b = nd.ones((2, 2)), nd.ones((2, 2))
        (a + b) * (a - b)
        step.step()
        step.step()
        expected = len(step.ready)
        step.run()
    if answer == expected:
        return Feedback(True, f"{expected}: a + b and a - b read only a and b, so both can run")
    return Feedback(False, f"{answer} is not it: a task is ready when every task it depends "
                           "on is done; which ones read only a and b?")


def check_span(workers: int, answer: float) -> Feedback:
    """The span of ``(a + b) * (a - b)`` with unit-time tasks on ``workers`` workers."""
    from hybridlab.viz.gantt import simulate

    tasks = _diamond_tasks()
    seqs = [task.seq for task in tasks]
    deps = [[seqs.index(d) for d in task.deps] for task in tasks]
    records = simulate([t.name for t in tasks], deps, [1.0] * len(tasks), workers)
    expected = max(r.end for r in records)
    if answer == expected:
        return Feedback(True, f"{expected:g} time units on {workers} worker(s)")
    return Feedback(False, f"{answer} is not it: draw the tasks as a graph; no task may start "
                           f"before its inputs are done, and at most {workers} run at once")
