"""gluon.rnn: cells, unroll, and the fused layers against the unrolled cells."""

from __future__ import annotations

import json

import numpy as np
import pytest

import hybridlab as mx
from hybridlab import autograd, gluon, nd, sym
from hybridlab.gluon import rnn

MODES = {"lstm": (rnn.LSTM, rnn.LSTMCell), "gru": (rnn.GRU, rnn.GRUCell),
         "rnn_tanh": (lambda *a, **k: rnn.RNN(*a, activation="tanh", **k),
                      lambda *a, **k: rnn.RNNCell(*a, activation="tanh", **k)),
         "rnn_relu": (rnn.RNN, lambda *a, **k: rnn.RNNCell(*a, activation="relu", **k))}


def _stack_like(mode: str, hidden: int, layers: int, bidirectional: bool):
    stack = rnn.HybridSequentialRNNCell(prefix="net_")
    cell = MODES[mode][1]
    with stack.name_scope():
        for i in range(layers):
            if bidirectional:
                stack.add(rnn.BidirectionalCell(cell(hidden, prefix=f"l{i}_"),
                                                cell(hidden, prefix=f"r{i}_")))
            else:
                stack.add(cell(hidden, prefix=f"l{i}_"))
    return stack


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("bidirectional", [False, True])
def test_hybridized_fused_layer_matches_the_unrolled_cells(mode, bidirectional):
    """The fused layer, hybridized, and the cells unrolled imperatively compute the same
    outputs, final states and gradients (of the input and of every parameter)."""
    hidden, layers = 5, 2
    fused = MODES[mode][0](hidden, num_layers=layers, layout="NTC",
                           bidirectional=bidirectional, prefix="net_")
    cells = _stack_like(mode, hidden, layers, bidirectional)
    fused.initialize()
    cells.initialize()
    rng = np.random.default_rng(0)
    x = nd.array(rng.normal(size=(2, 4, 3)))
    begin = fused.begin_state(2)
    fused.infer_shape(x, begin)
    for name, param in fused.collect_params().items():
        value = nd.array(rng.normal(size=param.shape) * 0.5)
        param.set_data(value)
        cells.collect_params()[name].set_data(value)
    fused.hybridize()
    results = []
    for run in (lambda v: fused(v, begin),
                lambda v: cells.unroll(4, v, begin_state=cells.begin_state(batch_size=2),
                                       layout="NTC", merge_outputs=True)):
        v = x.copy()
        v.attach_grad()
        with autograd.record():
            out, states = run(v)
            loss = (out * out).sum()
        loss.backward()
        results.append((out.asnumpy(), [s.asnumpy() for s in states], v.grad.asnumpy()))
    (f_out, f_states, f_dx), (c_out, c_states, c_dx) = results
    np.testing.assert_allclose(f_out, c_out, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(f_dx, c_dx, rtol=1e-4, atol=1e-5)
    per_state = 2 if mode == "lstm" else 1  # the cells' states: layer by layer, h (and c)
    for k, fused_state in enumerate(f_states):
        np.testing.assert_allclose(fused_state, np.stack(c_states[k::per_state]), rtol=1e-5,
                                   atol=1e-6)
    for name, param in fused.collect_params().items():
        np.testing.assert_allclose(param.grad().asnumpy(),
                                   cells.collect_params()[name].grad().asnumpy(),
                                   rtol=1e-4, atol=1e-5, err_msg=name)


def test_hybridized_lstm_is_one_fused_rnn_node(tmp_path):
    """Traced and exported, a two-layer bidirectional LSTM is MXNet's graph: its weights
    concatenated into one vector, and one RNN operator -- no per-step operators."""
    net = rnn.LSTM(4, num_layers=2, bidirectional=True)
    net.initialize()
    net.hybridize()
    x = nd.ones((6, 2, 3))
    y = net(x)
    net.export(str(tmp_path / "lstm"))
    ops = [n["op"] for n in json.loads((tmp_path / "lstm-symbol.json").read_text())["nodes"]]
    assert ops.count("RNN") == 1
    assert not {"FullyConnected", "SliceChannel", "_rnn_layer"} & set(ops)
    # as in MXNet, the zero states made for a call without states are inputs of the graph
    imported = gluon.SymbolBlock.imports(str(tmp_path / "lstm-symbol.json"),
                                         ["data0", "data1", "data2"],
                                         str(tmp_path / "lstm-0000.params"))
    zeros = net.begin_state(2)
    np.testing.assert_allclose(imported(x, *zeros)[0].asnumpy(), y.asnumpy(), rtol=1e-6)


def test_a_layer_returns_states_only_when_given_them():
    net = rnn.GRU(3, num_layers=2)
    net.initialize()
    x = nd.ones((5, 2, 4))
    assert net(x).shape == (5, 2, 3)
    out, states = net(x, net.begin_state(2))
    assert out.shape == (5, 2, 3) and [s.shape for s in states] == [(2, 2, 3)]
    net.hybridize()
    np.testing.assert_allclose(net(x).asnumpy(), out.asnumpy(), rtol=1e-6)
    other = rnn.GRU(3, num_layers=2)
    other.initialize()
    with pytest.raises(ValueError, match=r"state has shape \(1, 2, 3\), expected \(2, 2, 3\)"):
        other(x, nd.zeros((1, 2, 3)))


def test_layer_parameters_are_saved_under_mxnets_keys(tmp_path):
    net = rnn.LSTM(3, bidirectional=True, input_size=2)
    net.initialize()
    net.save_parameters(str(tmp_path / "p"))
    keys = set(nd.load(str(tmp_path / "p")))
    assert "_unfused.0.l_cell.i2h_weight" in keys and "_unfused.0.r_cell.h2h_bias" in keys
    again = rnn.LSTM(3, bidirectional=True, input_size=2)
    again.load_parameters(str(tmp_path / "p"))
    np.testing.assert_array_equal(again.l0_i2h_weight.data().asnumpy(),
                                  net.l0_i2h_weight.data().asnumpy())


def test_unrolled_cell_names_and_shapes_follow_mxnet():
    cell = rnn.LSTMCell(7, prefix="rnn_")
    outputs, states = cell.unroll(3, [sym.var(f"rnn_t{i}_data") for i in range(3)])
    group = sym.Group(outputs)
    assert group.list_outputs() == [f"rnn_t{i}_out_output" for i in range(3)]
    assert sorted(cell.collect_params()) == ["rnn_h2h_bias", "rnn_h2h_weight", "rnn_i2h_bias",
                                             "rnn_i2h_weight"]
    _, shapes, _ = group.infer_shape(**{f"rnn_t{i}_data": (4, 5) for i in range(3)})
    assert shapes == [(4, 7)] * 3


def test_a_hybridized_cell_takes_its_states_as_a_list():
    """A cell's step is ``cell(x, [h, c])``: hybridized, the nested list is fed flat to
    the compiled program and the ``(output, [h, c])`` result comes back nested."""
    cell = rnn.LSTMCell(4, input_size=3)
    cell.initialize()
    x = nd.array(np.random.default_rng(1).normal(size=(2, 3)))
    states = cell.begin_state(batch_size=2)
    expected_out, expected_states = cell(x, states)
    cell.hybridize()
    out, new_states = cell(x, states)
    assert isinstance(new_states, list) and len(new_states) == 2
    np.testing.assert_allclose(out.asnumpy(), expected_out.asnumpy(), rtol=1e-6)
    np.testing.assert_allclose(new_states[1].asnumpy(), expected_states[1].asnumpy(), rtol=1e-6)
    with pytest.raises(mx.errors.BlockInputError, match=r"nested as \[None, \[None, None\]\]"):
        cell(x, states[:1])


@pytest.mark.parametrize("make", [lambda: rnn.GRUCell(4),
                                  lambda: rnn.BidirectionalCell(rnn.LSTMCell(4), rnn.LSTMCell(4))])
def test_valid_length_ends_each_sequence_early(make):
    cell = make()
    cell.initialize()
    x = nd.array(np.random.default_rng(2).normal(size=(2, 5, 3)))
    outs, states = cell.unroll(5, x, valid_length=nd.array([2, 5]), merge_outputs=True)
    short, short_states = cell.unroll(2, x[0:1, :2], merge_outputs=True)
    np.testing.assert_allclose(outs.asnumpy()[0:1, :2], short.asnumpy(), rtol=1e-5, atol=1e-6)
    assert not outs.asnumpy()[0, 2:].any()
    for state, alone in zip(states, short_states):
        np.testing.assert_allclose(state.asnumpy()[0:1], alone.asnumpy(), rtol=1e-5, atol=1e-6)


def test_residual_and_zoneout_cells_wrap_a_cell():
    residual = rnn.ResidualCell(rnn.GRUCell(3, input_size=3))
    residual.initialize(mx.init.Zero())
    x = nd.ones((2, 4, 3))
    outs, _ = residual.unroll(4, x, merge_outputs=True)
    np.testing.assert_array_equal(outs.asnumpy(), x.asnumpy())  # zero weights: the input
    base = rnn.RNNCell(3, input_size=3)
    zoneout = rnn.ZoneoutCell(base, zoneout_outputs=0.5, zoneout_states=0.5)
    zoneout.initialize()
    predicted, _ = zoneout.unroll(4, x, merge_outputs=True)  # predicting: no zoneout
    with pytest.raises(RuntimeError, match="wrapped by a modifier cell"):
        base.begin_state(batch_size=2)
    base._modified = False
    np.testing.assert_allclose(predicted.asnumpy(), base.unroll(4, x, merge_outputs=True)[0]
                               .asnumpy(), rtol=1e-6)


def test_lstm_bias_initializer_opens_the_forget_gate():
    cell = rnn.LSTMCell(3, input_size=2, i2h_bias_initializer=mx.init.LSTMBias(2.0))
    cell.initialize()
    np.testing.assert_array_equal(cell.i2h_bias.data().asnumpy(), [0] * 3 + [2] * 3 + [0] * 6)
