"""Exercise checks for lesson 03 (lazy evaluation: the queue, barriers, a runaway loop)."""

from __future__ import annotations

import time
from typing import Any, Callable

from hybridlab.exercises._common import Feedback, interleaved_medians, judge_ratio, verdict

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


BARRIER_CHOICES: dict[str, Callable[[Any, Any], Any]] = {  # ways to wait before print(loss)
    "nd.waitall()": lambda loss, other: _waitall(),
    "loss.wait_to_read()": lambda loss, other: loss.wait_to_read(),
    "other.asnumpy()": lambda loss, other: other.asnumpy(),
}


def _barrier_effect(choice: Callable[[Any, Any], Any]) -> tuple[bool, bool]:
    """(is loss computed, is other still pending) after ``choice`` on a StepEngine."""
    from hybridlab import engine, nd

    with engine.engine_scope("StepEngine") as step:
        loss = (nd.ones((4,)) * 2).sum()
        other = nd.dot(nd.ones((8, 8)), nd.ones((8, 8)))
        choice(loss, other)
        done = {t.seq for t in step.tasks if t.state == "done"}
        loss_done = loss._var._writer.seq in done
        other_pending = other._var._writer.seq not in done
        step.run()
    return loss_done, other_pending


def check_barrier(answer: str) -> Feedback:
    """Which of :data:`BARRIER_CHOICES` gets ``loss`` and leaves ``other`` computing?"""
    if answer not in BARRIER_CHOICES:
        return Feedback(False, f"{answer!r} is not among {sorted(BARRIER_CHOICES)}")
    loss_done, other_pending = _barrier_effect(BARRIER_CHOICES[answer])
    if loss_done and other_pending:
        return Feedback(True, f"{answer} waits for loss's tasks and no others")
    if not loss_done:
        return Feedback(False, f"{answer} does not make loss's value exist: it waits for "
                               "something else")
    return Feedback(False, f"{answer} gets loss, but also waits for other, which loss does "
                           "not need: that is a global barrier")


def check_bounded_loop(train: Callable[[list], list], batches: int = 8) -> Feedback:
    """Run ``train(batches)`` on a StepEngine; at most two batches may be pinned at once
    by pending tasks, and the results must be each batch times a matrix of ones."""
    import numpy as np

    from hybridlab import engine, nd
    from hybridlab.lab.queue import QueueModel

    with engine.engine_scope("StepEngine") as step:
        arrays = {f"batch{i}": nd.ones((16, 32)) * i for i in range(batches)}
        step.run()
        model, peak = QueueModel(step, lambda: arrays), [0]
        step.add_callback(engine.Callback(
            push=lambda task: peak.__setitem__(0, max(peak[0], model.pinned_bytes()))))
        try:
            outputs = train(list(arrays.values()))
            step.run()
            got = [np.asarray(y.asnumpy()) for y in outputs]
        except Exception as exc:  # the student's code: explain, do not raise
            return Feedback(False, f"train raised {type(exc).__name__}: {exc}")
        finally:
            model.detach()
    if len(got) != batches or any(g.shape != (16, 8) or not np.allclose(g, 32 * i)
                                  for i, g in enumerate(got)):
        return Feedback(False, "return one result per batch: nd.dot(x, w) with "
                               "w = nd.ones((x.shape[1], 8))")
    one_batch = 16 * 32 * 4
    if peak[0] > 2 * one_batch:
        return Feedback(False, f"pending tasks pinned {peak[0] // one_batch} batches at once: "
                               "synchronise on each result before pushing more")
    return Feedback(True, f"at most {peak[0] // one_batch} batch(es) pinned at once")


def check_barrier_ratio(guess: float, steps: int = 50, rounds: int = 5,
                        timer: Callable[[], float] = time.perf_counter) -> Feedback:
    """Predict time per iteration with a barrier in every iteration / time with one at the
    end, for lesson 03's loop of 64 x 64 products on a one-worker threaded engine."""
    from hybridlab import engine, nd

    if not isinstance(guess, (int, float)) or not guess > 0:
        return Feedback(False, f"guess a positive ratio, not {guess!r}")

    def loop(sync_every_iteration: bool) -> Any:
        x, w = nd.ones((64, 64)), nd.ones((64, 64)) * 0.01
        for _ in range(steps):
            x = nd.dot(x, w) + 1
            if sync_every_iteration:
                x.wait_to_read()
        return x.wait_to_read()

    times = interleaved_medians({"sync": lambda: loop(True), "once": lambda: loop(False)},
                                1, rounds, timer,
                                engine=engine.ThreadedEngine(workers=1))
    measured = times["sync"] / times["once"]
    judgement = judge_ratio(float(guess), measured)
    per = {name: t / steps * 1e6 for name, t in times.items()}
    report = (f"measured {measured:.2f} (sync every iteration {per['sync']:.1f} µs, once "
              f"{per['once']:.1f} µs per iteration, one-worker threaded engine); your guess "
              f"is {judgement.off}. Why: with a barrier each iteration costs t1 + t2 + t3 "
              "(push, compute, hand-over); without, pushing overlaps computing and the "
              "hand-over is paid once, so an iteration costs about the larger of t1 and t2 "
              "-- a barrier in every iteration always costs something, so the ratio is "
              "above 1, by about (min(t1, t2) + t3) / max(t1, t2)")
    return verdict(judgement, report)
