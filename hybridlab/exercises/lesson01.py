"""Exercise checks for lesson 01 (imperative and symbolic programs)."""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from hybridlab.exercises._common import (
    Feedback,
    how_far_off,
    inputs,
    interleaved_medians,
    ops_in,
    run,
)


def check_symbol_program(fn: Callable[..., Any]) -> Feedback:
    """``fn(a, b, c, d)`` on Symbols must build ``(a - b) * (c + d)``."""
    from hybridlab import sym

    names = ("a", "b", "c", "d")
    program, error = run(lambda: fn(*(sym.var(n) for n in names)), "your function")
    if error is not None:
        return error
    if not isinstance(program, sym.Symbol):
        return Feedback(False, f"it returned a {type(program).__name__}, not a Symbol: "
                               "use only operators (+, -, *) on the symbol arguments")
    values = inputs(*[(2, 3)] * 4)
    got, error = run(lambda: program.eval(**dict(zip(names, values)))[0], "eval")
    if error is not None:
        return error
    a, b, c, d = (v.asnumpy() for v in values)
    if np.allclose(got.asnumpy(), (a - b) * (c + d), atol=1e-5):
        return Feedback(True, "the graph computes (a - b) * (c + d)")
    if np.allclose(got.asnumpy(), (a + b) * (c + d), atol=1e-5):
        return Feedback(False, "this computes (a + b) * (c + d): the first pair subtracts")
    return Feedback(False, "the graph runs but computes something else than (a - b) * (c + d)")


def fancy_func(a: Any, b: Any, c: Any, d: Any) -> Any:
    """Lesson 01's example: three additions in pairs."""
    left = a + b
    right = c + d
    return left + right


def check_fancy_func_nodes(answer: int) -> Feedback:
    """How many nodes does the graph of ``fancy_func`` on four ``sym.var`` have?"""
    from hybridlab import sym
    from hybridlab.lab.graphs import as_graph

    graph, _ = as_graph(fancy_func(*(sym.var(n) for n in "abcd")))
    expected = len(graph.nodes)
    if answer == expected:
        return Feedback(True, f"{expected} nodes: 4 inputs and 3 additions")
    return Feedback(False, f"{answer} is not it: count one node per input variable and one "
                           "per call of add (the graph has no separate output node)")


def check_dense_from_primitives(fn: Callable[..., Any]) -> Feedback:
    """``fn(F, x, weight, bias)`` must equal FullyConnected without using it."""
    from hybridlab import nd, sym

    x, weight, bias = inputs((4, 6), (3, 6), (3,))
    got, error = run(lambda: fn(nd, x, weight, bias), "fn(nd, x, weight, bias)")
    if error is not None:
        return error
    expected = nd.FullyConnected(x, weight, bias, num_hidden=3).asnumpy()
    if got is None or not np.allclose(got.asnumpy(), expected, atol=1e-5):
        return Feedback(False, "the numbers differ from FullyConnected: it computes "
                               "x @ weight.T + bias (mind transpose_b=True)")
    program, error = run(lambda: fn(sym, sym.var("x"), sym.var("w"), sym.var("b")),
                          "fn(sym, ...)")
    if error is not None:
        return error
    ops = ops_in(program)
    if "FullyConnected" in ops:
        return Feedback(False, "it still uses FullyConnected: write it with dot and an add")
    return Feedback(True, f"same numbers with fine-grained operators {ops}")


def three_layers(F: Any, x: Any, params: dict[str, Any], fine: bool) -> Any:
    """Lesson 01's three 64-unit ReLU layers, coarse (FullyConnected) or fine (dot + add)."""
    for index in range(3):
        weight, bias = params[f"w{index}"], params[f"b{index}"]
        if fine:
            x = F.broadcast_add(F.dot(x, weight, transpose_b=True), bias)
        else:
            x = F.FullyConnected(x, weight, bias, num_hidden=64)
        x = F.relu(x)
    return x


def check_operator_cost(guess_us: float, calls: int = 100, rounds: int = 5,
                        timer: Callable[[], float] = time.perf_counter) -> Feedback:
    """Predict, in microseconds, what one extra operator adds to an imperative call of
    lesson 01's three layers (fine minus coarse, per extra operator, on the one-worker
    threaded engine, as section 5 times them); then measure it."""
    from hybridlab import engine, nd

    if not isinstance(guess_us, (int, float)) or not guess_us > 0:
        return Feedback(False, f"guess a positive number of microseconds, not {guess_us!r}")
    x, *arrays = inputs((32, 64), *[(64, 64), (64,)] * 3)
    params = {f"{kind}{i}": arrays[2 * i + (kind == "b")] for i in range(3) for kind in "wb"}
    with engine.engine_scope(engine.NaiveEngine()) as naive:
        naive.set_tracing(True)
        counts = {}
        for form, fine in (("coarse", False), ("fine", True)):
            naive.clear_trace()
            three_layers(nd, x, params, fine).wait_to_read()
            counts[form] = len(naive.trace)
    extra = counts["fine"] - counts["coarse"]
    times = interleaved_medians({"coarse": lambda: three_layers(nd, x, params, False),
                                 "fine": lambda: three_layers(nd, x, params, True)},
                                calls, rounds, timer,
                                engine_factory=lambda: engine.ThreadedEngine(workers=1))
    measured = (times["fine"] - times["coarse"]) / extra * 1e6
    if measured <= 0:
        return Feedback(False, f"this run measured no cost for the {extra} extra operators "
                               f"(coarse {times['coarse'] * 1e6:.1f} µs, fine "
                               f"{times['fine'] * 1e6:.1f} µs): the machine is too noisy "
                               "now; run the check again")
    close, off = how_far_off(float(guess_us), measured)
    report = (f"measured {measured:.1f} µs per extra operator (coarse "
              f"{times['coarse'] * 1e6:.1f} µs, fine {times['fine'] * 1e6:.1f} µs per call, "
              f"{extra} extra engine tasks, one-worker threaded engine); your guess is {off}. "
              "Why: an extra operator is an extra engine task, and imperatively each task "
              "pays the framework's Python (dispatch, shape rule, push) and its hand-over to "
              "the worker thread, besides its small kernel")
    return Feedback(close, report if close else report + " -- within a factor of two counts")
