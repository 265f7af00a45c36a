"""Exercise checks for lesson 01 (imperative and symbolic programs)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from hybridlab.exercises._common import Feedback, inputs, judge_amount, ops_in, run


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


def chain(x: Any) -> Any:
    """Section 1's chain: four statements, each reading only the array the one before made."""
    h1 = np.tanh(x)
    h2 = np.tanh(h1)
    h3 = np.tanh(h2)
    return np.tanh(h3)


def check_held_bytes(guess: int, n: int = 250_000) -> Feedback:
    """Predict how many bytes of arrays ``chain``'s local names hold while its last
    statement runs, on a float32 array of ``n`` numbers; then measure it: section 1's
    ``lifetimes`` runs the function and follows each array until it is freed."""
    from hybridlab.lab.memory import lifetimes

    if not isinstance(guess, (int, np.integer)) or isinstance(guess, bool):
        return Feedback(False, f"give a whole number of bytes, not {guess!r}")
    steps, lives = lifetimes(chain, np.ones(n, dtype=np.float32))
    last = len(steps) - 2  # the return statement; the step after it is "(returned)"
    held = [life for life in lives if life.born < last < life.freed or life.born == last]
    measured = sum(life.nbytes for life in held)
    judgement = judge_amount(guess, measured, within=1.05)
    array = 4 * n
    why = (f"each array is {n:,} float32 numbers, {array:,} bytes; while the last statement "
           f"runs, {', '.join(life.name for life in held)} are all still held -- a local "
           "lives until the function returns, not until its last use, because the "
           "interpreter runs one statement at a time and cannot know a name will not be read "
           "again (only h3 is still to be read)")
    if judgement.correct:
        return Feedback(True, f"{measured:,} bytes: {why}")
    hint = {array: " -- you counted only the array the last statement reads",
            4 * array: " -- the input x is the caller's, and the result is not a local yet",
            measured // 4: " -- a float32 takes 4 bytes"}.get(guess, "")
    return Feedback(False, f"measured {measured:,} bytes; your guess {guess:,} is "
                           f"{judgement.off}{hint}. Why: {why}")
