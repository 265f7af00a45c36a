"""MXNet's ``gluon.contrib.rnn`` cells: LSTMP, variational dropout, ``dynamic_unroll``.

* :class:`LSTMPCell` (Sak et al.): an LSTM whose state ``h`` is projected to a smaller
  size by ``h2r_weight`` -- the cell the fused ``LSTM(projection_size=...)`` unrolls to.
* :class:`VariationalDropoutCell` (Gal and Ghahramani): dropout whose mask is drawn *once
  per sequence* and reused at every step, on the inputs, the state and the outputs.
* :func:`dynamic_unroll`: a cell over a sequence with ``F.contrib.foreach`` -- one loop
  operator, not a copy of the cell per step (hybridlab/ops/control_flow.py) -- with
  ``valid_length`` freezing each sample's state after its last step.
"""

from __future__ import annotations

from typing import Any

from hybridlab.gluon.rnn.rnn_cell import (
    Arrays,
    BidirectionalCell,
    HybridRecurrentCell,
    ModifierCell,
    _begin_state,
    _GatedCell,
    format_sequence,
    mask_sequence,
)


class LSTMPCell(_GatedCell):
    """An LSTM cell with a projection: ``r = (o * tanh(c)) @ h2r_weight.T`` is the output
    and the state the next step's ``h2h`` reads (``projection_size`` wide)."""

    gates = 4

    def __init__(self, hidden_size: int, projection_size: int,
                 i2h_weight_initializer: Any = None, h2h_weight_initializer: Any = None,
                 h2r_weight_initializer: Any = None, i2h_bias_initializer: Any = "zeros",
                 h2h_bias_initializer: Any = "zeros", input_size: int = 0,
                 prefix: str | None = None, params: Any = None) -> None:
        super().__init__(hidden_size, i2h_weight_initializer, h2h_weight_initializer,
                         i2h_bias_initializer, h2h_bias_initializer, input_size, prefix, params,
                         state_size=projection_size)
        self._projection_size = projection_size
        self.h2r_weight = self.params.get("h2r_weight", shape=(projection_size, hidden_size),
                                          init=h2r_weight_initializer, allow_deferred_init=True)

    def _alias(self) -> str:
        return "lstmp"

    def state_info(self, batch_size: int = 0) -> list[dict]:
        return [{"shape": (batch_size, self._projection_size), "__layout__": "NC"},
                {"shape": (batch_size, self._hidden_size), "__layout__": "NC"}]

    def hybrid_forward(self, F: Any, x: Any, states: Any, h2r_weight: Any,
                       **params: Any) -> Any:
        i2h, h2h, prefix = self._products(F, x, states[0], **params)
        gates = F.SliceChannel(i2h + h2h, num_outputs=4, name=prefix + "slice")
        in_gate = F.Activation(gates[0], act_type="sigmoid", name=prefix + "i")
        forget_gate = F.Activation(gates[1], act_type="sigmoid", name=prefix + "f")
        candidate = F.Activation(gates[2], act_type="tanh", name=prefix + "c")
        out_gate = F.Activation(gates[3], act_type="sigmoid", name=prefix + "o")
        next_c = F.elemwise_add(forget_gate * states[1], in_gate * candidate,
                                name=prefix + "state")
        hidden = F.elemwise_mul(out_gate, F.Activation(next_c, act_type="tanh"),
                                name=prefix + "hidden")
        projected = F.FullyConnected(hidden, h2r_weight, num_hidden=self._projection_size,
                                     no_bias=True, name=prefix + "out")
        return projected, [projected, next_c]


