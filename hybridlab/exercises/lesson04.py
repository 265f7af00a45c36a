"""Exercise checks for lesson 04 (schedules: work, span, makespan, workers, reductions).

The *span* is a property of the task graph (its critical path); the *makespan* is the
length of one schedule of it (the wall-clock time from the first start to the last
end). The checks keep the two apart.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

from hybridlab.exercises._common import Feedback, Judgement, judge_ratio, verdict


def _diamond_tasks() -> list[Any]:
    """The tasks of ``(a + b) * (a - b)`` on two fresh arrays, held by a StepEngine."""
    from hybridlab import engine, nd

    with engine.engine_scope("StepEngine") as step:
        a, b = nd.ones((2, 2)), nd.ones((2, 2))
        (a + b) * (a - b)
        tasks = list(step.tasks)
        step.run()
    return tasks


def _diamond_schedule(workers: int) -> tuple[float, float]:
    """(span, makespan on ``workers`` workers) of the diamond, one time unit per task."""
    from hybridlab.lab.schedule import simulate, work_and_span

    tasks = _diamond_tasks()
    seqs = [task.seq for task in tasks]
    deps = [[seqs.index(d.seq) for d in task.deps if d.seq in seqs] for task in tasks]
    records = simulate([t.name for t in tasks], deps, [1.0] * len(tasks), workers)
    _, span = work_and_span(deps, [1.0] * len(tasks))
    return span, max(r.end for r in records)


def check_span(answer: float) -> Feedback:
    """The span (critical path, in unit-time tasks) of ``(a + b) * (a - b)``, the two
    arrays' creation included."""
    span, _ = _diamond_schedule(1)
    if answer == span:
        return Feedback(True, f"the longest chain of dependent tasks is {span:g} long, "
                              "whatever the number of workers")
    return Feedback(False, f"{answer} is not it: the span is the longest chain of tasks that "
                           "wait for each other (count tasks on it, not tasks in all); it "
                           "does not depend on the number of workers")


def check_makespan(workers: int, answer: float) -> Feedback:
    """The makespan of ``(a + b) * (a - b)`` with unit-time tasks on ``workers``
    workers: how long the list schedule takes from the first start to the last end."""
    span, expected = _diamond_schedule(workers)
    if answer == expected:
        return Feedback(True, f"{expected:g} time units on {workers} worker(s) (the span is "
                              f"{span:g}: {'reached' if expected == span else 'not reached'})")
    return Feedback(False, f"{answer} is not it: draw the tasks as a graph; no task may start "
                           f"before its inputs are done, and at most {workers} run at once")


def two_chains(length: int = 8, size: int = 300) -> Callable[[], Any]:
    """A call that pushes two independent chains of ``length`` products of ``size`` x
    ``size`` matrices on the current engine and returns the last product of each."""
    import numpy as np

    from hybridlab import ndarray as nd

    matrix = (np.random.default_rng(0).normal(size=(size, size)) / size).astype(np.float32)
    a = nd.array(matrix)

    def call() -> Any:
        left = right = a
        for _ in range(length):
            left, right = nd.dot(left, a), nd.dot(right, a)
        return left, right

    return call


def check_speedup(prediction: float, timer: Callable[[], float] = time.perf_counter,
                  rounds: int = 5) -> Feedback:
    """Predict-then-measure: the time of two independent chains of products on one
    worker divided by their time on two workers (one BLAS thread each), measured by the
    course's protocol (:func:`hybridlab.lab.timing.measure`: interleaved rounds, medians;
    ``timer`` injectable, so a test can fix the durations). Judged by
    :func:`~hybridlab.exercises._common.judge_ratio`: on the effect, the ratio minus 1."""
    import os

    from hybridlab import engine
    from hybridlab.lab.timing import measure

    if not isinstance(prediction, (int, float)) or not prediction > 0:
        return Feedback(False, f"predict a positive ratio (one worker's time / two workers' "
                               f"time), not {prediction!r}")
    chains = two_chains()
    m = measure({"1 worker": chains, "2 workers": chains}, rounds=rounds, calls=1,
                engine={"1 worker": engine.ThreadedEngine(workers=1),
                        "2 workers": engine.ThreadedEngine(workers=2)}, timer=timer)
    one, two = m["1 worker"], m["2 workers"]
    measured = one / two
    judgement = judge_ratio(prediction, measured)
    if prediction > 2:  # impossible, however close to this run's measurement
        judgement = Judgement(False, judgement.off)
    line = (f"you predicted {prediction:.2f}x; measured {measured:.2f}x (1 worker "
            f"{one * 1e3:.1f} ms, 2 workers {two * 1e3:.1f} ms, medians of {rounds}): "
            f"{judgement.off}")
    if judgement.correct:
        return Feedback(True, line)
    if prediction > 2:
        why = ("two workers can at most halve the time: each chain is a sequence, so the "
               "best is one chain per worker")
    elif prediction > measured:
        why = (f"the cores ({os.cpu_count()} here) also run Python, the engine's bookkeeping "
               "and other programs; whatever they take, the two workers do not get")
    else:
        why = ("the chains never meet, and a product releases Python's interpreter lock "
               "while BLAS computes, so two workers run them side by side: with two free "
               "cores the time comes close to half")
    return verdict(judgement, f"{line}: {why}")


def chain_sum_graph(n: int = 8) -> Any:
    """The tasks of ``((x0 + x1) + x2) + ...`` over n arrays, as a TaskGraph."""
    from hybridlab import engine, nd
    from hybridlab.lab.schedule import TaskGraph

    with engine.engine_scope("StepEngine") as step:
        xs = [nd.ones((2,)) * i for i in range(n)]
        total = xs[0]
        for x in xs[1:]:
            total = total + x
        graph = TaskGraph.from_tasks(step.tasks)
        step.run()
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
        step.run()
        step.clear()
        try:
            result = total(xs)
            graph = TaskGraph.from_tasks(step.tasks)
            step.run()
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
