"""Exercise checks for lesson 00 (the tour)."""

from __future__ import annotations

from typing import Any

import numpy as np

from hybridlab.exercises._common import Feedback, inputs, ops_in, run


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
    net.hybridize()
    if not np.allclose(net(x).asnumpy(), out.asnumpy(), atol=1e-5):
        return Feedback(False, "the hybridized network gives different numbers")
    return Feedback(True, "32 -> 16 -> 3 units, and hybridizing keeps the outputs")


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


def check_same_outputs(before: Any, after: Any) -> Feedback:
    """Outputs of one network on one input, before and after ``hybridize()``."""
    a, b = before.asnumpy(), after.asnumpy()
    if a.shape != b.shape:
        return Feedback(False, f"shapes differ ({a.shape} vs {b.shape}): same input both times?")
    if not np.allclose(a, b, atol=1e-5):
        return Feedback(False, "the values differ: did you re-create or re-initialise the "
                               "network between the two calls?")
    return Feedback(True, "hybridize changes how the network runs, not what it computes")
