"""Exercise checks for lesson 04 (schedules: work, span, workers, reductions)."""

from __future__ import annotations

import math
from typing import Any, Callable

from hybridlab.exercises._common import Feedback


def _diamond_tasks() -> list[Any]:
    """The tasks of ``(a + b) * (a - b)`` on two fresh arrays, held by a StepEngine."""
    from hybridlab import engine, nd

    with engine.engine_scope("StepEngine") as step:
        a, b = nd.ones((2, 2)), nd.ones((2, 2))
        (a + b) * (a - b)
        tasks = list(step.tasks)  # type: ignore[attr-defined]
        step.run()  # type: ignore[attr-defined]
    return tasks


def check_span(workers: int, answer: float) -> Feedback:
    """The span of ``(a + b) * (a - b)`` with unit-time tasks on ``workers`` workers."""
    from hybridlab.lab.schedule import simulate

    tasks = _diamond_tasks()
    seqs = [task.seq for task in tasks]
    deps = [[seqs.index(d.seq) for d in task.deps if d.seq in seqs] for task in tasks]
    records = simulate([t.name for t in tasks], deps, [1.0] * len(tasks), workers)
    expected = max(r.end for r in records)
    if answer == expected:
        return Feedback(True, f"{expected:g} time units on {workers} worker(s)")
    return Feedback(False, f"{answer} is not it: draw the tasks as a graph; no task may start "
                           f"before its inputs are done, and at most {workers} run at once")


def chain_sum_graph(n: int = 8) -> Any:
    """The tasks of ``((x0 + x1) + x2) + ...`` over n arrays, as a TaskGraph."""
    from hybridlab import engine, nd
    from hybridlab.lab.schedule import TaskGraph

    with engine.engine_scope("StepEngine") as step:
        xs = [nd.ones((2,)) * i for i in range(n)]
        total = xs[0]
        for x in xs[1:]:
            total = total + x
        graph = TaskGraph.from_tasks(step.tasks)  # type: ignore[attr-defined]
        step.run()  # type: ignore[attr-defined]
    return graph


def check_enough_workers(answer: int) -> Feedback:
    """The chain sum of 8 arrays (lesson 04): the fewest workers with the shortest
    schedule, past which more workers change nothing."""
    from hybridlab.lab.schedule import ScheduleModel

    model = ScheduleModel(chain_sum_graph())
    times = {k: max(r.end for r in model.schedule(k)) for k in range(1, 17)}
    expected = min(k for k, t in times.items() if t == min(times.values()))
    if answer == expected:
        return Feedback(True, f"{expected} workers already reach {times[expected]:g} units, the "
                              f"span: past it more workers stay idle")
    if answer in times and times[answer] > times[expected]:
        return Feedback(False, f"with {answer} workers the schedule takes {times[answer]:g} "
                               f"units; more workers still help")
    return Feedback(False, f"{answer} is more than needed: fewer workers reach the same "
                           "time; look for the point where the span limits the schedule")


def check_tree_sum(total: Callable[[list], Any], n: int = 16) -> Feedback:
    """``total(xs)`` must add a list of NDArrays with a span of additions of at most
    ceil(log2 n): pairs first, then pairs of pairs."""
    import numpy as np

    from hybridlab import engine, nd
    from hybridlab.lab.schedule import TaskGraph, work_and_span

    with engine.engine_scope("StepEngine") as step:
        xs = [nd.full((3,), float(i)) for i in range(n)]
        step.run()  # type: ignore[attr-defined]
        step.clear()  # type: ignore[attr-defined]
        try:
            result = total(xs)
            graph = TaskGraph.from_tasks(step.tasks)  # type: ignore[attr-defined]
            step.run()  # type: ignore[attr-defined]
            value = result.asnumpy()
        except Exception as exc:  # the student's code: explain, do not raise
            return Feedback(False, f"total raised {type(exc).__name__}: {exc}")
    if not np.allclose(value, sum(range(n))):
        return Feedback(False, f"total(xs) gave {value}, not the sum {float(sum(range(n)))}")
    _, span = work_and_span(graph.deps, [1.0] * len(graph.names))
    bound = math.ceil(math.log2(n))
    if span > bound:
        return Feedback(False, f"the longest chain of additions is {span:g} long; a tree "
                               f"needs only {bound}: add pairs, then pairs of pairs")
    return Feedback(True, f"a span of {span:g} additions for {n} arrays (a chain needs "
                          f"{n - 1})")
