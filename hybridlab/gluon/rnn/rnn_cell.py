"""Recurrent cells: one time step of a recurrent network, and ``unroll`` over a sequence.

What this module teaches
------------------------
A cell is a block called as ``output, states = cell(x_t, states)``: it reads one time
step and the states the previous step left (an LSTM keeps two, ``h`` and ``c``) and
returns the new ones. ``cell.unroll(length, inputs)`` is a Python loop over the steps,
so a recurrent network is T copies of the cell's operators; traced (``hybridize()`` of a
block that unrolls), the graph grows with the sequence length -- one program per length,
which is why MXNet's bucketing (``mx.mod.BucketingModule``) groups sequences of similar
length. The fused layers (``rnn_layer.py``) run the same maths as one operator.

Sequences come in two layouts: ``'NTC'`` (batch, time, features) and ``'TNC'`` (time
first); ``inputs`` may be one array (split along the time axis) or a list of steps.
``merge_outputs=True`` stacks the step outputs into one array, ``False`` keeps a list,
``None`` keeps the inputs' form. ``valid_length`` (one count per sample) masks the steps
after a sample's end: its outputs there are zeros and its final states are those of its
last valid step.

Naming follows MXNet, because symbols and exported files show the names: a cell's
operators at step t are named ``<prefix>t<t>_<what>`` (``rnn_t0_out``); the begin states
are ``<prefix>begin_state_<n>``.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from hybridlab import ndarray, symbol
from hybridlab.gluon.block import Block, HybridBlock

Arrays = (ndarray.NDArray, symbol.Symbol)
_sym: Any = symbol  # (its operators are generated from the registry: mypy cannot see them)


def _as_list(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _split(F: Any, data: Any, axis: int, count: int) -> list:
    """``data`` cut into ``count`` steps along ``axis`` (that axis removed)."""
    if count == 1:  # (one output is one array, not a list of one)
        return [F.squeeze(data, axis=axis)]
    parts = F.split(data, num_outputs=count, axis=axis, squeeze_axis=True)
    return [parts[i] for i in range(count)]


def format_sequence(length: int | None, inputs: Any, layout: str, merge: bool | None,
                    in_layout: str | None = None) -> tuple[Any, int, Any, int]:
    """``inputs`` as a list of steps (``merge=False``), one array with time on
    ``layout``'s axis (``merge=True``), or as given (``None``); with the time axis, the
    namespace (``nd`` or ``sym``) and the batch size (0 when not known)."""
    if inputs is None:
        raise ValueError("unroll: inputs=None is no longer accepted (MXNet deprecated it); "
                         "make the input variables first, e.g. sym.var('data')")
    axis, batch_axis = layout.find("T"), layout.find("N")
    in_axis = in_layout.find("T") if in_layout is not None else axis
    F: Any = ndarray
    batch = 0
    if isinstance(inputs, symbol.Symbol):
        F = symbol
        if merge is False:
            if len(inputs.list_outputs()) != 1:
                raise ValueError("unroll does not take a grouped symbol: pass list(inputs), "
                                 "or one array to split")
            inputs = _split(F, inputs, in_axis, _length(length, inputs, in_axis))
    elif isinstance(inputs, ndarray.NDArray):
        batch = inputs.shape[batch_axis]
        if merge is False:
            if length is not None and length != inputs.shape[in_axis]:
                raise ValueError(f"unroll: length={length} but the inputs have "
                                 f"{inputs.shape[in_axis]} steps along axis {in_axis}")
            inputs = _split(F, inputs, in_axis, inputs.shape[in_axis])
    else:
        if length is not None and len(inputs) != length:
            raise ValueError(f"unroll: length={length} but {len(inputs)} steps were given")
        F = symbol if isinstance(inputs[0], symbol.Symbol) else ndarray
        batch = inputs[0].shape[0] if F is ndarray else 0
        if merge is True:
            inputs, in_axis = F.stack(*inputs, axis=axis), axis
    if isinstance(inputs, Arrays) and axis != in_axis:
        inputs = F.swapaxes(inputs, dim1=axis, dim2=in_axis)
    return inputs, axis, F, batch


def _length(length: int | None, inputs: Any, axis: int) -> int:
    if length is not None:
        return length
    return int(inputs._static_shape()[axis])  # (a traced input knows its shape)


def _begin_state(cell: RecurrentCell, F: Any, begin_state: Any, inputs: Any,
                 batch: int) -> list:
    """The states to start from: the given ones, else zeros (on the inputs' device)."""
    if begin_state is not None:
        return list(begin_state)
    if F is ndarray:
        first = inputs if isinstance(inputs, ndarray.NDArray) else inputs[0]
        return cell.begin_state(batch_size=batch, func=functools.partial(
            ndarray.zeros, ctx=first.context, dtype=first.dtype))
    first = inputs if isinstance(inputs, symbol.Symbol) else inputs[0]
    return cell.begin_state(batch_size=batch, func=_zeros_like_batch(first))


def _zeros_like_batch(first: Any) -> Callable[..., Any]:
    """A ``func`` for ``begin_state`` making zeros of ``(N, ...)`` from a step of the
    inputs, so a graph built before any shape is known sizes its states from the data
    when it is bound (MXNet gives ``sym.zeros`` a 0 for the unknown batch instead)."""
    try:
        batch = first._static_shape()[0]
    except Exception:  # (sym.var('data') without a shape: sized from the data later)
        batch = 0

    def make(name: str, shape: tuple, **unused: Any) -> Any:
        if batch:
            return _sym.zeros(shape=(batch, *shape[1:]), name=name)
        column = _sym.slice_axis(_sym.reshape(first, shape=(0, -1)), axis=1, begin=0, end=1)
        rest = tuple(shape[1:])  # (N, 1) zeros, then (N, 1, ...) spread to (N, *rest)
        zeros = _sym.reshape(_sym.zeros_like(column), shape=(0,) + (1,) * len(rest))
        return _sym.broadcast_axis(zeros, axis=tuple(range(1, 1 + len(rest))), size=rest,
                                   name=name)

    return make


def mask_sequence(F: Any, data: Any, length: int, valid_length: Any, axis: int,
                  merge: bool) -> Any:
    """Outputs past each sample's ``valid_length`` set to zero (steps in a list, or one
    array with time on ``axis``)."""
    if not isinstance(data, Arrays):
        data = F.stack(*data, axis=axis)
    masked = F.SequenceMask(data, valid_length, use_sequence_length=True, axis=axis)
    return masked if merge else _split(F, masked, axis, length)


def reverse_sequences(steps: list, length: int, valid_length: Any = None) -> list:
    """The steps in reverse order -- each sample's own valid steps reversed when
    ``valid_length`` is given (its padding stays at the end)."""
    if valid_length is None:
        return list(reversed(steps))
    F = symbol if isinstance(steps[0], symbol.Symbol) else ndarray
    flipped = F.SequenceReverse(F.stack(*steps, axis=0), valid_length,
                                use_sequence_length=True)
    return _split(F, flipped, 0, length)


class RecurrentCell(Block):
    """The base of every cell: ``state_info``, ``begin_state``, ``unroll``."""

    def __init__(self, prefix: str | None = None, params: Any = None) -> None:
        super().__init__(prefix=prefix, params=params)
        self._modified = False  # wrapped by a modifier cell: call that one instead
        self.reset()

    def reset(self) -> None:
        """Start counting steps (and begin states) from zero again: names ``t0_...``."""
        self._init_counter = -1
        self._counter = -1
        for cell in self._children.values():
            if isinstance(cell, RecurrentCell):
                cell.reset()

    def _cells(self) -> list[Any]:
        """The child cells, in order."""
        return list(self._children.values())

    def state_info(self, batch_size: int = 0) -> list[dict]:
        """One dict per state: its ``shape`` (and ``__layout__``)."""
        raise NotImplementedError(f"{type(self).__name__} must define state_info")

    def _check_unmodified(self) -> None:
        if self._modified:
            raise RuntimeError(f"{self.name!r} is wrapped by a modifier cell (ZoneoutCell, "
                               f"ResidualCell, ...): call that cell instead")

    def begin_state(self, batch_size: int = 0, func: Callable[..., Any] | None = None,
                    **kwargs: Any) -> list:
        """The first states: ``func(name=..., shape=...)`` for each (default ``nd.zeros``;
        ``sym.zeros`` or ``sym.var`` for a graph)."""
        self._check_unmodified()
        func = ndarray.zeros if func is None else func
        states = []
        for info in self.state_info(batch_size):
            self._init_counter += 1
            spec = {k: v for k, v in (info or {}).items() if k != "__layout__"}
            spec.update(kwargs)
            states.append(func(name=f"{self._prefix}begin_state_{self._init_counter}", **spec))
        return states

    def __call__(self, inputs: Any, states: Any) -> Any:
        self._counter += 1  # (names this step's operators t<counter>_...)
        return super().__call__(inputs, states)

    def unroll(self, length: int, inputs: Any, begin_state: Any = None, layout: str = "NTC",
               merge_outputs: bool | None = None, valid_length: Any = None) -> tuple[Any, list]:
        """Run the cell over ``length`` steps: ``(outputs, final states)``."""
        self.reset()
        steps, axis, F, batch = format_sequence(length, inputs, layout, False)
        states = _begin_state(self, F, begin_state, steps, batch)
        outputs, history = [], []
        for t in range(length):
            output, states = self(steps[t], states)
            outputs.append(output)
            history.append(states)
        if valid_length is not None:
            states = [F.SequenceLast(F.stack(*column, axis=0), valid_length,
                                     use_sequence_length=True, axis=0)
                      for column in zip(*history)]
            outputs = mask_sequence(F, outputs, length, valid_length, axis, True)
        outputs, _, _, _ = format_sequence(length, outputs, layout, merge_outputs)
        return outputs, states

    def _get_activation(self, F: Any, inputs: Any, activation: Any, **kwargs: Any) -> Any:
        """``activation`` by name (``'tanh'``), as a LeakyReLU block, or a function."""
        named = {"tanh": F.tanh, "relu": F.relu, "sigmoid": F.sigmoid, "softsign": F.softsign}
        if isinstance(activation, str):
            if activation in named:
                return named[activation](inputs, **kwargs)
            return F.Activation(inputs, act_type=activation, **kwargs)
        if hasattr(activation, "_alpha"):  # a LeakyReLU block
            return F.LeakyReLU(inputs, act_type="leaky", slope=activation._alpha, **kwargs)
        return activation(inputs, **kwargs)


class HybridRecurrentCell(RecurrentCell, HybridBlock):
    """A cell whose step is a ``hybrid_forward(F, inputs, states, **params)``."""

    def hybrid_forward(self, F: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define hybrid_forward")


class _GatedCell(HybridRecurrentCell):
    """What RNN, LSTM and GRU cells share: ``gates`` blocks of weights, i2h and h2h."""

    gates = 1

    def __init__(self, hidden_size: int, i2h_weight_initializer: Any = None,
                 h2h_weight_initializer: Any = None, i2h_bias_initializer: Any = "zeros",
                 h2h_bias_initializer: Any = "zeros", input_size: int = 0,
                 prefix: str | None = None, params: Any = None, *,
                 state_size: int | None = None) -> None:
        super().__init__(prefix=prefix, params=params)
        self._hidden_size, self._input_size = hidden_size, input_size
        rows = self.gates * hidden_size
        self.i2h_weight = self.params.get("i2h_weight", shape=(rows, input_size),
                                          init=i2h_weight_initializer, allow_deferred_init=True)
        # the state h2h reads: hidden_size wide, or a projection's size (LSTMP)
        self.h2h_weight = self.params.get("h2h_weight", shape=(rows, state_size or hidden_size),
                                          init=h2h_weight_initializer, allow_deferred_init=True)
        self.i2h_bias = self.params.get("i2h_bias", shape=(rows,), init=i2h_bias_initializer,
                                        allow_deferred_init=True)
        self.h2h_bias = self.params.get("h2h_bias", shape=(rows,), init=h2h_bias_initializer,
                                        allow_deferred_init=True)

    def state_info(self, batch_size: int = 0) -> list[dict]:
        return [{"shape": (batch_size, self._hidden_size), "__layout__": "NC"}]

    def infer_shape(self, inputs: Any, *args: Any) -> None:
        self.i2h_weight.shape = (self.gates * self._hidden_size, _shape(inputs)[-1])

    def __repr__(self) -> str:
        shape = self.i2h_weight.shape or (0, 0)
        return f"{type(self).__name__}({shape[1] or None} -> {shape[0]})"

    def _products(self, F: Any, inputs: Any, state: Any, i2h_weight: Any, h2h_weight: Any,
                  i2h_bias: Any, h2h_bias: Any) -> tuple[Any, Any, str]:
        """The input's and the state's contributions to the gates, and this step's prefix."""
        prefix = f"t{self._counter}_"
        rows = self.gates * self._hidden_size
        i2h = F.FullyConnected(inputs, i2h_weight, i2h_bias, num_hidden=rows, name=prefix + "i2h")
        h2h = F.FullyConnected(state, h2h_weight, h2h_bias, num_hidden=rows, name=prefix + "h2h")
        return i2h, h2h, prefix


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(x.shape) if isinstance(x, ndarray.NDArray) else tuple(x._static_shape())


class RNNCell(_GatedCell):
    """Elman cell: ``h = activation(x @ W_i2h.T + b_i2h + h @ W_h2h.T + b_h2h)``."""

    def __init__(self, hidden_size: int, activation: Any = "tanh", **kwargs: Any) -> None:
        super().__init__(hidden_size, **kwargs)
        self._activation = activation

    def _alias(self) -> str:
        return "rnn"

    def __repr__(self) -> str:
        return super().__repr__()[:-1] + f", {self._activation})"

    def hybrid_forward(self, F: Any, x: Any, states: Any, **params: Any) -> Any:
        i2h, h2h, prefix = self._products(F, x, states[0], **params)
        total = F.elemwise_add(i2h, h2h, name=prefix + "plus0")
        output = self._get_activation(F, total, self._activation, name=prefix + "out")
        return output, [output]


class LSTMCell(_GatedCell):
    """Long short-term memory: gates input, forget, candidate, output (MXNet's order)."""

    gates = 4

    def __init__(self, hidden_size: int, i2h_weight_initializer: Any = None,
                 h2h_weight_initializer: Any = None, i2h_bias_initializer: Any = "zeros",
                 h2h_bias_initializer: Any = "zeros", input_size: int = 0,
                 prefix: str | None = None, params: Any = None, activation: Any = "tanh",
                 recurrent_activation: Any = "sigmoid") -> None:
        super().__init__(hidden_size, i2h_weight_initializer, h2h_weight_initializer,
                         i2h_bias_initializer, h2h_bias_initializer, input_size, prefix, params)
        self._activation, self._recurrent_activation = activation, recurrent_activation

    def _alias(self) -> str:
        return "lstm"

    def state_info(self, batch_size: int = 0) -> list[dict]:
        return super().state_info(batch_size) * 2  # h and c

    def hybrid_forward(self, F: Any, x: Any, states: Any, **params: Any) -> Any:
        i2h, h2h, prefix = self._products(F, x, states[0], **params)
        gates = F.SliceChannel(F.elemwise_add(i2h, h2h, name=prefix + "plus0"), num_outputs=4,
                               name=prefix + "slice")
        act, gate = self._activation, self._recurrent_activation
        in_gate = self._get_activation(F, gates[0], gate, name=prefix + "i")
        forget_gate = self._get_activation(F, gates[1], gate, name=prefix + "f")
        candidate = self._get_activation(F, gates[2], act, name=prefix + "c")
        out_gate = self._get_activation(F, gates[3], gate, name=prefix + "o")
        next_c = F.elemwise_add(F.elemwise_mul(forget_gate, states[1], name=prefix + "mul0"),
                                F.elemwise_mul(in_gate, candidate, name=prefix + "mul1"),
                                name=prefix + "state")
        next_h = F.elemwise_mul(out_gate, self._get_activation(
            F, next_c, act, name=prefix + "activation0"), name=prefix + "out")
        return next_h, [next_h, next_c]


class GRUCell(_GatedCell):
    """Gated recurrent unit: reset and update gates; ``h = (1-z)*n + z*h``."""

    gates = 3

    def _alias(self) -> str:
        return "gru"

    def hybrid_forward(self, F: Any, x: Any, states: Any, **params: Any) -> Any:
        prev = states[0]
        i2h, h2h, prefix = self._products(F, x, prev, **params)
        i2h_r, i2h_z, i2h_n = F.SliceChannel(i2h, num_outputs=3, name=prefix + "i2h_slice")
        h2h_r, h2h_z, h2h_n = F.SliceChannel(h2h, num_outputs=3, name=prefix + "h2h_slice")
        reset = F.Activation(F.elemwise_add(i2h_r, h2h_r, name=prefix + "plus0"),
                             act_type="sigmoid", name=prefix + "r_act")
        update = F.Activation(F.elemwise_add(i2h_z, h2h_z, name=prefix + "plus1"),
                              act_type="sigmoid", name=prefix + "z_act")
        new = F.Activation(F.elemwise_add(i2h_n, F.elemwise_mul(reset, h2h_n, name=prefix + "mul0"),
                                          name=prefix + "plus2"), act_type="tanh",
                           name=prefix + "h_act")
        keep = F.elemwise_sub(F.ones_like(update, name=prefix + "ones_like0"), update,
                              name=prefix + "minus0")
        next_h = F.elemwise_add(F.elemwise_mul(keep, new, name=prefix + "mul1"),
                                F.elemwise_mul(update, prev, name=prefix + "mul20"),
                                name=prefix + "out")
        return next_h, [next_h]


def _children_state_info(cells: Any, batch_size: int) -> list:
    return sum((cell.state_info(batch_size) for cell in cells), [])


def _children_begin_state(cell: RecurrentCell, batch_size: int, func: Any,
                           kwargs: dict) -> list:
    cell._check_unmodified()
    return sum((c.begin_state(batch_size=batch_size, func=func, **kwargs)
                for c in cell._cells()), [])


class _Stacked(RecurrentCell):
    """What the sequential cells share: children run one after another, each on the
    previous one's outputs, each with its slice of the states."""

    def add(self, cell: Any) -> None:
        self.register_child(cell)

    def state_info(self, batch_size: int = 0) -> list[dict]:
        return _children_state_info(self._cells(), batch_size)

    def begin_state(self, batch_size: int = 0, func: Callable[..., Any] | None = None,
                    **kwargs: Any) -> list:
        return _children_begin_state(self, batch_size, func, kwargs)

    def _step(self, inputs: Any, states: Any) -> tuple[Any, list]:
        self._counter += 1
        done, next_states = 0, []
        for cell in self._cells():
            if isinstance(cell, BidirectionalCell):
                raise TypeError("a BidirectionalCell cannot be stepped: call unroll")
            count = len(cell.state_info())
            inputs, state = cell(inputs, states[done:done + count])
            done += count
            next_states += state
        return inputs, next_states

    def unroll(self, length: int, inputs: Any, begin_state: Any = None, layout: str = "NTC",
               merge_outputs: bool | None = None, valid_length: Any = None) -> tuple[Any, list]:
        self.reset()
        inputs, _, F, batch = format_sequence(length, inputs, layout, None)
        states = _begin_state(self, F, begin_state, inputs, batch)
        cells, done, final = self._cells(), 0, []
        for i, cell in enumerate(cells):
            count = len(cell.state_info())
            inputs, last = cell.unroll(length, inputs, states[done:done + count], layout,
                                       merge_outputs if i == len(cells) - 1 else None,
                                       valid_length)
            done += count
            final += last
        return inputs, final

    def __getitem__(self, index: int) -> Any:
        return self._children[str(index)]

    def __len__(self) -> int:
        return len(self._children)

    def __repr__(self) -> str:
        body = "\n".join(f"({key}): " + repr(cell).replace("\n", "\n  ")
                         for key, cell in self._children.items())
        return f"{type(self).__name__}(\n{body}\n)"


class SequentialRNNCell(_Stacked):
    """Cells stacked: each step runs them in order (a plain Block: cannot be hybridized
    as one; use HybridSequentialRNNCell inside a HybridBlock)."""

    def __call__(self, inputs: Any, states: Any) -> Any:
        return self._step(inputs, states)


class HybridSequentialRNNCell(_Stacked, HybridRecurrentCell):
    """Cells stacked, usable inside a HybridBlock."""

    def __call__(self, inputs: Any, states: Any) -> Any:
        return self._step(inputs, states)

    def hybrid_forward(self, F: Any, x: Any, states: Any) -> Any:
        return self._step(x, states)


class DropoutCell(HybridRecurrentCell):
    """Dropout on the step's inputs (``rate``); no states."""

    def __init__(self, rate: float, axes: tuple = (), prefix: str | None = None,
                 params: Any = None) -> None:
        super().__init__(prefix, params)
        if isinstance(rate, bool) or not isinstance(rate, (int, float)):
            raise TypeError(f"DropoutCell: rate must be a number, got {rate!r}")
        self._rate, self._axes = rate, axes

    def _alias(self) -> str:
        return "dropout"

    def __repr__(self) -> str:
        return f"DropoutCell(rate={self._rate}, axes={self._axes})"

    def state_info(self, batch_size: int = 0) -> list[dict]:
        return []

    def hybrid_forward(self, F: Any, x: Any, states: Any) -> Any:
        if self._rate > 0:
            x = F.Dropout(x, p=self._rate, axes=self._axes, name=f"t{self._counter}_fwd")
        return x, states

    def unroll(self, length: int, inputs: Any, begin_state: Any = None, layout: str = "NTC",
               merge_outputs: bool | None = None, valid_length: Any = None) -> tuple[Any, list]:
        self.reset()
        inputs, _, F, _ = format_sequence(length, inputs, layout, merge_outputs)
        if isinstance(inputs, Arrays):  # the whole sequence at once
            return self.hybrid_forward(F, inputs, begin_state or [])
        return super().unroll(length, inputs, begin_state, layout, merge_outputs)


class ModifierCell(HybridRecurrentCell):
    """A cell wrapped to change its step (zoneout, a residual connection); it shares the
    base cell's parameters, and the base cell is then called only through it."""

    def __init__(self, base_cell: HybridRecurrentCell) -> None:
        if base_cell._modified:
            raise ValueError(f"cell {base_cell.name!r} is already modified: a cell can be "
                             f"wrapped once")
        base_cell._modified = True
        super().__init__(prefix=base_cell.prefix + self._alias(), params=None)
        self.base_cell = base_cell

    @property
    def params(self) -> Any:
        return self.base_cell.params

    def state_info(self, batch_size: int = 0) -> list[dict]:
        return self.base_cell.state_info(batch_size)

    def begin_state(self, batch_size: int = 0, func: Callable[..., Any] | None = None,
                    **kwargs: Any) -> list:
        self._check_unmodified()
        self.base_cell._modified = False
        try:
            return self.base_cell.begin_state(batch_size=batch_size, func=func, **kwargs)
        finally:
            self.base_cell._modified = True

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_cell!r})"


