"""Exercise checks for lesson 01 (imperative and symbolic programs)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from hybridlab.exercises._common import Feedback, inputs, ops_in, run


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
