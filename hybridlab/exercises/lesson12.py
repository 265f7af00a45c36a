"""Exercise checks and helpers of lesson 12 (sequences: recurrent networks hybridized).

The helpers are what the lesson would otherwise repeat: the text's lines, random windows
of it for training a language model, sampling text from a model, and the two numbers
the lesson and its exercises both measure -- the nodes of an LSTM unrolled over ``T``
steps (MXNet's ``cell.unroll``, traced) and the bytes the memory planner gives its
training program (forward and backward, lesson 05's planner).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from hybridlab.exercises._common import Feedback, run

HIDDEN, FEATURES, BATCH = 16, 8, 4  # the unrolled LSTM the exercises measure


def text_lines(text: str, min_length: int = 2) -> list[str]:
    """The lines of ``text`` with at least ``min_length`` characters (a line of one
    character has nothing to predict: a language model reads one and predicts the next)."""
    return [line for line in text.split("\n") if len(line) >= min_length]


def windows(codes: np.ndarray, batch: int, length: int, rng: np.random.Generator
            ) -> tuple[Any, Any]:
    """``batch`` random windows of ``length + 1`` characters of ``codes``: the inputs
    (int32, ``(batch, length)``) and the next character of each (float32, the labels)."""
    from hybridlab import ndarray as nd

    if len(codes) <= length + 1:
        raise ValueError(f"windows: a text of {len(codes)} characters has no window of "
                         f"{length + 1}; take a shorter length")
    starts = rng.integers(0, len(codes) - length - 1, batch)
    rows = codes[starts[:, None] + np.arange(length + 1)]
    return nd.array(rows[:, :-1], dtype="int32"), nd.array(rows[:, 1:], dtype="float32")


def generate(net: Any, vocab: Any, prefix: str, count: int, temperature: float = 0.5,
             seed: int = 0) -> str:
    """``count`` characters sampled one by one after ``prefix``: each time the network
    reads the last ``len(prefix)`` characters (one window shape, so a hybridized network
    compiles once) and the next character is drawn from its softmax at ``temperature``
    (low: the likeliest characters; 1: the model's own distribution)."""
    from hybridlab import ndarray as nd

    rng = np.random.default_rng(seed)
    codes = list(vocab.encode(prefix))
    width = len(codes)
    for _ in range(count):
        logits = net(nd.array([codes[-width:]], dtype="int32"))[0, -1].asnumpy()
        scaled = logits.astype(np.float64) / temperature
        weights = np.exp(scaled - scaled.max())
        codes.append(int(rng.choice(len(weights), p=weights / weights.sum())))
    return vocab.decode(codes[width:])


# --- the unrolled LSTM: its nodes and its training program's bytes ---------------------------
def _unrolled_lstm(length: int) -> tuple[Any, list[Any]]:
    """A hybridized LSTM cell unrolled over ``length`` steps (``cell.unroll``), called once
    on zeros, and its inputs."""
    from hybridlab import gluon
    from hybridlab import ndarray as nd
    from hybridlab.gluon import rnn

    class Unrolled(gluon.HybridBlock):
        def __init__(self) -> None:
            super().__init__(prefix="unrolled_")
            with self.name_scope():
                self.cell = rnn.LSTMCell(HIDDEN, input_size=FEATURES)

        def hybrid_forward(self, F: Any, x: Any, h: Any, c: Any) -> Any:
            return self.cell.unroll(length, x, [h, c], layout="TNC", merge_outputs=True)[0]

    block = Unrolled()
    block.initialize()
    block.hybridize()
    inputs = [nd.zeros((length, BATCH, FEATURES)), nd.zeros((BATCH, HIDDEN)),
              nd.zeros((BATCH, HIDDEN))]
    block(*inputs).wait_to_read()
    return block, inputs


@functools.cache  # a count depends only on the length
def unrolled_nodes(length: int) -> int:
    """The operator nodes of the LSTM cell unrolled over ``length`` steps, as traced."""
    from hybridlab.lab.graphs import as_graph

    graph, _ = as_graph(_unrolled_lstm(length)[0])
    return sum(node.kind == "call" for node in graph.nodes)


@functools.cache  # so does the bound
def bptt_bytes(length: int) -> int:
    """The liveness bound of the unrolled LSTM's training program (forward, then backward
    through time): the bytes of results that must be alive at its busiest step, as lesson
    05's memory planner counts them."""
    from hybridlab.lab.memory import timeline

    return int(timeline(_unrolled_lstm(length)[0], backward=True)[1].bound)


def check_unrolled_nodes(prediction: int, length: int = 50) -> Feedback:
    """Exercise 1: the operator nodes of the LSTM cell unrolled over ``length`` steps."""
    if isinstance(prediction, bool) or not isinstance(prediction, (int, np.integer)):
        return Feedback(False, f"give a whole number of nodes, got {prediction!r}")
    got, one, two = unrolled_nodes(length), unrolled_nodes(1), unrolled_nodes(2)
    per_step = two - one
    if prediction == got:
        return Feedback(True, f"{got} = {one - per_step} + {per_step} x {length}: every step "
                              f"adds a copy of the cell's {per_step} operators")
    hint = (f"every step adds the cell's {per_step} operators, and the graph has "
            f"{one - per_step} more that do not repeat (the stacking of the outputs)")
    if prediction == per_step * length:
        hint = f"close: {hint} -- you left those out"
    return Feedback(False, f"{prediction} is not the {got} nodes of {length} steps: {hint}")


def check_padding_waste(prediction: float, lengths: Sequence[int],
                        keys: Sequence[int]) -> Feedback:
    """Exercise 2: the share (0 to 1) of the computed tokens that are padding when the
    sequences of ``lengths`` go to the buckets ``keys``."""
    from hybridlab.gluon.contrib.data import bucket_of

    if not isinstance(prediction, (int, float, np.floating)) or isinstance(prediction, bool):
        return Feedback(False, f"give a number between 0 and 1, got {prediction!r}")
    if not 0 <= prediction <= 1:
        return Feedback(False, f"{prediction} is not a share: give a fraction between 0 and 1 "
                               f"(0.25 for 25%)")
    padded = sum(keys[bucket_of(n, keys)] for n in lengths)
    got = 1 - sum(lengths) / padded
    line = f"padding is {got:.1%} of the {padded} tokens computed"
    if abs(prediction - got) <= 0.01:
        return Feedback(True, f"{line}: each sequence costs its bucket's key, not its length")
    if abs(prediction - (1 - sum(lengths) / (max(keys) * len(lengths)))) <= 0.01:
        return Feedback(False, f"{line}; you padded every sequence to the longest key -- each "
                               "goes to the first bucket whose key is at least its length")
    return Feedback(False, f"{line}, not {prediction:.1%}: pad each sequence to the first key "
                           "at least its length, then compare the tokens with the lengths")


def check_bptt_bytes(prediction: float, length: int = 32) -> Feedback:
    """Exercise 3: the liveness bound of the unrolled training program at ``length`` steps,
    predicted from the lesson's measurements at shorter lengths."""
    if isinstance(prediction, bool) or not isinstance(
            prediction, (int, float, np.integer, np.floating)):
        return Feedback(False, f"give a number of bytes, got {prediction!r}")
    got, half = bptt_bytes(length), bptt_bytes(length // 2)
    if prediction <= 0:
        return Feedback(False, f"nothing at all ({prediction}), but {got} bytes must be alive at "
                               f"the busiest step of {length} steps: the backward reads every "
                               "step's activations, so the forward keeps them")
    error = abs(prediction - got) / got
    line = f"{got} bytes must be alive at the busiest step of {length} steps"
    if error <= 0.02:
        return Feedback(True, f"{line} ({error:.1%} off): backpropagation through time keeps "
                              f"every step's activations, the same bytes per step")
    if abs(prediction - half) / got <= 0.02:
        return Feedback(False, f"{line}, not the {half} of {length // 2} steps: the backward "
                               "needs every step's activations, so they grow with the steps")
    return Feedback(False, f"{line}; {prediction:.0f} is {error:.0%} off: fit a line through "
                           "the measurements (bytes = a + b x steps) and extend it")


def gru_weights(hidden: int = HIDDEN, features: int = FEATURES, seed: int = 3
                ) -> dict[str, np.ndarray]:
    """A GRU cell's weights in MXNet's layout (gates reset, update, new, stacked by rows)."""
    rng = np.random.default_rng(seed)
    shapes = {"i2h_weight": (3 * hidden, features), "h2h_weight": (3 * hidden, hidden),
              "i2h_bias": (3 * hidden,), "h2h_bias": (3 * hidden,)}
    return {name: (0.3 * rng.normal(size=shape)).astype(np.float32)
            for name, shape in shapes.items()}


def _reference_gru(weights: dict[str, np.ndarray], x: np.ndarray, h: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The same steps by ``gluon.rnn.GRUCell`` (imperative), given the weights."""
    from hybridlab import ndarray as nd
    from hybridlab.gluon import rnn

    cell = rnn.GRUCell(h.shape[1], input_size=x.shape[2])
    cell.initialize()
    for name, value in weights.items():
        getattr(cell, name).set_data(nd.array(value))
    outputs, states = cell.unroll(x.shape[0], nd.array(x), [nd.array(h)], layout="TNC",
                                  merge_outputs=True)
    return outputs.asnumpy(), states[0].asnumpy()


def check_gru_body(make_body: Callable[..., Callable[[Any, Any], Any]]) -> Feedback:
    """Exercise 4: ``make_body(F, hidden, i2h_weight, h2h_weight, i2h_bias, h2h_bias)``
    returns a ``foreach`` body ``(x_t, [h]) -> (h_new, [h_new])`` computing one GRU step; the check
    runs it with ``F.contrib.foreach`` imperatively and hybridized, on two lengths."""
    from hybridlab import gluon
    from hybridlab import ndarray as nd

    weights = gru_weights()
    names = list(weights)

    class Looped(gluon.HybridBlock):
        def __init__(self) -> None:
            super().__init__(prefix="gru_")
            for name, value in weights.items():
                setattr(self, name, self.params.get(name, shape=value.shape))

        def hybrid_forward(self, F: Any, x: Any, h: Any, **params: Any) -> Any:
            body = make_body(F, HIDDEN, *[params[n] for n in names])
            outputs, states = F.contrib.foreach(body, x, [h])
            return outputs

    block = Looped()
    block.initialize()
    for name, value in weights.items():
        block.params.get(name).set_data(nd.array(value))
    rng = np.random.default_rng(4)
    for mode in ("imperatively", "hybridized"):
        if mode == "hybridized":
            block.hybridize()
        for length in (3, 5):
            x = rng.normal(size=(length, BATCH, FEATURES)).astype(np.float32)
            h = rng.normal(size=(BATCH, HIDDEN)).astype(np.float32)
            got, error = run(functools.partial(block, nd.array(x), nd.array(h)),
                             f"foreach over your body, {mode}, for {length} steps,")
            if error is not None:
                return error
            want, _ = _reference_gru(weights, x, h)
            if tuple(got.shape) != want.shape:
                return Feedback(False, f"{mode}, {length} steps give outputs of shape "
                                       f"{tuple(got.shape)}, not {want.shape}: return the new "
                                       f"h as the step's output and as its one state")
            if not np.allclose(got.asnumpy(), want, atol=1e-5):
                return Feedback(False, _gru_hint(got.asnumpy(), want, mode, length))
    return Feedback(True, "your body computes gluon.rnn.GRUCell's steps, imperatively and as "
                          "one foreach node whatever the length")


def _gru_hint(got: np.ndarray, want: np.ndarray, mode: str, length: int) -> str:
    first = np.allclose(got[0], want[0], atol=1e-5)
    where = ("the first step is right and a later one is not: does each step read the state "
             "the previous one returned?" if first else "the first step is already wrong")
    return (f"{mode}, {length} steps: not GRUCell's numbers; {where} MXNet's gates are "
            "stacked reset, update, new (rows of the weights); new = tanh(i2h_n + r * h2h_n), "
            "h = (1 - z) * new + z * h")


__all__ = ["check_bptt_bytes", "check_gru_body", "check_padding_waste", "check_unrolled_nodes",
           "bptt_bytes", "generate", "gru_weights", "text_lines",
           "unrolled_nodes", "windows"]
