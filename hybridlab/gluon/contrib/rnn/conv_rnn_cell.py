"""Convolutional recurrent cells (MXNet's ``gluon.contrib.rnn``; Shi et al., ConvLSTM).

A convolutional cell is an RNN, LSTM or GRU cell whose two products -- of the input, and
of the previous state -- are convolutions instead of dense layers: the state is an image
(channels x width [x height [x depth]]) and each step mixes every pixel with its
neighbours. ``input_shape`` is one step's sample shape without the batch (``(C, W)`` for
1-D in 'NCW'); the state keeps the input's spatial size less what the input convolution
trims (``i2h_kernel``, ``i2h_pad``, ``i2h_dilate``), because the recurrent convolution is
padded to keep it (so ``h2h_kernel`` must be odd). Gates are stacked along the channel axis.
"""

from __future__ import annotations

from typing import Any

from hybridlab.gluon.rnn.rnn_cell import HybridRecurrentCell, _shape

_LAYOUTS = {1: "NCW", 2: "NCHW", 3: "NCDHW"}


def _per_axis(value: Any, dims: int, what: str) -> tuple[int, ...]:
    spec = (value,) * dims if isinstance(value, int) else tuple(value)
    if len(spec) != dims:
        raise ValueError(f"{dims}-D convolutional cell: {what} must be an int or {dims} ints, "
                         f"got {value!r}")
    return spec


