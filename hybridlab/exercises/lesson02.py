"""Exercise checks for lesson 02 (hybridize)."""

from __future__ import annotations

import functools
import os
from typing import Any

import numpy as np

from hybridlab.exercises._common import Feedback, compare_block, inputs, judge_amount, run


@functools.cache  # one class object per session, so isinstance checks behave
def _block_classes() -> tuple[type, type]:
    """The blocks used by lesson 02's exercises (defined lazily: gluon is not light)."""
    from hybridlab import nd
    from hybridlab.gluon import nn

    class BrokenBlock(nn.HybridBlock):
        """Scales each row to sum to one -- but through numpy, which cannot be traced."""

        def hybrid_forward(self, F, x):
            totals = x.asnumpy().sum(axis=1, keepdims=True)
            return x / nd.array(totals)

    class CountingBlock(nn.HybridBlock):
        """Counts how often its Python ``hybrid_forward`` runs."""

        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.calls = 0

        def hybrid_forward(self, F, x):
            self.calls += 1
            return F.relu(x)

    return BrokenBlock, CountingBlock


def broken_block() -> type:
    """The block of exercise 1 (created on first use: importing gluon is not free)."""
    return _block_classes()[0]


def check_hybridizable(block_class: type) -> Feedback:
    """A block that scales rows to sum 1 and also works after ``hybridize()``."""
    (x,) = inputs((3, 4))
    x = x * x + 0.5  # positive rows, so the sums are not zero
    return compare_block(block_class, lambda a: a / a.sum(axis=1, keepdims=True), [x],
                         "each row divided by its sum (rows that sum to one)",
                         "Inside hybrid_forward use only F.* operators "
                         "(F.sum(x, axis=1, keepdims=True), F.broadcast_div)",
                         success="the block hybridizes and every row sums to one")


def check_print_count(answer: int) -> Feedback:
    """Imperative calls x2, then ``hybridize()`` and calls x3: how often does it print?"""
    from hybridlab import nd

    block = _block_classes()[1]()
    x = nd.ones((1, 4))
    for _ in range(2):
        block(x)
    block.hybridize()
    for _ in range(3):
        block(x)
    if answer == block.calls:
        return Feedback(True, f"{block.calls}: once per imperative call, then once for the "
                              "trace; the cached program runs no Python")
    return Feedback(False, f"{answer} is not it: imperative calls run hybrid_forward every "
                           "time; after hybridize() only the first call (the trace) does")


def check_export_roundtrip(prefix: str, net: Any, x: Any, epoch: int = 0) -> Feedback:
    """``prefix-symbol.json`` and ``prefix-NNNN.params`` (``NNNN`` = ``epoch``) load with
    ``SymbolBlock.imports`` and reproduce ``net(x)``."""
    from hybridlab import gluon

    files = [f"{prefix}-symbol.json", f"{prefix}-{epoch:04d}.params"]
    missing = [f for f in files if not os.path.exists(f)]
    if missing:
        return Feedback(False, f"{missing} not found: call net.export({prefix!r}, "
                               f"epoch={epoch}) after hybridize() and one forward call")
    loaded, error = run(lambda: gluon.SymbolBlock.imports(files[0], ["data"], files[1]),
                         "SymbolBlock.imports")
    if error is not None:
        return error
    if not np.allclose(loaded(x).asnumpy(), net(x).asnumpy(), atol=1e-5):
        return Feedback(False, "the loaded model gives different outputs: were the "
                               "parameters changed (trained, re-initialised) after export?")
    return Feedback(True, "the JSON graph and the parameters reproduce the network")


def check_arena_bytes(guess: int, batch: int = 16) -> Feedback:
    """Predict the bytes of the arena ``hybridize(static_alloc=True, static_shape=True)``
    reuses for the seeds' MLP (512 inputs, Dense(256) and Dense(128) with ReLU, Dense(2))
    on a batch of ``batch``; then read it from the compiled program."""
    from hybridlab import nd
    from hybridlab.lab.graphs import cached_op_of
    from hybridlab.lab.timing import make_net

    if not isinstance(guess, int) or guess < 0:
        return Feedback(False, f"guess a whole number of bytes, not {guess!r}")
    net = make_net((256, 128, 2))
    net.hybridize(static_alloc=True, static_shape=True)
    net(nd.ones((batch, 512))).wait_to_read()
    measured = cached_op_of(net).last_program.arena_bytes
    hidden = batch * (256 + 128) * 4
    why = (f"the arena holds the intermediate results the program keeps between its lines: "
           f"the two hidden layers' outputs, {batch} x 256 and {batch} x 128 float32 "
           f"(4 bytes each) = {hidden} bytes; each relu writes in place into its layer's "
           "output, and the last layer's result is handed to you, not kept in the arena")
    if guess == measured:
        return Feedback(True, f"{measured} bytes: {why}")
    judgement = judge_amount(guess, measured, within=1.05)
    off = (f"{guess / measured:.2f} times the real size" if guess > 0 else judgement.off)
    return Feedback(judgement.correct, f"the arena is {measured} bytes, your guess {guess} is "
                                       f"{off}. Why: {why}")
