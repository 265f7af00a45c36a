"""Lesson 12's helpers and exercise checks: the reference solutions pass, and plausible
wrong answers fail with a reason."""

from __future__ import annotations

import numpy as np
import pytest
from test_lessons import solution

import hybridlab as mx
from hybridlab import gluon, random
from hybridlab.exercises import lesson12
from hybridlab.gluon import rnn


@pytest.fixture(autouse=True)
def _seeded():
    random.seed(0)


def test_text_lines_and_windows():
    assert lesson12.text_lines("ab\n\nc\nde f") == ["ab", "de f"]
    codes = np.arange(1, 21, dtype=np.int32)
    x, y = lesson12.windows(codes, 3, 5, np.random.default_rng(0))
    assert x.shape == (3, 5) and str(x.dtype) == "int32" and str(y.dtype) == "float32"
    assert np.array_equal(x.asnumpy()[:, 1:], y.asnumpy()[:, :-1])  # y is x moved on by one
    assert np.array_equal(y.asnumpy() - x.asnumpy(), np.ones((3, 5)))
    with pytest.raises(ValueError, match="no window of 21"):
        lesson12.windows(codes, 1, 20, np.random.default_rng(0))


def test_generate_samples_from_the_models_scores():
    """A 'model' that always scores one character far above the rest writes only it."""
    from hybridlab import ndarray as nd
    from hybridlab.gluon.contrib.data import CharVocab

    vocab = CharVocab("abc")

    def always_b(x):
        scores = np.full((x.shape[0], x.shape[1], len(vocab)), -50.0, np.float32)
        scores[..., vocab.char_to_idx["b"]] = 50.0
        return nd.array(scores)

    assert lesson12.generate(always_b, vocab, "ca", 5) == "bbbbb"


def test_unrolled_nodes_grow_by_one_cell_per_step():
    one, two, five = (lesson12.unrolled_nodes(n) for n in (1, 2, 5))
    assert five - one == 4 * (two - one) > 0


def test_lesson12_solutions():
    sol = solution("12_sequences")
    assert lesson12.check_unrolled_nodes(sol.UNROLLED_NODES_50, 50)
    assert lesson12.check_padding_waste(sol.PADDING, [3, 5, 8, 9, 20, 31], [8, 16, 32])
    assert lesson12.check_bptt_bytes(sol.BPTT_32, 32)


def test_lesson12_wrong_node_counts_fail_and_say_why():
    right = solution("12_sequences").UNROLLED_NODES_50
    per_step = lesson12.unrolled_nodes(2) - lesson12.unrolled_nodes(1)
    verdict = lesson12.check_unrolled_nodes(per_step * 50, 50)
    assert not verdict and "you left those out" in verdict.message
    assert not lesson12.check_unrolled_nodes(right + 1, 50)
    assert "whole number" in lesson12.check_unrolled_nodes(702.5, 50).message


def test_lesson12_wrong_padding_fails_and_says_why():
    lengths, keys = [3, 5, 8, 9, 20, 31], [8, 16, 32]
    everything_longest = 1 - sum(lengths) / (32 * len(lengths))
    verdict = lesson12.check_padding_waste(everything_longest, lengths, keys)
    assert not verdict and "longest key" in verdict.message
    assert not lesson12.check_padding_waste(0.0, lengths, keys)
    assert "fraction between 0 and 1" in lesson12.check_padding_waste(27, lengths, keys).message


def test_lesson12_wrong_memory_fails_and_says_why():
    at_16 = lesson12.bptt_bytes(16)
    verdict = lesson12.check_bptt_bytes(at_16, 32)
    assert not verdict and "grow with the steps" in verdict.message
    assert not lesson12.check_bptt_bytes(4 * at_16, 32)
    assert "nothing at all" in lesson12.check_bptt_bytes(0, 32).message
    assert "number of bytes" in lesson12.check_bptt_bytes("many", 32).message


def test_lesson12_gru_body_solution_passes():
    assert lesson12.check_gru_body(solution("12_sequences").make_body)


