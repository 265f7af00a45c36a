"""Exercise checks for lesson 07 (autograd, gradient checks, recomputation).

The reference gradients come from hybridlab's autograd in float64, and every check also
runs the student's code on more than one input, so an answer tuned to one case fails.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from hybridlab.exercises._common import Feedback, run


def energy(x: Any, w: Any) -> Any:
    """Exercise 1's scalar: ``sum(tanh(x . w^T) ** 2) + sum(x * x)`` (``x`` is used twice)."""
    from hybridlab import nd

    return (nd.tanh(nd.dot(x, w, transpose_b=True)) ** 2).sum() + (x * x).sum()


def _autograd(f: Callable[..., Any], *arrays: np.ndarray) -> list[np.ndarray]:
    """The gradients of the scalar ``f(*arrays)`` with respect to each array, in float64."""
    from hybridlab import autograd, nd

    variables = [nd.array(a, dtype="float64") for a in arrays]
    for v in variables:
        v.attach_grad()
    with autograd.record():
        result = f(*variables)
    result.backward()
    return [v.grad.asnumpy() for v in variables]  # type: ignore[union-attr]


def check_gradients(fn: Callable[[Any, Any], Any]) -> Feedback:
    """Exercise 1: ``fn(x, w)`` returns (d energy/dx, d energy/dw) computed with autograd."""
    from hybridlab import nd

    rng = np.random.default_rng(5)
    for shape_x, shape_w in [((2, 3), (4, 3)), ((3, 2), (1, 2))]:
        x, w = rng.normal(size=shape_x), rng.normal(size=shape_w)
        want = _autograd(energy, x, w)
        args = (nd.array(x, dtype="float64"), nd.array(w, dtype="float64"))
        got, error = run(functools.partial(fn, *args), "gradients(x, w)")
        if error is not None:
            return error
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            return Feedback(False, "return a pair: (gradient for x, gradient for w)")
        for name, value, expected in zip("xw", got, want):
            value = value.asnumpy() if hasattr(value, "asnumpy") else np.asarray(value)
            if value.shape != expected.shape:
                return Feedback(False, f"the gradient for {name} has shape {value.shape}; a "
                                       f"gradient has the shape of its variable, {expected.shape}")
            if not np.allclose(value, expected, rtol=1e-6, atol=1e-9):
                return Feedback(False, f"the gradient for {name} is wrong on a {shape_x} x: "
                                       "attach_grad, compute energy inside autograd.record(), "
                                       "call backward(), then read .grad")
    return Feedback(True, "x gets the sum of both paths it takes (the dot and x * x)")


def _test_functions() -> list[tuple[Callable[..., Any], np.ndarray]]:
    """(function of one NDArray, point) pairs with curvature, so a one-sided difference
    is off by about eps * f''/2 while a central one is off by about eps**2."""
    from hybridlab import nd

    rng = np.random.default_rng(6)
    mixing = nd.array(rng.normal(size=(3, 4)), dtype="float64")
    return [(lambda a: (nd.sin(a) * a).sum(), rng.normal(size=5)),
            (lambda a: (nd.tanh(nd.dot(a, mixing)) ** 2).sum(), rng.normal(size=(2, 3)))]


def _scalar(f: Callable[..., Any], a: np.ndarray) -> float:
    """``f`` as the student sees it: a float64 numpy array in, a Python float out."""
    from hybridlab import nd

    return float(f(nd.array(a, dtype="float64")).asscalar())


def check_numeric_gradient(fn: Callable[..., np.ndarray]) -> Feedback:
    """Exercise 2: ``fn(f, x, eps=1e-5)`` approximates the gradient of ``f`` at ``x``."""
    for f, point in _test_functions():
        (want,) = _autograd(f, point)
        x = point.copy()
        got, error = run(functools.partial(fn, functools.partial(_scalar, f), x, eps=1e-5),
                         f"numeric_gradient on a {x.shape} array")
        if error is not None:
            return error
        if not np.array_equal(x, point):
            return Feedback(False, "x changed: put every nudged entry back before moving on")
        got = np.asarray(got, dtype=np.float64)
        if got.shape != want.shape:
            return Feedback(False, f"got shape {got.shape} for an x of shape {want.shape}: "
                                   "one partial derivative per entry (np.ndindex walks them)")
        error = np.abs(got - want).max() / max(1.0, np.abs(want).max())
        if error > 1e-7:
            hint = ("close, but one-sided? (f(x+eps) - f(x-eps)) / (2 eps) is accurate to "
                    "eps**2" if error < 1e-3 else "these are not the partial derivatives")
            return Feedback(False, f"off by {error:.1e} relative to autograd on a {x.shape} "
                                   f"array: {hint}")
    return Feedback(True, "central differences agree with autograd to about 1e-10")