class VariationalDropoutCell(ModifierCell):
    """Dropout with one mask per sequence (``reset`` draws new ones) on the inputs
    (``drop_inputs``), the first state (``drop_states``) and the outputs."""

    def __init__(self, base_cell: HybridRecurrentCell, drop_inputs: float = 0.0,
                 drop_states: float = 0.0, drop_outputs: float = 0.0) -> None:
        if drop_states and isinstance(base_cell, BidirectionalCell):
            raise TypeError("VariationalDropoutCell cannot drop a BidirectionalCell's states; "
                            "wrap the cells inside it instead")
        super().__init__(base_cell)
        self.drop_inputs, self.drop_states = drop_inputs, drop_states
        self.drop_outputs = drop_outputs
        self._masks: dict[str, Any] = {}

    def _alias(self) -> str:
        return "vardrop"

    def __repr__(self) -> str:
        return (f"VariationalDropoutCell(p_out = {self.drop_outputs}, "
                f"p_state = {self.drop_states})")

    def reset(self) -> None:
        super().reset()
        self._masks = {}

    def _mask(self, F: Any, which: str, like: Any, p: float) -> Any:
        if which not in self._masks:
            self._masks[which] = F.Dropout(F.ones_like(like), p=p)
        return self._masks[which]

    def hybrid_forward(self, F: Any, x: Any, states: Any) -> Any:
        if self.drop_states:
            states = [states[0] * self._mask(F, "states", states[0], self.drop_states),
                      *states[1:]]
        if self.drop_inputs:
            x = x * self._mask(F, "inputs", x, self.drop_inputs)
        output, states = self.base_cell(x, states)
        if self.drop_outputs:
            output = output * self._mask(F, "outputs", output, self.drop_outputs)
        return output, states

    def unroll(self, length: int, inputs: Any, begin_state: Any = None, layout: str = "NTC",
               merge_outputs: bool | None = None, valid_length: Any = None) -> tuple[Any, list]:
        """Without state dropout, the masks are Dropout over the whole sequence shared along
        the time axis, around the base cell's own unroll."""
        if self.drop_states:
            return super().unroll(length, inputs, begin_state, layout, merge_outputs,
                                  valid_length)
        self.reset()
        inputs, axis, F, batch = format_sequence(length, inputs, layout, True)
        states = _begin_state(self, F, begin_state, inputs, batch)
        if self.drop_inputs:
            inputs = F.Dropout(inputs, p=self.drop_inputs, axes=(axis,))
        self.base_cell._modified = False
        try:
            outputs, states = self.base_cell.unroll(length, inputs, states, layout, True,
                                                    valid_length)
        finally:
            self.base_cell._modified = True
        if self.drop_outputs:
            outputs = F.Dropout(outputs, p=self.drop_outputs, axes=(axis,))
        merge = isinstance(outputs, Arrays) if merge_outputs is None else merge_outputs
        outputs = format_sequence(length, outputs, layout, merge)[0]
        if valid_length is not None:
            outputs = mask_sequence(F, outputs, length, valid_length, axis, merge)
        return outputs, states


def dynamic_unroll(cell: Any, inputs: Any, begin_state: Any, drop_inputs: float = 0,
                   drop_outputs: float = 0, layout: str = "TNC",
                   valid_length: Any = None) -> tuple[Any, list]:
    """``cell`` over ``inputs`` (one array, time on ``layout``'s axis) as one ``foreach``
    loop; with ``valid_length`` a sample's states stop changing after its last step and
    its later outputs are zeros."""
    inputs, axis, F, _ = format_sequence(0, inputs, layout, True)
    if axis != 0:
        inputs = F.swapaxes(inputs, dim1=0, dim2=axis)
    if drop_inputs:
        inputs = F.Dropout(inputs, p=drop_inputs, axes=(axis,))
    states = list(begin_state)
    if valid_length is None:
        outputs, states = F.contrib.foreach(lambda x, s: cell(x, s), inputs, states)
    else:
        def step(x: Any, carried: list) -> tuple[Any, list]:
            *previous, count = carried
            out, new = cell(x, previous)
            going = F.broadcast_greater(valid_length, count)
            new = [F.where(going, n, p) for n, p in zip(new, previous)]
            return out, new + [count + 1]

        outputs, states = F.contrib.foreach(step, inputs, states + [F.zeros((1,))])
        states = states[:-1]
    if drop_outputs:
        outputs = F.Dropout(outputs, p=drop_outputs, axes=(0,))
    if axis != 0:
        outputs = F.swapaxes(outputs, dim1=0, dim2=axis)
    if valid_length is not None:
        outputs = F.SequenceMask(outputs, valid_length, use_sequence_length=True, axis=axis)
    return outputs, list(states)