class ZoneoutCell(ModifierCell):
    """Zoneout (Krueger et al.): while training, each output and state unit keeps its
    previous value with probability ``zoneout_outputs`` / ``zoneout_states``."""

    def __init__(self, base_cell: HybridRecurrentCell, zoneout_outputs: float = 0.0,
                 zoneout_states: float = 0.0) -> None:
        if isinstance(base_cell, BidirectionalCell):
            raise TypeError("ZoneoutCell cannot wrap a BidirectionalCell (it has no step); "
                            "wrap the cells inside it instead")
        super().__init__(base_cell)
        self.zoneout_outputs, self.zoneout_states = zoneout_outputs, zoneout_states
        self._prev_output: Any = None

    def _alias(self) -> str:
        return "zoneout"

    def __repr__(self) -> str:
        return (f"ZoneoutCell(p_out={self.zoneout_outputs}, p_state={self.zoneout_states}, "
                f"{self.base_cell!r})")

    def reset(self) -> None:
        super().reset()
        self._prev_output = None

    def hybrid_forward(self, F: Any, x: Any, states: Any) -> Any:
        output, new_states = self.base_cell(x, states)

        def keep_new(p: float, like: Any) -> Any:  # 1 where the new value is taken
            return F.Dropout(F.ones_like(like), p=p)

        previous = F.zeros_like(output) if self._prev_output is None else self._prev_output
        if self.zoneout_outputs:
            output = F.where(keep_new(self.zoneout_outputs, output), output, previous)
        if self.zoneout_states:
            new_states = [F.where(keep_new(self.zoneout_states, new), new, old)
                          for new, old in zip(new_states, states)]
        self._prev_output = output
        return output, new_states