def _reference_step(x: Any, weights: list) -> list[np.ndarray]:
    """Exercise 3's answer by storing everything; leaves fresh zero ``.grad`` buffers."""
    from hybridlab import autograd, nd

    for w in weights:
        w.attach_grad()
    with autograd.record():
        h = x
        for w in weights:
            h = nd.tanh(nd.dot(h, w))
    h.backward()
    grads = [w.grad.asnumpy() for w in weights]
    for w in weights:
        w.attach_grad()  # zeros again: the student's step must fill them
    return grads


def check_train_step(fn: Callable[..., Any]) -> Feedback:
    """Exercise 3: checkpointed backward that does not recompute the last segment."""
    from hybridlab import nd

    calls = [0]

    def layer(h: Any, w: Any) -> Any:
        calls[0] += 1
        return nd.tanh(nd.dot(h, w))

    rng = np.random.default_rng(7)
    for depth, every in [(6, 2), (7, 3)]:
        weights = [nd.array(rng.normal(scale=0.5, size=(4, 4))) for _ in range(depth)]
        x = nd.array(rng.normal(size=(3, 4)))
        want = _reference_step(x, weights)
        calls[0] = 0
        _, error = run(functools.partial(fn, layer, x, weights, every),
                       f"train_step with {depth} layers, every={every},")
        if error is not None:
            return error
        if not all(np.allclose(w.grad.asnumpy(), g, atol=1e-5) for w, g in zip(weights, want)):  # type: ignore[union-attr]
            return Feedback(False, f"{depth} layers, every={every}: the weight gradients differ "
                                   "from storing everything")
        last = depth - (depth - 1) // every * every  # layers in the last segment
        expected = 2 * depth - last
        if calls[0] != expected:
            return Feedback(False, f"{depth} layers, every={every}: layer ran {calls[0]} times, "
                                   f"not {expected} ({depth} forward + {depth - last} recomputed: "
                                   f"all but the last segment's {last})")
    return Feedback(True, "same gradients, and the last segment is computed only once")


def tape_bytes(depth: int, width: int, batch: int) -> int:
    """Bytes of the distinct arrays the tape keeps (weights left out) after recording
    ``depth`` layers ``h = tanh(h . W)`` of ``width`` units on a float32 ``batch``."""
    from hybridlab import autograd, nd
    from hybridlab.walk import postorder

    weights = [nd.random.normal(scale=width ** -0.5, shape=(width, width)) for _ in range(depth)]
    for w in weights:
        w.attach_grad()
    h = nd.random.normal(shape=(batch, width))
    h.attach_grad()
    with autograd.record():
        for w in weights:
            h = nd.tanh(nd.dot(h, w))
    calls = postorder([h._ag[0]], lambda call: [  # type: ignore[union-attr]
        a._ag[0] for a in call.inputs if isinstance(a._ag, tuple)])
    parameters = {id(w) for w in weights}
    kept = {id(a): a for call in calls for a in (*call.inputs, *call.outputs)
            if id(a) not in parameters}
    return sum(a.size * a.dtype.itemsize for a in kept.values())


def check_tape_bytes(prediction: int, depth: int = 16, width: int = 64,
                     batch: int = 32) -> Feedback:
    """Predict-then-measure: how many bytes does the tape keep for a chain of ``depth``
    layers ``tanh(h . W)`` (section 4's chain, smaller), weights not counted? The chain
    is recorded and its tape measured."""
    measured = tape_bytes(depth, width, batch)
    activation = batch * width * 4
    if prediction == measured:
        return Feedback(True, f"{measured} bytes: {measured // activation} activations of "
                              f"{activation} bytes, 2 per layer plus the input")
    off = prediction - measured
    line = (f"you predicted {prediction} bytes; the tape keeps {measured} ({abs(off)} "
            f"bytes, {abs(off) / measured:.0%} {'too many' if off > 0 else 'too few'})")
    hints = {-activation: "the chain's input is on the tape too: the first dot reads it",
             -depth * activation: "each layer leaves two arrays: the dot's result (tanh "
                                  "reads it) and the tanh output (the next dot reads it)",
             -(depth + 1) * activation: "each layer leaves two arrays: the dot's result "
                                        "and the tanh output",
             -measured * 3 // 4: "float32: 4 bytes a number"}
    why = hints.get(off, f"count the arrays the backward will read: one activation is "
                         f"{batch} x {width} float32 = {activation} bytes")
    if off > 0 and off % (width * width * 4) == 0:
        why = "the weights are not counted: they are in memory for inference too"
    return Feedback(False, f"{line}: {why}")
