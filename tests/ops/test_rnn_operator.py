"""The fused ``RNN`` operator against real MXNet 1.9.1, and its compiled form.

The fixtures (tests/fixtures/mxnet/rnn/*.npz) are ``mx.nd.RNN``'s outputs, final states and
input gradients on random packed parameters, written by ``tools/mxnet_fixtures.py
mxnet-rnn`` in a virtualenv with MXNet 1.9.1: matching them checks the packed layout, the
gate order of each mode and the backward, all at once.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import hybridlab as mx
from hybridlab import autograd, nd, sym
from hybridlab.errors import ShapeError
from hybridlab.ops.rnn import packed_layout

FIXTURES = pathlib.Path(__file__).parent.parent / "fixtures" / "mxnet" / "rnn"
CASES = sorted(p.stem for p in FIXTURES.glob("*.npz"))


def _case(name: str) -> tuple[dict, dict, np.lib.npyio.NpzFile]:
    saved = np.load(FIXTURES / f"{name}.npz")
    names = [k[3:] for k in saved.files if k.startswith("in_")]
    return {k: saved[f"in_{k}"] for k in names}, json.loads(str(saved["attrs"])), saved


def test_the_fixtures_cover_every_mode():
    assert {"lstm", "gru", "rnn_tanh", "rnn_relu", "lstmp"} <= set(CASES)


@pytest.mark.parametrize("name", CASES)
def test_rnn_matches_mxnet_outputs_and_gradients(name):
    arrays, attrs, saved = _case(name)
    inputs = {k: nd.array(v) for k, v in arrays.items()}
    for value in inputs.values():
        value.attach_grad()
    with autograd.record():
        outs = nd.RNN(**inputs, state_size=6, state_outputs=True, **attrs)
    for i, out in enumerate(outs):
        np.testing.assert_allclose(out.asnumpy(), saved[f"out_{i}"], rtol=1e-5, atol=1e-6)
    if "head_0" not in saved.files:  # MXNet has no CPU backward for LSTMP
        return
    autograd.backward(outs, [nd.array(saved[f"head_{i}"]) for i in range(len(outs))])
    for key, value in inputs.items():
        np.testing.assert_allclose(value.grad.asnumpy(), saved[f"grad_{key}"], rtol=1e-4,
                                   atol=1e-5, err_msg=f"{name}: gradient of {key}")


@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_rnn_compiled_is_one_node_and_agrees_with_nd(name):
    """``sym.RNN`` keeps one node (MXNet's graph); compiled, it is lowered to a layer op
    per layer and direction, and gives nd's values and gradients."""
    arrays, attrs, saved = _case(name)
    variables = [sym.var(k) for k in arrays]
    net = sym.RNN(*variables, state_size=6, state_outputs=True, name="rnn", **attrs)
    assert [n["op"] for n in json.loads(net.tojson())["nodes"] if n["op"] != "null"] == ["RNN"]
    executor = net.bind(mx.cpu(), args={k: nd.array(v) for k, v in arrays.items()},
                        args_grad={k: nd.zeros(v.shape) for k, v in arrays.items()})
    outs = executor.forward(is_train=True)
    for i, out in enumerate(outs):
        np.testing.assert_allclose(out.asnumpy(), saved[f"out_{i}"], rtol=1e-5, atol=1e-6)
    executor.backward([nd.array(saved[f"head_{i}"]) for i in range(len(outs))])
    for key in arrays:
        np.testing.assert_allclose(executor.grad_dict[key].asnumpy(), saved[f"grad_{key}"],
                                   rtol=1e-4, atol=1e-5)


def test_infer_shape_sizes_the_packed_parameters_and_states():
    net = sym.RNN(sym.var("data"), state_size=6, num_layers=2, bidirectional=True,
                  mode="lstm", state_outputs=True, name="rnn")
    args, outs, _ = net.infer_shape(data=(4, 3, 5))
    sizes = dict(zip(net.list_arguments(), args))
    layout = packed_layout(5, {"mode": "lstm", "state_size": 6, "num_layers": 2,
                               "bidirectional": True, "projection_size": None})
    assert sizes["rnn_parameters"] == (layout[-1][1] + layout[-1][2][0],)
    assert sizes["rnn_state"] == sizes["rnn_state_cell"] == (4, 3, 6)
    assert outs == [(4, 3, 12), (4, 3, 6), (4, 3, 6)]


def test_packed_layout_puts_every_weight_before_every_bias():
    layout = packed_layout(5, {"mode": "gru", "state_size": 2, "num_layers": 2,
                               "bidirectional": True, "projection_size": None})
    names = [name for name, _, _ in layout]
    assert names[:4] == ["l0_i2h_weight", "l0_h2h_weight", "r0_i2h_weight", "r0_h2h_weight"]
    assert all(n.endswith("weight") for n in names[:8]) and all(
        n.endswith("bias") for n in names[8:])
    assert layout[1][1] == 6 * 5 and layout[4][2] == (6, 4)  # layer 1 reads both directions


def test_sequence_length_stops_each_sample_at_its_end():
    """With ``use_sequence_length``, a sample's outputs past its length are zeros and its
    final state is that of its last valid step: the same as running it alone, shorter."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 2, 3)).astype(np.float32)
    attrs = {"state_size": 4, "num_layers": 1, "mode": "gru", "bidirectional": True,
             "state_outputs": True}
    size = packed_layout(3, {**attrs, "projection_size": None})[-1]
    params = nd.array(rng.normal(size=size[1] + size[2][0]) * 0.3)
    state = nd.zeros((2, 2, 4))
    out, h = nd.RNN(nd.array(x), params, state, nd.array([2, 5]), use_sequence_length=True,
                    **attrs)
    short_out, short_h = nd.RNN(nd.array(x[:2, :1]), params, nd.zeros((2, 1, 4)), **attrs)
    np.testing.assert_allclose(out.asnumpy()[:2, :1], short_out.asnumpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h.asnumpy()[:, :1], short_h.asnumpy(), rtol=1e-5, atol=1e-6)
    assert not out.asnumpy()[2:, 0].any()


def test_rnn_refuses_states_of_the_wrong_shape():
    with pytest.raises(ShapeError, match=r"parameters has shape \(444,\).*needs \(486,\)"):
        nd.RNN(nd.zeros((4, 3, 5)), nd.zeros((444,)), nd.zeros((2, 3, 6)), state_size=6,
               num_layers=2, mode="gru")
    with pytest.raises(ShapeError, match=r"RNN: state has shape \(1, 3, 6\).*needs \(2, 3, 6\)"):
        nd.RNN(nd.zeros((4, 3, 5)), nd.zeros((486,)), nd.zeros((1, 3, 6)), state_size=6,
               num_layers=2, mode="gru")
    with pytest.raises(ShapeError, match="layout TNC"):
        nd.RNN(nd.zeros((4, 5)), nd.zeros((1,)), nd.zeros((1, 4, 6)), state_size=6,
               num_layers=1, mode="gru")
