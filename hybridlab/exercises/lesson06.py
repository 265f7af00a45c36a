"""Exercise checks for lesson 06 (what hybridize cannot compile, and the rewrites)."""

from __future__ import annotations

import functools
import time
from typing import Any, Callable

import numpy as np

from hybridlab.exercises._common import Feedback, compare_block, inputs, judge_ratio, verdict


@functools.cache  # one class object per session, so isinstance checks behave
def _block_classes() -> tuple[type, ...]:
    """The blocks to repair (each runs imperatively, none hybridizes as meant)."""
    from hybridlab.gluon import nn

    class SignGate(nn.HybridBlock):
        """Doubles the whole batch when its total is positive, halves it otherwise."""

        def hybrid_forward(self, F, x):
            if x.sum() > 0:
                return x * 2
            return x / 2

    class FlattenBlock(nn.HybridBlock):
        """Keeps the batch axis and flattens all the others into one."""

        def hybrid_forward(self, F, x):
            return x.reshape((x.shape[0], -1))

    class LastColumn(nn.HybridBlock):
        """The last feature of every example, as a (batch, 1) array."""

        def hybrid_forward(self, F, x):
            return x[:, -1:]

    class CentreInPlace(nn.HybridBlock):
        """Subtracts each row's mean, writing into its input."""

        def hybrid_forward(self, F, x):
            x -= x.mean(axis=1, keepdims=True)
            return x

    class AddRowMeans(nn.HybridBlock):
        """Adds each row's mean to the row, with ``+`` between two Symbols."""

        def hybrid_forward(self, F, x):
            return x + x.mean(axis=1, keepdims=True)

    return SignGate, FlattenBlock, LastColumn, CentreInPlace, AddRowMeans


BLOCKS = ("SignGate", "FlattenBlock", "LastColumn", "CentreInPlace", "AddRowMeans")


def block_to_fix(name: str) -> type:
    """``exercises.SignGate`` etc. (created on first use: importing gluon is not free)."""
    return dict(zip(BLOCKS, _block_classes()))[name]


def _sign_gate(x: np.ndarray) -> np.ndarray:
    return x * 2 if x.sum() > 0 else x / 2


def check_sign_gate(block_class: type) -> Feedback:
    """Exercise 1: SignGate without a Python ``if``; one compiled program, both branches."""
    (x,) = inputs((3, 4), seed=1)
    centred = x - x.mean()  # mixed signs: a per-element decision would show
    batches = [centred + 0.5, centred - 0.5]  # a positive total, then a negative one
    return compare_block(block_class, _sign_gate, batches,
                         "x * 2 for a batch with a positive total and x / 2 otherwise",
                         "let an operator make the decision (F.where or "
                         "F.contrib.cond), so that both branches are in the program",
                         success="one compiled program takes either branch, decided by the "
                                 "data at run time")


def check_flatten(block_class: type) -> Feedback:
    """Exercise 2: FlattenBlock without ``.shape``, for any input shape (no static_shape)."""
    batches = inputs((2, 3, 4), (5, 2, 5), (1, 6), seed=2)
    return compare_block(block_class, lambda a: a.reshape(len(a), -1), batches,
                         "the input with every axis after the first flattened",
                         "describe the shape without sizes: reshape codes (0 keeps an "
                         "axis, -1 infers one), or an operator that flattens",
                         success="the same program flattens inputs of any shape")


def check_last_column(block_class: type) -> Feedback:
    """Exercise 3: LastColumn without ``[]`` indexing, for inputs of any width."""
    batches = inputs((2, 3), (4, 5), seed=3)
    return compare_block(block_class, lambda a: a[:, -1:], batches,
                         "the last column of each row, shape (batch, 1)",
                         "slice with an operator: F.slice_axis counts from the end "
                         "when begin is negative",
                         success="F.slice_axis picks the last column at any width")


def check_centre(block_class: type) -> Feedback:
    """Exercise 5: CentreInPlace without writing into its input: the numbers, both ways,
    and the caller's array left as it was."""
    batches = inputs((2, 5), (3, 4), seed=4)
    kept = [x.asnumpy().copy() for x in batches]
    verdict = compare_block(block_class, lambda a: a - a.mean(axis=1, keepdims=True), batches,
                            "each row minus its mean",
                            "a Symbol is a node, not a buffer: write x = x - ..., a new "
                            "value, instead of x -= ...",
                            success="a new value in both modes, and the caller's batch "
                                    "untouched")
    if verdict and any(not np.array_equal(x.asnumpy(), k) for x, k in zip(batches, kept)):
        return Feedback(False, "the numbers are right, but run imperatively the block wrote "
                               "into the caller's array: a compiled program never can, so "
                               "the two modes differ -- return a new array instead")
    return verdict


