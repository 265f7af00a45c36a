"""Exercise checks for lesson 01 (imperative and symbolic programs)."""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from hybridlab.exercises._common import (
    Feedback,
    inputs,
    interleaved_medians,
    judge_ratio,
    ops_in,
    run,
    verdict,
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


def check_compiled_speedup(guess: float, batch: int = 1, calls: int = 100, rounds: int = 5,
                           timer: Callable[[], float] = time.perf_counter) -> Feedback:
    """Predict how many times faster lesson 01's ``three_layers`` (coarse form) runs
    compiled than imperatively on a batch of ``batch`` rows, on the naive engine; then
    measure it (the course's protocol: interleaved rounds, medians, one BLAS thread).
    Section 5 measured it at batch 32; the question is what changes at another batch."""
    from hybridlab import engine, nd, sym
    from hybridlab.graph.cached_op import CachedOp

    if not isinstance(guess, (int, float)) or isinstance(guess, bool) or not guess > 0:
        return Feedback(False, f"guess a positive ratio (imperative time / compiled time), "
                               f"not {guess!r}")
    x, *arrays = inputs((batch, 64), *[(64, 64), (64,)] * 3)
    params = {f"{kind}{i}": arrays[2 * i + (kind == "b")] for i in range(3) for kind in "wb"}
    program = three_layers(sym, sym.var("x"), {name: sym.var(name) for name in params}, False)
    values = {"x": x, **params}
    ordered = [values[node.name] for node in program.to_graph().inputs]
    compiled = CachedOp(program)
    with engine.engine_scope(engine.NaiveEngine()) as naive:
        naive.set_tracing(True)
        three_layers(nd, x, params, False).wait_to_read()
        tasks = len(naive.trace)
    times = interleaved_medians({"imperative": lambda: three_layers(nd, x, params, False),
                                 "compiled": lambda: compiled(*ordered)},
                                calls, rounds, timer)
    measured = times["imperative"] / times["compiled"]
    judgement = judge_ratio(float(guess), measured)
    report = (f"measured {measured:.1f} at batch {batch} (imperative "
              f"{times['imperative'] * 1e6:.1f} µs, compiled {times['compiled'] * 1e6:.1f} µs "
              f"per call, naive engine); your guess is {judgement.off}. Why: imperatively "
              f"each of the {tasks} operators is an engine task paying the framework's Python "
              "(dispatch, shape rule, push); compiled, one task pays it once and runs the "
              "same kernels. The kernels shrink with the batch and the Python around them "
              "does not, so the ratio grows as the batch shrinks -- but only up to the ratio "
              "of the Python costs alone, since at these sizes the kernels were a small part "
              "of the call already")
    return verdict(judgement, report)
