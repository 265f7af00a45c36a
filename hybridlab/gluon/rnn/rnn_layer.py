"""Recurrent layers: ``RNN``, ``LSTM`` and ``GRU`` over a whole sequence, fused.

What this module teaches
------------------------
A layer is the stacked cells of ``rnn_cell.py`` -- ``num_layers`` of them, each layer
reading the previous one's outputs, and with ``bidirectional=True`` a second cell per
layer reading the sequence backwards -- computed by **one** operator, MXNet's fused
``RNN`` (hybridlab/ops/rnn.py). ``hybrid_forward`` concatenates every weight into the
flat vector ``RNN`` reads (``_rnn_param_concat``, MXNet's packed order) and calls it, so
a hybridized ``LSTM`` is a graph of two nodes whatever its length and depth, and an
exported one is MXNet's graph.

The parameters keep the cells' names and shapes, one set per layer and direction:
``l0_i2h_weight`` (left to right, layer 0), ``r0_h2h_bias`` (right to left) ..., so
``_unfuse()`` gives the equivalent stack of cells sharing them, and the fused layer and
the unrolled cells compute the same outputs and gradients (tests/gluon/test_rnn_layers.py).

Calling convention (MXNet's): ``layer(x)`` returns the outputs only, starting from zero
states; ``layer(x, states)`` returns ``(outputs, new states)``. States are
``(layers * directions, N, hidden)`` arrays -- one for RNN and GRU, ``[h, c]`` for LSTM.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from hybridlab import ndarray, symbol
from hybridlab.gluon.block import HybridBlock
from hybridlab.gluon.rnn import rnn_cell
from hybridlab.ops.rnn import GATES

_sym: Any = symbol  # (its operators are generated from the registry: mypy cannot see them)
_KEY = re.compile(r"(l|r)(\d+)_(i2h|h2h|h2r)_(weight|bias)\Z")


class _RNNLayer(HybridBlock):
    """The shared machinery of RNN, LSTM and GRU."""

    def __init__(self, hidden_size: int, num_layers: int, layout: str, dropout: float,
                 bidirectional: bool, input_size: int, i2h_weight_initializer: Any,
                 h2h_weight_initializer: Any, i2h_bias_initializer: Any,
                 h2h_bias_initializer: Any, mode: str, projection_size: int | None = None,
                 h2r_weight_initializer: Any = None, lstm_state_clip_min: Any = None,
                 lstm_state_clip_max: Any = None, lstm_state_clip_nan: bool = False,
                 dtype: Any = "float32", use_sequence_length: bool = False,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if layout not in ("TNC", "NTC"):
            raise ValueError(f"{type(self).__name__}: layout={layout!r}; use 'TNC' (time, "
                             f"batch, features) or 'NTC' (batch first)")
        self._hidden_size, self._num_layers, self._mode = hidden_size, num_layers, mode
        self._layout, self._dropout, self._dir = layout, dropout, 2 if bidirectional else 1
        self._input_size, self._dtype = input_size, dtype
        self._projection_size = projection_size or None
        self._clip = (lstm_state_clip_min, lstm_state_clip_max, lstm_state_clip_nan)
        self._use_sequence_length = use_sequence_length
        self._inits = (i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                       h2h_bias_initializer, h2r_weight_initializer)
        self.skip_states: bool | None = None
        self._register_params()

    def _register_params(self) -> None:
        rows, hidden = GATES[self._mode] * self._hidden_size, self._projection_size or \
            self._hidden_size
        i2h_w, h2h_w, i2h_b, h2h_b, h2r_w = self._inits
        width = self._input_size
        for layer in range(self._num_layers):
            for d in "lr"[:self._dir]:
                self._param(f"{d}{layer}_i2h_weight", (rows, width), i2h_w)
                self._param(f"{d}{layer}_h2h_weight", (rows, hidden), h2h_w)
                self._param(f"{d}{layer}_i2h_bias", (rows,), i2h_b)
                self._param(f"{d}{layer}_h2h_bias", (rows,), h2h_b)
                if self._projection_size:
                    self._param(f"{d}{layer}_h2r_weight", (hidden, self._hidden_size), h2r_w)
            width = hidden * self._dir

    def _param(self, name: str, shape: tuple, init: Any) -> None:
        setattr(self, name, self.params.get(name, shape=shape, init=init,
                                            allow_deferred_init=True, dtype=self._dtype))

    def __repr__(self) -> str:
        shape = self.l0_i2h_weight.shape  # type: ignore[attr-defined]
        text = f"{type(self).__name__}({shape[1] or None} -> {self._hidden_size}, {self._layout}"
        if self._num_layers != 1:
            text += f", num_layers={self._num_layers}"
        if self._dropout != 0:
            text += f", dropout={self._dropout}"
        return text + (", bidirectional)" if self._dir == 2 else ")")

    def _params_by_path(self, path: str = "") -> dict:
        """Saved under MXNet 1.9.1's keys for these layers (``_unfused.0.l_cell.i2h_weight``
        bidirectional, ``_unfused.0.i2h_weight`` not), so files load both ways."""
        found = {}
        for key, param in self._reg_params.items():
            side, layer, which, kind = _KEY.match(key).groups()  # type: ignore[union-attr]
            cell = f"{side}_cell." if self._dir == 2 else ""
            found[f"{path}_unfused.{layer}.{cell}{which}_{kind}"] = param
        return found

    def state_info(self, batch_size: int = 0) -> list[dict]:
        raise NotImplementedError

    def infer_shape(self, inputs: Any, *args: Any) -> None:
        shape = inputs.shape if isinstance(inputs, ndarray.NDArray) else inputs._static_shape()
        for d in "lr"[:self._dir]:
            weight = getattr(self, f"{d}0_i2h_weight")
            weight.shape = (weight.shape[0], shape[2])

    def cast(self, dtype: Any) -> None:
        super().cast(dtype)
        self._dtype = dtype

    def begin_state(self, batch_size: int = 0, func: Callable[..., Any] | None = None,
                    **kwargs: Any) -> list:
        """Zeros of ``(layers * directions, batch_size, hidden)`` per state, or what
        ``func(name=..., shape=..., dtype=...)`` makes (``sym.var`` for a graph input)."""
        func = ndarray.zeros if func is None else func
        states = []
        for i, info in enumerate(self.state_info(batch_size)):
            spec = {k: v for k, v in info.items() if k != "__layout__"}
            spec.update(kwargs)
            states.append(func(name=f"{self.prefix}h0_{i}", **spec))
        return states

    def __call__(self, inputs: Any, states: Any = None, sequence_length: Any = None) -> Any:
        self.skip_states = states is None
        if states is None:
            states = self._zero_states(inputs)
        if isinstance(states, (ndarray.NDArray, symbol.Symbol)):
            states = [states]
        args = (inputs, states) + ((sequence_length,) if self._use_sequence_length else ())
        out, new_states = super().__call__(*args)
        return out if self.skip_states else (out, new_states)

    def _zero_states(self, inputs: Any) -> list:
        batch_axis = self._layout.find("N")
        if isinstance(inputs, ndarray.NDArray):
            return self.begin_state(inputs.shape[batch_axis], ctx=inputs.context,
                                    dtype=inputs.dtype)
        try:
            batch = inputs._static_shape()[batch_axis]
        except Exception:  # (no shape yet: the state is made from the data, see rnn_cell)
            time_first = inputs if self._layout == "TNC" else _sym.swapaxes(inputs, 0, 1)
            step = _sym.reshape(_sym.slice_axis(time_first, axis=0, begin=0, end=1),
                                shape=(-3, -2))
            return self.begin_state(0, func=_stacked_zeros(rnn_cell._zeros_like_batch(step)))
        return self.begin_state(batch, func=_sym.zeros)

    def hybrid_forward(self, F: Any, x: Any, states: Any, sequence_length: Any = None,
                       **params: Any) -> Any:
        """Always the outputs and the states (``__call__`` drops the states when none were
        given), so one compiled program serves both calling conventions."""
        if F is ndarray:
            self._check_states(x, states)
        if self._layout == "NTC":
            x = F.swapaxes(x, dim1=0, dim2=1)
        order = ("i2h", "h2h", "h2r") if self._projection_size else ("i2h", "h2h")
        flat = [params[f"{d}{layer}_{g}_{t}"].reshape((-1,))
                for t in ("weight", "bias") for layer in range(self._num_layers)
                for d in "lr"[:self._dir] for g in order if not (g == "h2r" and t == "bias")]
        packed = F._rnn_param_concat(*flat, dim=0)
        extra = [sequence_length] if self._use_sequence_length else []
        low, high, nan = self._clip
        result = F.RNN(x, packed, *states, *extra, state_size=self._hidden_size,
                       projection_size=self._projection_size, num_layers=self._num_layers,
                       bidirectional=self._dir == 2, p=self._dropout, state_outputs=True,
                       mode=self._mode, lstm_state_clip_min=low, lstm_state_clip_max=high,
                       lstm_state_clip_nan=nan, use_sequence_length=self._use_sequence_length)
        outputs, new_states = result[0], [result[i] for i in range(1, len(states) + 1)]
        if self._layout == "NTC":
            outputs = F.swapaxes(outputs, dim1=0, dim2=1)
        return outputs, new_states

    def _check_states(self, inputs: Any, states: list) -> None:
        batch = inputs.shape[self._layout.find("N")]
        for state, info in zip(states, self.state_info(batch)):
            if state.shape != info["shape"]:
                raise ValueError(f"{type(self).__name__}: a recurrent state has shape "
                                 f"{state.shape}, expected {info['shape']} (layers * "
                                 f"directions, batch, hidden)")

    def _unfuse(self) -> rnn_cell.HybridSequentialRNNCell:
        """The same layer as a stack of cells sharing these parameters."""
        if self._projection_size or self._clip[0] is not None or self._clip[1] is not None:
            raise ValueError("_unfuse: a projection or state clipping has no cell here")
        stack = rnn_cell.HybridSequentialRNNCell(prefix=self.prefix, params=self.params)
        with stack.name_scope():
            width = self._input_size
            for layer in range(self._num_layers):
                made = [self._cell(f"{d}{layer}_", width) for d in "lr"[:self._dir]]
                stack.add(made[0] if len(made) == 1 else rnn_cell.BidirectionalCell(made[0],
                                                                                    made[1]))
                if self._dropout > 0 and layer != self._num_layers - 1:
                    stack.add(rnn_cell.DropoutCell(self._dropout))
                width = self._hidden_size * self._dir
        return stack

    def _cell(self, prefix: str, width: int) -> rnn_cell.HybridRecurrentCell:
        i2h_w, h2h_w, i2h_b, h2h_b, _ = self._inits
        kwargs = {"input_size": width, "i2h_weight_initializer": i2h_w,
                  "h2h_weight_initializer": h2h_w, "i2h_bias_initializer": i2h_b,
                  "h2h_bias_initializer": h2h_b, "prefix": prefix}
        if self._mode == "lstm":
            return rnn_cell.LSTMCell(self._hidden_size, **kwargs)
        if self._mode == "gru":
            return rnn_cell.GRUCell(self._hidden_size, **kwargs)
        return rnn_cell.RNNCell(self._hidden_size, activation=self._mode[4:], **kwargs)


def _stacked_zeros(make_rows: Callable[..., Any]) -> Callable[..., Any]:
    """``begin_state``'s ``func`` for a layer's ``(stack, N, H)`` states when N is known
    only from the data: zeros ``(N, H)`` from a step of it, repeated ``stack`` times."""
    def make(name: str, shape: tuple, **unused: Any) -> Any:
        rows = make_rows(name=f"{name}_row", shape=(0, shape[2]))
        return _sym.broadcast_axis(_sym.expand_dims(rows, axis=0), axis=0, size=shape[0],
                                   name=name)

    return make


class RNN(_RNNLayer):
    """Elman layers, ``h = activation(x @ W_i2h.T + b_i2h + h @ W_h2h.T + b_h2h)`` with
    ``activation`` 'relu' (MXNet's default) or 'tanh'."""

    def __init__(self, hidden_size: int, num_layers: int = 1, activation: str = "relu",
                 layout: str = "TNC", dropout: float = 0, bidirectional: bool = False,
                 i2h_weight_initializer: Any = None, h2h_weight_initializer: Any = None,
                 i2h_bias_initializer: Any = "zeros", h2h_bias_initializer: Any = "zeros",
                 input_size: int = 0, dtype: Any = "float32", **kwargs: Any) -> None:
        if activation not in ("relu", "tanh"):
            raise ValueError(f"RNN: activation={activation!r}; use 'relu' or 'tanh'")
        super().__init__(hidden_size, num_layers, layout, dropout, bidirectional, input_size,
                         i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, "rnn_" + activation, dtype=dtype, **kwargs)

    def state_info(self, batch_size: int = 0) -> list[dict]:
        shape = (self._num_layers * self._dir, batch_size, self._hidden_size)
        return [{"shape": shape, "__layout__": "LNC", "dtype": self._dtype}]


class LSTM(_RNNLayer):
    """Long short-term memory layers; ``projection_size`` gives LSTMP (Sak et al.): the
    state ``h`` projected to that size by ``h2r_weight``."""

    def __init__(self, hidden_size: int, num_layers: int = 1, layout: str = "TNC",
                 dropout: float = 0, bidirectional: bool = False, input_size: int = 0,
                 i2h_weight_initializer: Any = None, h2h_weight_initializer: Any = None,
                 i2h_bias_initializer: Any = "zeros", h2h_bias_initializer: Any = "zeros",
                 projection_size: int | None = None, h2r_weight_initializer: Any = None,
                 state_clip_min: Any = None, state_clip_max: Any = None,
                 state_clip_nan: bool = False, dtype: Any = "float32",
                 **kwargs: Any) -> None:
        super().__init__(hidden_size, num_layers, layout, dropout, bidirectional, input_size,
                         i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, "lstm", projection_size, h2r_weight_initializer,
                         state_clip_min, state_clip_max, state_clip_nan, dtype, **kwargs)

    def state_info(self, batch_size: int = 0) -> list[dict]:
        stack = self._num_layers * self._dir
        hidden = self._projection_size or self._hidden_size
        return [{"shape": (stack, batch_size, hidden), "__layout__": "LNC",
                 "dtype": self._dtype},
                {"shape": (stack, batch_size, self._hidden_size), "__layout__": "LNC",
                 "dtype": self._dtype}]


class GRU(_RNNLayer):
    """Gated recurrent unit layers (MXNet's GRU: the reset gate multiplies ``h @ W_n.T +
    b_n``, as cuDNN computes it)."""

    def __init__(self, hidden_size: int, num_layers: int = 1, layout: str = "TNC",
                 dropout: float = 0, bidirectional: bool = False, input_size: int = 0,
                 i2h_weight_initializer: Any = None, h2h_weight_initializer: Any = None,
                 i2h_bias_initializer: Any = "zeros", h2h_bias_initializer: Any = "zeros",
                 dtype: Any = "float32", **kwargs: Any) -> None:
        super().__init__(hidden_size, num_layers, layout, dropout, bidirectional, input_size,
                         i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, "gru", dtype=dtype, **kwargs)

    def state_info(self, batch_size: int = 0) -> list[dict]:
        shape = (self._num_layers * self._dir, batch_size, self._hidden_size)
        return [{"shape": shape, "__layout__": "LNC", "dtype": self._dtype}]