def test_lesson12_wrong_gru_bodies_fail_and_say_why():
    def make_body(F, hidden, i2h_weight, h2h_weight, i2h_bias, h2h_bias, swap=False,
                  stale=False):
        def body(x, states):
            h = states[0]
            units = 3 * hidden
            x_r, x_z, x_n = F.split(F.FullyConnected(x, i2h_weight, i2h_bias,
                                                     num_hidden=units), num_outputs=3, axis=1)
            h_r, h_z, h_n = F.split(F.FullyConnected(h, h2h_weight, h2h_bias,
                                                     num_hidden=units), num_outputs=3, axis=1)
            r, z = F.sigmoid(x_r + h_r), F.sigmoid(x_z + h_z)
            if swap:  # the gates in the wrong order
                r, z = z, r
            new = F.tanh(x_n + r * h_n)
            out = (1 - z) * new + z * h
            return out, [h if stale else out]
        return body

    swapped = lesson12.check_gru_body(lambda *a: make_body(*a, swap=True))
    assert not swapped and "first step is already wrong" in swapped.message
    stale = lesson12.check_gru_body(lambda *a: make_body(*a, stale=True))
    assert not stale and "read the state the previous one returned" in stale.message
    broken = lesson12.check_gru_body(lambda *a: lambda x, states: (x.no_such_method(), states))
    assert not broken and "raised" in broken.message


class _Unrolled(gluon.HybridBlock):
    """Lesson 12's time loop in Python (``cell.unroll``)."""

    def __init__(self, cell):
        super().__init__()
        self.cell = cell

    def hybrid_forward(self, F, x, *states):
        return self.cell.unroll(x.shape[0], x, list(states), layout="TNC",
                                merge_outputs=True)[0]


class _Looped(gluon.HybridBlock):
    """Lesson 12's time loop as one operator (``F.contrib.foreach``)."""

    def __init__(self, cell):
        super().__init__()
        self.cell = cell

    def hybrid_forward(self, F, x, *states):
        return F.contrib.foreach(self.cell, x, list(states))[0]


@pytest.mark.parametrize("make_cell, n_states", [(rnn.LSTMCell, 2), (rnn.GRUCell, 1)])
def test_imperative_unrolled_and_foreach_agree_on_outputs_and_gradients(make_cell, n_states):
    """The three ways of lesson 12 section 2, on two lengths each (a new length retraces the
    unrolled block and reuses the foreach body): the same outputs, and the same gradients
    of every weight, of the inputs and of the starting states."""
    from hybridlab import autograd
    from hybridlab import ndarray as nd

    hidden, features, batch = 5, 3, 2
    cell = make_cell(hidden, input_size=features)
    cell.initialize(mx.init.Xavier())
    imperative, unrolled, looped = _Unrolled(cell), _Unrolled(cell), _Looped(cell)
    unrolled.hybridize(static_shape=True)
    looped.hybridize()
    rng = np.random.default_rng(2)
    for steps in (4, 7):
        arrays = [rng.normal(size=shape).astype(np.float32) for shape in
                  [(steps, batch, features)] + [(batch, hidden)] * n_states]
        head = nd.array(rng.normal(size=(steps, batch, hidden)).astype(np.float32))
        results = {}
        for name, block in (("imperative", imperative), ("unrolled", unrolled),
                            ("foreach", looped)):
            inputs = [nd.array(a) for a in arrays]
            for array in inputs:
                array.attach_grad()
            with autograd.record():
                out = block(*inputs)
            out.backward(head)
            results[name] = [out.asnumpy()] + [a.grad.asnumpy() for a in inputs] + \
                [p.grad().asnumpy().copy() for p in cell.collect_params().values()]
        assert len(results["imperative"]) == 1 + (1 + n_states) + 4
        for name in ("unrolled", "foreach"):
            for got, want in zip(results[name], results["imperative"]):
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=name)
        assert np.abs(results["imperative"][1]).max() > 0  # gradients reach the inputs