class _ConvCell(HybridRecurrentCell):
    """What the convolutional RNN, LSTM and GRU cells share: shapes and the two products."""

    gates = 1
    dims = 1

    def __init__(self, input_shape: tuple, hidden_channels: int, i2h_kernel: Any,
                 h2h_kernel: Any, i2h_pad: Any = 0, i2h_dilate: Any = 1, h2h_dilate: Any = 1,
                 i2h_weight_initializer: Any = None, h2h_weight_initializer: Any = None,
                 i2h_bias_initializer: Any = "zeros", h2h_bias_initializer: Any = "zeros",
                 conv_layout: str | None = None, activation: Any = "tanh",
                 prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix=prefix, params=params)
        dims = self.dims
        self._layout = conv_layout or _LAYOUTS[dims]
        if self._layout != _LAYOUTS[dims]:
            raise ValueError(f"{type(self).__name__}: conv_layout={conv_layout!r}; hybridlab's "
                             f"convolution is channel-first: use {_LAYOUTS[dims]!r}")
        self._hidden, self._activation = hidden_channels, activation
        self._i2h_kernel = _per_axis(i2h_kernel, dims, "i2h_kernel")
        self._i2h_pad = _per_axis(i2h_pad, dims, "i2h_pad")
        self._i2h_dilate = _per_axis(i2h_dilate, dims, "i2h_dilate")
        self._h2h_kernel = _per_axis(h2h_kernel, dims, "h2h_kernel")
        self._h2h_dilate = _per_axis(h2h_dilate, dims, "h2h_dilate")
        if any(k % 2 == 0 for k in self._h2h_kernel):
            raise ValueError(f"{type(self).__name__}: h2h_kernel {h2h_kernel} must be odd (the "
                             f"recurrent convolution is padded to keep the state's size)")
        self._h2h_pad = tuple(d * (k - 1) // 2 for d, k in zip(self._h2h_dilate, self._h2h_kernel))
        in_channels, *space = input_shape
        self._state_shape = (hidden_channels, *[
            x + 2 * p - d * (k - 1) if x else 0 for x, k, p, d in
            zip(space, self._i2h_kernel, self._i2h_pad, self._i2h_dilate)])
        rows = hidden_channels * self.gates
        self.i2h_weight = self.params.get("i2h_weight", shape=(rows, in_channels,
                                                               *self._i2h_kernel),
                                          init=i2h_weight_initializer, allow_deferred_init=True)
        self.h2h_weight = self.params.get("h2h_weight", shape=(rows, hidden_channels,
                                                               *self._h2h_kernel),
                                          init=h2h_weight_initializer, allow_deferred_init=True)
        self.i2h_bias = self.params.get("i2h_bias", shape=(rows,), init=i2h_bias_initializer,
                                        allow_deferred_init=True)
        self.h2h_bias = self.params.get("h2h_bias", shape=(rows,), init=h2h_bias_initializer,
                                        allow_deferred_init=True)

    def state_info(self, batch_size: int = 0) -> list[dict]:
        return [{"shape": (batch_size, *self._state_shape), "__layout__": self._layout}]

    def infer_shape(self, inputs: Any, *args: Any) -> None:
        shape = tuple(self.i2h_weight.shape or ())
        self.i2h_weight.shape = (shape[0], _shape(inputs)[1], *shape[2:])

    def __repr__(self) -> str:
        shape = self.i2h_weight.shape or (0, 0)
        return (f"{type(self).__name__}({shape[1] or None} -> {shape[0]}, {self._activation}, "
                f"{self._layout})")

    def _products(self, F: Any, x: Any, state: Any, i2h_weight: Any, h2h_weight: Any,
                  i2h_bias: Any, h2h_bias: Any) -> tuple[Any, Any, str]:
        prefix = f"t{self._counter}_"
        rows = self._hidden * self.gates
        i2h = F.Convolution(x, i2h_weight, i2h_bias, num_filter=rows, kernel=self._i2h_kernel,
                            pad=self._i2h_pad, dilate=self._i2h_dilate, name=prefix + "i2h")
        h2h = F.Convolution(state, h2h_weight, h2h_bias, num_filter=rows,
                            kernel=self._h2h_kernel, pad=self._h2h_pad,
                            dilate=self._h2h_dilate, name=prefix + "h2h")
        return i2h, h2h, prefix


class _ConvRNN(_ConvCell):
    def _alias(self) -> str:
        return "conv_rnn"

    def hybrid_forward(self, F: Any, x: Any, states: Any, **params: Any) -> Any:
        i2h, h2h, prefix = self._products(F, x, states[0], **params)
        output = self._get_activation(F, i2h + h2h, self._activation, name=prefix + "out")
        return output, [output]


class _ConvLSTM(_ConvCell):
    gates = 4

    def _alias(self) -> str:
        return "conv_lstm"

    def state_info(self, batch_size: int = 0) -> list[dict]:
        return super().state_info(batch_size) * 2  # h and c

    def hybrid_forward(self, F: Any, x: Any, states: Any, **params: Any) -> Any:
        i2h, h2h, prefix = self._products(F, x, states[0], **params)
        gates = F.SliceChannel(i2h + h2h, num_outputs=4, axis=1, name=prefix + "slice")
        in_gate = F.Activation(gates[0], act_type="sigmoid", name=prefix + "i")
        forget_gate = F.Activation(gates[1], act_type="sigmoid", name=prefix + "f")
        candidate = self._get_activation(F, gates[2], self._activation, name=prefix + "c")
        out_gate = F.Activation(gates[3], act_type="sigmoid", name=prefix + "o")
        next_c = F.elemwise_add(forget_gate * states[1], in_gate * candidate,
                                name=prefix + "state")
        next_h = F.elemwise_mul(out_gate, self._get_activation(F, next_c, self._activation),
                                name=prefix + "out")
        return next_h, [next_h, next_c]


class _ConvGRU(_ConvCell):
    gates = 3

    def _alias(self) -> str:
        return "conv_gru"

    def hybrid_forward(self, F: Any, x: Any, states: Any, **params: Any) -> Any:
        i2h, h2h, prefix = self._products(F, x, states[0], **params)
        i2h_r, i2h_z, i2h_n = F.SliceChannel(i2h, num_outputs=3, axis=1, name=prefix + "i2h_slice")
        h2h_r, h2h_z, h2h_n = F.SliceChannel(h2h, num_outputs=3, axis=1, name=prefix + "h2h_slice")
        reset = F.Activation(i2h_r + h2h_r, act_type="sigmoid", name=prefix + "r_act")
        update = F.Activation(i2h_z + h2h_z, act_type="sigmoid", name=prefix + "z_act")
        new = self._get_activation(F, i2h_n + reset * h2h_n, self._activation,
                                   name=prefix + "h_act")
        next_h = F.elemwise_add((1.0 - update) * new, update * states[0], name=prefix + "out")
        return next_h, [next_h]


def _variant(base: type, dims: int, name: str) -> type:
    """``Conv<dims>D<kind>Cell``: ``base`` with ``dims`` spatial axes."""
    return type(name, (base,), {"dims": dims, "__doc__": f"{dims}-D {base.__name__[5:]} cell "
                                f"(layout {_LAYOUTS[dims]}): see the module docstring."})


Conv1DRNNCell = _variant(_ConvRNN, 1, "Conv1DRNNCell")
Conv2DRNNCell = _variant(_ConvRNN, 2, "Conv2DRNNCell")
Conv3DRNNCell = _variant(_ConvRNN, 3, "Conv3DRNNCell")
Conv1DLSTMCell = _variant(_ConvLSTM, 1, "Conv1DLSTMCell")
Conv2DLSTMCell = _variant(_ConvLSTM, 2, "Conv2DLSTMCell")
Conv3DLSTMCell = _variant(_ConvLSTM, 3, "Conv3DLSTMCell")
Conv1DGRUCell = _variant(_ConvGRU, 1, "Conv1DGRUCell")
Conv2DGRUCell = _variant(_ConvGRU, 2, "Conv2DGRUCell")
Conv3DGRUCell = _variant(_ConvGRU, 3, "Conv3DGRUCell")
