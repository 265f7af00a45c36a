"""Exercise checks for lesson 00 (the tour)."""

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


def check_tour_mlp(net: Any) -> Feedback:
    """A HybridSequential MLP: 20 inputs -> 32 -> 16 -> 3, same output hybridized or not."""
    from hybridlab.gluon import nn

    if not isinstance(net, nn.HybridSequential):
        return Feedback(False, f"expected an nn.HybridSequential, got {type(net).__name__}; "
                               "only hybrid blocks can be hybridized")
    (x,) = inputs((5, 20))
    out, error = run(lambda: net(x), "net(x) on a (5, 20) input")
    if error is not None:
        return error
    units = [layer.weight.shape[0] if hasattr(layer, "weight") else None for layer in net]  # type: ignore[attr-defined]
    if out.shape != (5, 3) or units != [32, 16, 3]:
        return Feedback(False, f"the layers have {units} units and give shape {out.shape}; "
                               "wanted Dense(32), Dense(16), Dense(3) and output (5, 3)")
    activations = _activations(net)
    if activations != ["relu", "relu"]:
        return Feedback(False, f"the activations between the layers are {activations}; "
                               "wanted a ReLU after each hidden layer (Dense(32, "
                               "activation='relu'), ...) and none after the last: without "
                               "them the three layers collapse into one linear map")
    net.hybridize()
    if not np.allclose(net(x).asnumpy(), out.asnumpy(), atol=1e-5):
        return Feedback(False, "the hybridized network gives different numbers")
    return Feedback(True, "32 -> 16 -> 3 units, and hybridizing keeps the outputs")


def _activations(net: Any) -> list[str]:
    """The activation of every Activation (or relu) node of ``net``'s program, in order."""
    from hybridlab import sym
    from hybridlab.lab.graphs import as_graph

    graph, _ = as_graph(net(sym.var("data")))
    return [str(dict(node.attrs).get("act_type", node.op)) for node in graph.nodes
            if node.kind == "call" and node.op in ("Activation", "relu", "sigmoid", "tanh")]


def check_fc_count(net: Any, answer: int) -> Feedback:
    """How many FullyConnected operators does ``net``'s program contain?"""
    from hybridlab import sym

    program, error = run(lambda: net(sym.var("data")), "net(sym.var('data'))")
    if error is not None:
        return Feedback(False, f"{error.message}; pass the network itself (a HybridSequential)")
    expected = ops_in(program).count("FullyConnected")
    if answer == expected:
        return Feedback(True, f"one FullyConnected per Dense layer: {expected}")
    return Feedback(False, f"{answer} is not it: count the Dense layers in the network -- "
                           "each becomes one FullyConnected node (ReLU is a separate node)")


def check_speedup_guess(net: Any, guess: float, batch: int = 1, calls: int = 100,
                        rounds: int = 5, timer: Callable[[], float] = time.perf_counter
                        ) -> Feedback:
    """Predict imperative time / hybridized time of ``net`` on a batch of ``batch``, then
    measure it (the course's protocol, lesson 00); judged by :func:`judge_ratio`."""
    from hybridlab import nd

    if not isinstance(guess, (int, float)) or not guess > 0:
        return Feedback(False, f"guess a positive number (how many times faster), not {guess!r}")
    if not hasattr(net, "hybridize") or not len(net):
        return Feedback(False, "pass the tour's network, a HybridSequential of Dense layers")
    features = net[0].weight.shape[1]
    if not features:
        return Feedback(False, "call the network once first, so its layers know their sizes")
    x = nd.random.normal(shape=(batch, features))
    operators = len(ops_in_call(net, x))
    times = interleaved_medians(
        {"imperative": lambda: net(x), "hybridized": lambda: net(x)}, calls, rounds, timer,
        switches={"imperative": lambda: net.hybridize(active=False),
                  "hybridized": lambda: net.hybridize()})
    net.hybridize()
    measured = times["imperative"] / times["hybridized"]
    judgement = judge_ratio(float(guess), measured)
    why = (f"the imperative call runs {operators} engine operations, each paying the "
           "framework's Python (the layer's call, its parameters, the dispatch, the push); the "
           "hybridized call runs one, a generated function calling the same kernels")
    if measured > 1.5 * operators:
        why += (f" -- so more than {operators} times faster: an imperative operation costs "
                "more than the whole compiled call")
    elif measured < 2:
        why += " -- but here the arithmetic dominates, and it is the same in both"
    report = (f"measured {measured:.1f} (imperative {times['imperative'] * 1e6:.1f} µs, "
              f"hybridized {times['hybridized'] * 1e6:.1f} µs per call on a batch of {batch}, "
              f"naive engine); your guess {guess} is {judgement.off}. Why: {why}")
    return verdict(judgement, report)


def ops_in_call(net: Any, x: Any) -> list[str]:
    """The engine operations of one imperative call of ``net`` on ``x``."""
    from hybridlab import engine

    net.hybridize(active=False)
    with engine.engine_scope(engine.NaiveEngine()) as naive:
        naive.set_tracing(True)
        net(x).wait_to_read()
        return [record.name for record in naive.trace]
