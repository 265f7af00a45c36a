"""gluon.contrib: convolutional and projected recurrent cells, variational dropout,
dynamic_unroll, PixelShuffle."""

from __future__ import annotations

import numpy as np
import pytest

import hybridlab as mx
from hybridlab import autograd, gluon, nd, sym
from hybridlab.gluon.contrib import rnn as crnn
from hybridlab.gluon.contrib.nn import PixelShuffle1D, PixelShuffle2D, PixelShuffle3D

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("make, in_shape, out_shape", [
    (lambda: crnn.Conv1DRNNCell((3, 9), 4, 3, 3, prefix="c_"), (2, 3, 9), (2, 4, 7)),
    (lambda: crnn.Conv2DLSTMCell((3, 6, 5), 4, 3, 5, i2h_pad=1, prefix="c_"), (2, 3, 6, 5),
     (2, 4, 6, 5)),
    (lambda: crnn.Conv3DGRUCell((2, 4, 4, 4), 3, 3, 3, prefix="c_"), (1, 2, 4, 4, 4),
     (1, 3, 2, 2, 2)),
])
def test_conv_cells_unroll_symbolically_and_imperatively(make, in_shape, out_shape):
    cell = make()
    outputs, _ = cell.unroll(2, [sym.var(f"t{i}") for i in range(2)])
    group = sym.Group(outputs)
    assert group.list_outputs() == ["c_t0_out_output", "c_t1_out_output"]
    assert group.infer_shape(t0=in_shape, t1=in_shape)[1] == [out_shape] * 2
    cell.initialize()
    x = nd.array(RNG.normal(size=(in_shape[0], 2, *in_shape[1:])))
    merged, states = cell.unroll(2, x, merge_outputs=True)
    assert merged.shape == (out_shape[0], 2, *out_shape[1:])
    assert all(s.shape == out_shape for s in states)


def test_conv_rnn_step_is_a_convolution_by_hand():
    """One step of the 1-D convolutional RNN: tanh(conv(x, W_i) + b_i + conv(h, W_h) + b_h),
    the recurrent convolution padded to keep the width."""
    cell = crnn.Conv1DRNNCell((1, 5), 1, 3, 3)
    cell.initialize(mx.init.One())
    x, h = RNG.normal(size=(1, 1, 5)), RNG.normal(size=(1, 1, 3))
    out, _ = cell(nd.array(x), [nd.array(h)])
    window = np.convolve(x[0, 0], np.ones(3), "valid")  # width 5 -> 3
    padded = np.convolve(np.pad(h[0, 0], 1), np.ones(3), "valid")  # width 3 kept
    np.testing.assert_allclose(out.asnumpy()[0, 0], np.tanh(window + padded), rtol=1e-5)


def test_conv_cell_sizes_its_input_channels_on_the_first_call():
    cell = crnn.Conv1DLSTMCell((0, 7), 4, 3, 3)
    cell.hybridize()
    cell.initialize()
    out, _ = cell.unroll(3, nd.ones((2, 3, 5, 7)), merge_outputs=True)
    assert cell.i2h_weight.shape == (16, 5, 3) and out.shape == (2, 3, 4, 5)


def test_lstmp_cells_are_what_the_fused_projected_lstm_computes():
    fused = gluon.rnn.LSTM(6, projection_size=3, input_size=4, layout="NTC", prefix="p_")
    cells = gluon.rnn.HybridSequentialRNNCell(prefix="p_")
    with cells.name_scope():
        cells.add(crnn.LSTMPCell(6, 3, prefix="l0_"))
    fused.initialize()
    cells.initialize()
    for name, param in fused.collect_params().items():
        value = nd.array(RNG.normal(size=param.shape) * 0.5)
        param.set_data(value)
        cells.collect_params()[name].set_data(value)
    x = nd.array(RNG.normal(size=(2, 5, 4)))
    expected = cells.unroll(5, x, merge_outputs=True)[0]
    np.testing.assert_allclose(fused(x).asnumpy(), expected.asnumpy(), rtol=1e-5, atol=1e-6)
    assert expected.shape == (2, 5, 3)


def test_variational_dropout_keeps_one_mask_per_sequence():
    cell = crnn.VariationalDropoutCell(gluon.rnn.RNNCell(4, input_size=4), drop_inputs=0.5)
    cell.initialize(mx.init.One())
    x = nd.ones((3, 6, 4))
    with autograd.train_mode():
        cell.reset()
        inputs = [cell._mask(nd, "inputs", x[:, 0], 0.5).asnumpy() for _ in range(3)]
    assert all((m == inputs[0]).all() for m in inputs)  # drawn once, reused every step
    with autograd.record():
        first, _ = cell.unroll(6, x, merge_outputs=True)
        second, _ = cell.unroll(6, x, merge_outputs=True)
    assert not np.allclose(first.asnumpy(), second.asnumpy())  # a new mask per sequence


@pytest.mark.parametrize("layout", ["TNC", "NTC"])
def test_dynamic_unroll_is_one_loop_with_unroll_s_results(layout):
    cell = gluon.rnn.GRUCell(3, input_size=2)
    cell.initialize()
    steps, batch = 5, 3
    shape = (steps, batch, 2) if layout == "TNC" else (batch, steps, 2)
    x = nd.array(RNG.normal(size=shape))
    lengths = nd.array([5, 2, 3])
    begin = [nd.zeros((batch, 3))]
    out, states = crnn.dynamic_unroll(cell, x, begin, layout=layout, valid_length=lengths)
    expected, expected_states = cell.unroll(steps, x, begin, layout=layout,
                                            merge_outputs=True, valid_length=lengths)
    np.testing.assert_allclose(out.asnumpy(), expected.asnumpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(states[0].asnumpy(), expected_states[0].asnumpy(), rtol=1e-5)


@pytest.mark.parametrize("block, shape", [(PixelShuffle1D(3), (2, 6, 4)),
                                          (PixelShuffle2D((2, 3)), (1, 12, 2, 3)),
                                          (PixelShuffle3D(2), (1, 16, 2, 1, 3))])
def test_pixel_shuffle_moves_channels_into_space(block, shape):
    x = RNG.normal(size=shape)
    dims = len(shape) - 2
    factors = block._factors
    channels = shape[1] // int(np.prod(factors))
    # reference: output[n, c, d1*f1 + i1, ...] = input[n, c*F + (i1*f2 + i2 ...), d1, ...]
    split = x.reshape((shape[0], channels, *factors, *shape[2:]))
    order = (0, 1) + tuple(a for i in range(dims) for a in (2 + dims + i, 2 + i))
    expected = split.transpose(order).reshape(
        (shape[0], channels, *[d * f for d, f in zip(shape[2:], factors)]))
    np.testing.assert_allclose(block(nd.array(x)).asnumpy(), expected, rtol=1e-6)
    block.hybridize()
    np.testing.assert_allclose(block(nd.array(x)).asnumpy(), expected, rtol=1e-6)


def test_hybridize_takes_its_flags_as_a_dict_too():
    net = gluon.nn.Dense(2, in_units=3)
    net.initialize()
    net.hybridize({"static_alloc": True})
    assert net._active and net._flags["static_alloc"] is True