def check_row_means(block_class: type) -> Feedback:
    """Exercise 7: AddRowMeans hybridized: ``+`` of two Symbols needs one shape."""
    batches = inputs((2, 5), (3, 4), seed=5)
    return compare_block(block_class, lambda a: a + a.mean(axis=1, keepdims=True), batches,
                         "each row plus its mean",
                         "a Symbol's + is the elementwise _Plus, for one shape, as in "
                         "MXNet: F.broadcast_add broadcasts in both modes",
                         success="F.broadcast_add broadcasts the (batch, 1) means in both "
                                 "modes")


def mixed_stack() -> Any:
    """Exercise 6's network: a plain Block whose forward runs two hybrid children, each
    followed by two operators of its own."""
    from hybridlab import ndarray as nd
    from hybridlab.gluon import nn

    class MixedStack(nn.Block):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.first, self.second = nn.HybridSequential(), nn.HybridSequential()
            self.first.add(nn.Dense(8, activation="relu"), nn.Dense(8))
            self.second.add(nn.Dense(8, activation="relu"), nn.Dense(8))

        def forward(self, x: Any) -> Any:
            for child in (self.first, self.second):
                x = nd.relu(child(x)) * 0.5
            return x

    stack = MixedStack()
    stack.initialize()
    return stack


def _tasks_of_one_call(block: Any, x: Any) -> list[str]:
    from hybridlab import engine

    block(x).wait_to_read()  # the first call after hybridize() compiles
    with engine.engine_scope(engine.NaiveEngine()) as naive:
        naive.set_tracing(True)
        block(x).wait_to_read()
        return [record.name for record in naive.trace]


def check_mixed_tasks(answer: tuple[int, int]) -> Feedback:
    """Exercise 6: after ``hybridize()``, how many engine tasks does one call of
    :func:`mixed_stack` run, and how many of them are compiled programs? Answer
    ``(tasks, compiled)``."""
    if not (isinstance(answer, tuple) and len(answer) == 2
            and all(isinstance(n, int) and not isinstance(n, bool) for n in answer)):
        return Feedback(False, f"answer a pair of whole numbers (tasks, compiled programs), "
                               f"not {answer!r}")
    stack = mixed_stack()
    (x,) = inputs((4, 6), seed=6)
    before = _tasks_of_one_call(stack, x)
    stack.hybridize()
    names = _tasks_of_one_call(stack, x)
    compiled = sum(name == "CachedOp" for name in names)
    facts = (f"one call runs {names}: each hybrid child is one compiled program, and the "
             f"plain Block's own operators (its relu and its * 0.5) run one by one, as its "
             f"forward is never traced; before hybridize() the same call ran {len(before)} "
             f"tasks")
    if answer == (len(names), compiled):
        return Feedback(True, facts)
    if answer[1] != compiled:
        why = ("count the compiled programs: hybridize() on a plain Block compiles each "
               "hybrid child, one CachedOp task per child per call; the Block itself is not "
               "compiled")
    else:
        why = ("count the tasks: the plain Block's own operators still run imperatively, "
               "one task each, twice round its loop")
    return Feedback(False, f"{answer} is not it: {why}")


def check_retrace_cost(prediction: float, timer: Callable[[], float] = time.perf_counter,
                       rounds: int = 5) -> Feedback:
    """Predict-then-measure: under ``hybridize(static_shape=True)``, how many times longer
    does a call with a new input shape take than a call with a shape seen before? Timed
    by the course's protocol (:func:`hybridlab.lab.timing.measure`, the naive engine):
    the first way calls a fresh width every time, the second one width again (``timer``
    injectable for tests). Judged by :func:`~hybridlab.exercises._common.judge_ratio`."""
    import itertools

    from hybridlab import nd
    from hybridlab.gluon import nn
    from hybridlab.lab.timing import measure

    if not isinstance(prediction, (int, float)) or not prediction > 0:
        return Feedback(False, f"predict a positive ratio (new shape / same shape), not "
                               f"{prediction!r}")

    class PositiveFraction(nn.HybridBlock):
        def hybrid_forward(self, F, x):
            return (x > 0).sum(axis=1) / x.shape[1]

    block = PositiveFraction()
    block.initialize()
    block.hybridize(static_shape=True)
    widths, same = itertools.count(3), nd.ones((4, 2))
    m = measure({"new shape": lambda: block(nd.ones((4, next(widths)))),
                 "same shape": lambda: block(same)}, rounds=rounds, calls=1, timer=timer)
    measured = m.ratio("new shape", "same shape")
    judgement = judge_ratio(float(prediction), measured)
    line = (f"you predicted {prediction:g}x; measured {measured:.0f}x (new shape "
            f"{m['new shape'] * 1e6:.0f} µs, same shape {m['same shape'] * 1e6:.0f} µs, "
            f"medians of {rounds} rounds): {judgement.off}")
    if judgement.correct:
        return Feedback(True, f"{line}: a new shape pays for a whole trace and compile")
    if prediction < measured:
        why = ("a new shape traces hybrid_forward again, runs every pass and generates and "
               "compiles new Python source: far more than running the cached program")
    else:
        why = ("a repeated shape finds its program in the cache and only runs it; the trace "
               "and compile, though slow, are a one-off per shape")
    return verdict(judgement, f"{line}: {why}")