class ResidualCell(ModifierCell):
    """The base cell's output plus its input (Wu et al., GNMT)."""

    def _alias(self) -> str:
        return "residual"

    def hybrid_forward(self, F: Any, x: Any, states: Any) -> Any:
        output, states = self.base_cell(x, states)
        return F.elemwise_add(output, x, name=f"t{self._counter}_fwd"), states

    def unroll(self, length: int, inputs: Any, begin_state: Any = None, layout: str = "NTC",
               merge_outputs: bool | None = None, valid_length: Any = None) -> tuple[Any, list]:
        self.reset()
        self.base_cell._modified = False
        try:
            outputs, states = self.base_cell.unroll(length, inputs, begin_state, layout,
                                                    merge_outputs, valid_length)
        finally:
            self.base_cell._modified = True
        merge = isinstance(outputs, Arrays) if merge_outputs is None else merge_outputs
        inputs, axis, F, _ = format_sequence(length, inputs, layout, merge)
        if valid_length is not None:
            inputs = mask_sequence(F, inputs, length, valid_length, axis, merge)
        if merge:
            return F.elemwise_add(outputs, inputs), states
        return [F.elemwise_add(o, i) for o, i in zip(outputs, inputs)], states


class BidirectionalCell(HybridRecurrentCell):
    """Two cells over the sequence, one left to right and one right to left; each step's
    output is the two outputs concatenated. It has no single step: call ``unroll``."""

    def __init__(self, l_cell: HybridRecurrentCell, r_cell: HybridRecurrentCell,
                 output_prefix: str = "bi_") -> None:
        super().__init__(prefix="", params=None)
        self.register_child(l_cell, "l_cell")
        self.register_child(r_cell, "r_cell")
        self._output_prefix = output_prefix

    def __call__(self, inputs: Any, states: Any) -> Any:
        raise NotImplementedError("a BidirectionalCell cannot be stepped: call unroll")

    def __repr__(self) -> str:
        return (f"BidirectionalCell(forward={self._children['l_cell']!r}, "
                f"backward={self._children['r_cell']!r})")

    def state_info(self, batch_size: int = 0) -> list[dict]:
        return _children_state_info(self._cells(), batch_size)

    def begin_state(self, batch_size: int = 0, func: Callable[..., Any] | None = None,
                    **kwargs: Any) -> list:
        return _children_begin_state(self, batch_size, func, kwargs)

    def unroll(self, length: int, inputs: Any, begin_state: Any = None, layout: str = "NTC",
               merge_outputs: bool | None = None, valid_length: Any = None) -> tuple[Any, list]:
        self.reset()
        steps, axis, F, batch = format_sequence(length, inputs, layout, False)
        backwards = reverse_sequences(steps, length, valid_length)
        states = _begin_state(self, F, begin_state, steps, batch)
        l_cell, r_cell = self._cells()
        split = len(l_cell.state_info(batch))
        l_out, l_states = l_cell.unroll(length, steps, states[:split], layout, merge_outputs,
                                        valid_length)
        r_out, r_states = r_cell.unroll(length, backwards, states[split:], layout, False,
                                        valid_length)
        r_out = reverse_sequences(r_out, length, valid_length)
        if merge_outputs is None:
            merge_outputs = isinstance(l_out, Arrays)
            l_out = format_sequence(None, l_out, layout, merge_outputs)[0]
            r_out = format_sequence(None, r_out, layout, merge_outputs)[0]
        if merge_outputs:
            r_merged = F.stack(*r_out, axis=axis) if not isinstance(r_out, Arrays) else r_out
            outputs: Any = F.concat(l_out, r_merged, dim=2, name=f"{self._output_prefix}out")
        else:
            outputs = [F.concat(left, right, dim=1, name=f"{self._output_prefix}t{i}")
                       for i, (left, right) in enumerate(zip(l_out, r_out))]
        if valid_length is not None:
            outputs = mask_sequence(F, outputs, length, valid_length, axis, merge_outputs)
        return outputs, l_states + r_states
