"""Recurrent networks: MXNet's fused ``RNN`` operator, and the sequence operators.

What this module teaches
------------------------
A recurrent layer applies one *cell* at every time step: ``h_t = cell(x_t, h_{t-1})``.
Unrolled, that is T copies of the cell's operators, each waiting for the one before.
MXNet (and cuDNN) run the whole layer as **one fused operator**, ``RNN``, and two ideas
make it faster than the unrolled cells:

* the input's contribution to every gate, ``x_t @ W_i2h.T + b_i2h``, does not depend on
  the state, so it is computed for *all* time steps at once, as one large matrix product
  (``_rnn_layer``'s first line); only ``h_{t-1} @ W_h2h.T`` stays inside the time loop;
* the loop runs in the kernel, so a step costs a few numpy calls, not a graph's worth of
  engine operations.

``RNN`` takes every weight of every layer and direction as **one flat vector**,
``parameters``, in MXNet's order: first all weights -- for each layer, for each
direction (left to right, then right to left), ``i2h`` then ``h2h`` (then ``h2r``, the
projection, for an LSTM with ``projection_size``) -- then all biases in the same order
(``i2h``, ``h2h``; a projection has none). ``gluon.rnn.LSTM`` concatenates its
parameters into that vector (``_rnn_param_concat``) and calls ``RNN``, so an exported
model holds MXNet's two nodes.

``RNN`` is a *layer operator* (ARCHITECTURE.md, "Registry"): a graph keeps it as one node;
the compiler lowers it to one ``_rnn_layer`` per layer and direction (each a time loop in
numpy, with its own backward, ``_rnn_layer_backward``: back-propagation through time,
recomputing the forward's gates), the slices of ``parameters`` they read, ``Dropout``
between layers (``p``) and the concatenation of the two directions' outputs.

Gates, in MXNet's order (each a block of ``state_size`` rows of the weights):

* ``lstm``: input ``i``, forget ``f``, candidate ``g``, output ``o``;
  ``c = f*c + i*g``, ``h = o*tanh(c)`` (times ``W_h2r.T`` with a projection);
* ``gru``: reset ``r``, update ``z``, new ``n``; ``n = tanh(x_n + r*(h@W_n.T + b_n))``,
  ``h = (1-z)*n + z*h``;
* ``rnn_tanh``/``rnn_relu``: ``h = act(x@W_i2h.T + b_i2h + h@W_h2h.T + b_h2h)``.

With ``use_sequence_length``, sample ``n`` has ``sequence_length[n]`` valid steps: its
state stops changing after them and its later outputs are zeros; the right-to-left
direction starts at its last valid step. (MXNet 1.9.1 allows this only on cuDNN.)

The sequence operators ``SequenceMask``, ``SequenceLast`` and ``SequenceReverse`` are
what ``gluon.rnn``'s cells use for ``valid_length``: time is axis 0 (or ``axis``), and
``sequence_length`` holds each sample's number of valid steps.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hybridlab.errors import ShapeError
from hybridlab.ops.registry import (
    Attr,
    Aval,
    Kind,
    OpDef,
    get,
    register,
    register_layer,
    run_lowering,
)

GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-x))`` without overflow: the same function through ``tanh``."""
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _optional_float(value: Any) -> float | None:
    """MXNet's optional float attributes: None (also JSON's "None") or a number."""
    return None if value is None or value == "None" else float(value)


# -- one layer, one direction: the primitive and its backward ----------------------------

def _layer_input_names(attrs: dict[str, Any]) -> tuple[str, ...]:
    names: tuple[str, ...] = ("data", "i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias")
    names += ("h2r_weight",) if attrs["projection_size"] else ()
    names += ("state",) + (("state_cell",) if attrs["mode"] == "lstm" else ())
    return names + (("sequence_length",) if attrs["use_sequence_length"] else ())


class _Layer:
    """The arrays one ``_rnn_layer`` call reads, by name (``h2r``, ``c0``, ``lengths`` may
    be None), and its attributes."""

    def __init__(self, arrays: tuple[np.ndarray, ...], attrs: dict[str, Any]) -> None:
        names = _layer_input_names(attrs)
        self.dtypes = [a.dtype for a in arrays[:len(names)]]  # what the results promise
        work = np.result_type(arrays[0], np.float32)  # float16 and ints computed wider
        given = {n: a if n == "sequence_length" else a.astype(work, copy=False)
                 for n, a in zip(names, arrays)}
        self.x, self.h0, self.c0 = given["data"], given["state"], given.get("state_cell")
        self.wi, self.wh = given["i2h_weight"], given["h2h_weight"]
        self.bi, self.bh, self.wr = given["i2h_bias"], given["h2h_bias"], given.get("h2r_weight")
        lengths = given.get("sequence_length")
        self.lengths = None if lengths is None else lengths.astype(np.int64)
        self.mode, self.reverse = attrs["mode"], attrs["reverse"]
        self.clip = (_optional_float(attrs["lstm_state_clip_min"]),
                     _optional_float(attrs["lstm_state_clip_max"]))

    def steps(self) -> range:
        count = self.x.shape[0]
        return range(count - 1, -1, -1) if self.reverse else range(count)

    def alive(self, t: int) -> np.ndarray | None:
        """Which samples have step ``t`` (a column of booleans), or None: all of them."""
        return None if self.lengths is None else (t < self.lengths)[:, None]


def _lstm_step(pre: np.ndarray, c: np.ndarray, layer: _Layer) -> tuple[Any, ...]:
    i, f, g, o = np.split(pre, 4, axis=1)
    i, f, g, o = _sigmoid(i), _sigmoid(f), np.tanh(g), _sigmoid(o)
    c_new = f * c + i * g
    low, high = layer.clip
    if low is not None or high is not None:  # MXNet's lstm_state_clip_min/max
        c_new = np.clip(c_new, low, high)
    tanh_c = np.tanh(c_new)
    h_raw = o * tanh_c
    h_new = h_raw @ layer.wr.T if layer.wr is not None else h_raw
    return h_new, c_new, (i, f, g, o, tanh_c, h_raw)


def _step(layer: _Layer, x_part: np.ndarray, h: np.ndarray, c: Any) -> tuple[Any, ...]:
    """One time step: ``(h_new, c_new, saved)``; ``x_part`` is the input's share of the
    gates (computed for all steps at once), ``saved`` what the backward step reads."""
    h_part = h @ layer.wh.T + layer.bh
    if layer.mode == "lstm":
        return _lstm_step(x_part + h_part, c, layer)
    if layer.mode == "gru":
        xr, xz, xn = np.split(x_part, 3, axis=1)
        hr, hz, hn = np.split(h_part, 3, axis=1)
        r, z = _sigmoid(xr + hr), _sigmoid(xz + hz)
        n = np.tanh(xn + r * hn)
        return (1 - z) * n + z * h, None, (r, z, n, hn)
    pre = x_part + h_part
    h_new = np.tanh(pre) if layer.mode == "rnn_tanh" else np.maximum(pre, 0)
    return h_new, None, ()


def _run(layer: _Layer, keep: bool) -> tuple[Any, ...]:
    """The time loop: ``(out, h, c, tape)``; ``tape`` (when ``keep``) holds each step's
    ``(t, h_prev, c_prev, h_new, c_new, saved)`` for the backward."""
    x = layer.x
    count, batch = x.shape[:2]
    x_parts = (x.reshape(count * batch, -1) @ layer.wi.T + layer.bi).reshape(count, batch, -1)
    h, c = layer.h0, layer.c0
    out = np.zeros((count, batch, h.shape[1]), np.result_type(x, h))
    tape = []
    for t in layer.steps():
        h_new, c_new, saved = _step(layer, x_parts[t], h, c)
        alive = layer.alive(t)
        if keep:
            tape.append((t, h, c, h_new, c_new, saved))
        out[t] = h_new if alive is None else np.where(alive, h_new, 0)
        h = h_new if alive is None else np.where(alive, h_new, h)
        if c is not None:
            c = c_new if alive is None else np.where(alive, c_new, c)
    return out, h, c, tape


def _rnn_layer(*arrays: np.ndarray, **attrs: Any) -> tuple[np.ndarray, ...]:
    layer = _Layer(arrays, attrs)
    results = _run(layer, keep=False)[:3]
    return tuple(r.astype(layer.dtypes[0], copy=False) for r in results if r is not None)


def _lstm_step_back(dh: np.ndarray, dc: np.ndarray, layer: _Layer, c_prev: np.ndarray,
                    c_new: np.ndarray, saved: tuple[Any, ...], grads: dict[str, Any]
                    ) -> tuple[Any, ...]:
    i, f, g, o, tanh_c, h_raw = saved
    if layer.wr is not None:  # h = h_raw @ W_h2r.T
        grads["h2r_weight"] += dh.T @ h_raw
        dh = dh @ layer.wr
    do = dh * tanh_c
    dc = dc + dh * o * (1 - tanh_c * tanh_c)
    low, high = layer.clip
    if low is not None or high is not None:  # no gradient where the clip held the cell
        dc = dc * ((c_new > (-np.inf if low is None else low))
                   & (c_new < (np.inf if high is None else high)))
    d_pre = np.concatenate([dc * g * i * (1 - i), dc * c_prev * f * (1 - f),
                            dc * i * (1 - g * g), do * o * (1 - o)], axis=1)
    return d_pre, d_pre, 0.0, dc * f


def _step_back(layer: _Layer, dh: np.ndarray, dc: Any, record: tuple[Any, ...],
               grads: dict[str, Any]) -> tuple[Any, ...]:
    """The gradients of one step: ``(d_x_part, d_h_part, dh_prev_direct, dc_prev)`` --
    of the input's and the state's share of the gates, and what reaches the previous
    state besides ``d_h_part @ W_h2h``."""
    t, h_prev, c_prev, h_new, c_new, saved = record
    if layer.mode == "lstm":
        return _lstm_step_back(dh, dc, layer, c_prev, c_new, saved, grads)
    if layer.mode == "gru":
        r, z, n, hn = saved
        dn = dh * (1 - z) * (1 - n * n)
        dr = dn * hn * r * (1 - r)
        dz = dh * (h_prev - n) * z * (1 - z)
        return (np.concatenate([dr, dz, dn], axis=1), np.concatenate([dr, dz, dn * r], axis=1),
                dh * z, None)
    d_pre = dh * (1 - h_new * h_new) if layer.mode == "rnn_tanh" else dh * (h_new > 0)
    return d_pre, d_pre, 0.0, None


def _rnn_layer_backward(*arrays: np.ndarray, **attrs: Any) -> tuple[np.ndarray, ...]:
    """Back-propagation through time: the forward again (keeping each step), then the
    steps in reverse order; the input weights' gradients as one product at the end."""
    count = len(_layer_input_names(attrs))
    layer = _Layer(arrays[:count], attrs)
    work = layer.x.dtype
    d_out, dh, *rest = (a.astype(work, copy=False) for a in arrays[count:])
    dc = rest[0] if rest else None
    _, _, _, tape = _run(layer, keep=True)
    grads = {"h2h_weight": np.zeros_like(layer.wh), "h2h_bias": np.zeros_like(layer.bh)}
    if layer.wr is not None:
        grads["h2r_weight"] = np.zeros_like(layer.wr)
    d_x_parts = np.zeros((*layer.x.shape[:2], layer.wi.shape[0]), layer.x.dtype)
    for record in reversed(tape):
        t, h_prev, alive = record[0], record[1], layer.alive(record[0])
        d_new = dh + d_out[t]
        if alive is not None:  # a finished sample: its state passes through unchanged
            d_new, dc_new = np.where(alive, d_new, 0), None if dc is None else np.where(
                alive, dc, 0)
        else:
            dc_new = dc
        d_x, d_h, direct, dc_prev = _step_back(layer, d_new, dc_new, record, grads)
        d_x_parts[t] = d_x
        grads["h2h_weight"] += d_h.T @ h_prev
        grads["h2h_bias"] += d_h.sum(axis=0)
        dh_prev = direct + d_h @ layer.wh
        dh = dh_prev if alive is None else np.where(alive, dh_prev, dh)
        if dc is not None:
            dc = dc_prev if alive is None else np.where(alive, dc_prev, dc)
    return _input_grads(layer, d_x_parts, grads, dh, dc)


def _input_grads(layer: _Layer, d_x_parts: np.ndarray, grads: dict[str, Any], dh: np.ndarray,
                 dc: Any) -> tuple[np.ndarray, ...]:
    """Every input's gradient, in the inputs' order (the sequence lengths get none)."""
    flat = d_x_parts.reshape(-1, d_x_parts.shape[2])
    x = layer.x.reshape(flat.shape[0], -1)
    found = [(flat @ layer.wi).reshape(layer.x.shape), flat.T @ x, grads["h2h_weight"],
             flat.sum(axis=0), grads["h2h_bias"]]
    found += [grads["h2r_weight"]] if layer.wr is not None else []
    found += [dh] + ([dc] if layer.c0 is not None else [])
    return tuple(np.asarray(g, dtype) for g, dtype in zip(found, layer.dtypes))


def _layer_infer(*avals: Aval, **attrs: Any) -> list[Aval]:
    given = dict(zip(_layer_input_names(attrs), avals))
    x, h = given["data"], given["state"]
    if len(x.shape) != 3 or len(h.shape) != 2 or h.shape[0] != x.shape[1]:
        raise ShapeError(f"_rnn_layer: data (T, N, C) {x.shape} and state (N, H) {h.shape} "
                         f"must agree on the batch N")
    result = [Aval((x.shape[0], x.shape[1], h.shape[1]), x.dtype), Aval(h.shape, x.dtype)]
    return result + ([given["state_cell"]] if "state_cell" in given else [])


def _layer_grad(F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any],
                **attrs: Any) -> list[Any]:
    heads = [F.zeros_like(y) if g is None else g for g, y in zip(out_grads, outputs)]
    grads = F._rnn_layer_backward(*inputs, *heads, **attrs)
    grads = list(grads) if isinstance(grads, (list, tuple)) or hasattr(grads, "list_outputs") \
        else [grads]
    return grads + ([None] if attrs["use_sequence_length"] else [])


_LAYER_ATTRS = {
    "mode": Attr("str", "lstm", tuple(GATES)), "reverse": Attr("bool", False),
    "projection_size": Attr("index", None), "use_sequence_length": Attr("bool", False),
    "lstm_state_clip_min": Attr("any", None), "lstm_state_clip_max": Attr("any", None)}
register(OpDef(
    name="_rnn_layer", kernel=_rnn_layer, infer=_layer_infer, grad=_layer_grad,
    kind=Kind.OPAQUE, inputs=_layer_input_names, attrs=_LAYER_ATTRS,
    num_outputs=lambda attrs: 3 if attrs["mode"] == "lstm" else 2,
    doc="One recurrent layer in one direction (``reverse``): data (T, N, C), the weights "
        "and biases of ``i2h`` and ``h2h`` (and ``h2r``), the first state (N, H) (and cell) "
        "-> outputs (T, N, H) and the last state (and cell). ``RNN``'s lowering calls it."))


def _backward_input_names(attrs: dict[str, Any]) -> tuple[str, ...]:
    heads = ("out_grad", "state_grad") + (("cell_grad",) if attrs["mode"] == "lstm" else ())
    return _layer_input_names(attrs) + heads


def _backward_infer(*avals: Aval, **attrs: Any) -> list[Aval]:
    names = _layer_input_names(attrs)
    return [a for a, n in zip(avals, names) if n != "sequence_length"]


register(OpDef(
    name="_rnn_layer_backward", kernel=_rnn_layer_backward, infer=_backward_infer,
    grad=None, grad_missing="the fused RNN's backward has no second order",
    kind=Kind.OPAQUE, inputs=_backward_input_names, attrs=_LAYER_ATTRS,
    num_outputs=lambda attrs: len(_layer_input_names(attrs)) - attrs["use_sequence_length"],
    doc="``_rnn_layer``'s gradients for each of its inputs (back-propagation through time)."))


# -- RNN: MXNet's fused operator, lowered to one _rnn_layer per layer and direction -------

def _hidden(attrs: dict[str, Any]) -> int:
    """The size of the state ``h`` (the projection's, for an LSTM with one)."""
    return int(attrs["projection_size"] or attrs["state_size"])


def packed_layout(input_size: int, attrs: dict[str, Any]
                  ) -> list[tuple[str, int, tuple[int, ...]]]:
    """Where each weight lives in ``parameters``: ``(name, offset, shape)`` in MXNet's
    order, names like ``l0_i2h_weight`` / ``r1_h2h_bias`` (gluon.rnn's parameter names)."""
    gates, size, hidden = GATES[attrs["mode"]] * attrs["state_size"], attrs["state_size"], \
        _hidden(attrs)
    directions = "lr"[:2 if attrs["bidirectional"] else 1]
    weights: list[tuple[str, tuple[int, ...]]] = []
    biases: list[tuple[str, tuple[int, ...]]] = []
    for layer in range(attrs["num_layers"]):
        width = input_size if layer == 0 else hidden * len(directions)
        for d in directions:
            weights += [(f"{d}{layer}_i2h_weight", (gates, width)),
                        (f"{d}{layer}_h2h_weight", (gates, hidden))]
            if attrs["projection_size"]:
                weights.append((f"{d}{layer}_h2r_weight", (hidden, size)))
            biases += [(f"{d}{layer}_i2h_bias", (gates,)), (f"{d}{layer}_h2h_bias", (gates,))]
    layout: list[tuple[str, int, tuple[int, ...]]] = []
    offset = 0
    for name, shape in weights + biases:
        layout.append((name, offset, shape))
        offset += int(np.prod(shape))
    return layout


def _param_size(input_size: int, attrs: dict[str, Any]) -> int:
    name, offset, shape = packed_layout(input_size, attrs)[-1]
    return offset + int(np.prod(shape))


def _rnn_input_names(attrs: dict[str, Any]) -> tuple[str, ...]:
    names = ("data", "parameters", "state") + (("state_cell",) if attrs["mode"] == "lstm" else ())
    return names + (("sequence_length",) if attrs["use_sequence_length"] else ())


def _rnn_outputs(attrs: dict[str, Any]) -> int:
    if not attrs["state_outputs"]:
        return 1
    return 3 if attrs["mode"] == "lstm" else 2


def _state_shapes(x: Aval, attrs: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    stack = attrs["num_layers"] * (2 if attrs["bidirectional"] else 1)
    shapes = {"parameters": (_param_size(x.shape[2], attrs),),
              "state": (stack, x.shape[1], _hidden(attrs))}
    if attrs["mode"] == "lstm":
        shapes["state_cell"] = (stack, x.shape[1], attrs["state_size"])
    return shapes


def _rnn_infer(*avals: Aval, **attrs: Any) -> list[Aval]:
    given = dict(zip(_rnn_input_names(attrs), avals))
    x = given["data"]
    if len(x.shape) != 3:
        raise ShapeError(f"RNN: data must be (sequence length, batch, features) (layout TNC), "
                         f"got shape {x.shape}; swap axes 0 and 1 of NTC data first")
    for name, want in _state_shapes(x, attrs).items():
        if given[name].shape != want:
            raise ShapeError(f"RNN: {name} has shape {given[name].shape}, but data {x.shape} "
                             f"with these attributes needs {want}")
    directions = 2 if attrs["bidirectional"] else 1
    out = Aval((x.shape[0], x.shape[1], directions * _hidden(attrs)), x.dtype)
    states = [Aval(given[n].shape, x.dtype) for n in ("state", "state_cell") if n in given]
    return [out] + states[:_rnn_outputs(attrs) - 1]


def _param_shapes(x: Aval, **attrs: Any) -> dict[str, tuple[int, ...]]:
    return _state_shapes(x, attrs)


def _shape_of(x: Any) -> tuple[int, ...]:
    """The shape of a lowering's input: a Symbol's traced shape (a graph is lowered after
    its shapes are inferred), an NDArray's, or the eager namespace's array's."""
    if hasattr(x, "_static_shape"):
        return tuple(x._static_shape())
    return tuple(np.shape(x))


def _rnn_lower(F: Any, data: Any, parameters: Any, state: Any, *rest: Any, **attrs: Any) -> Any:
    """The layers one after another: each direction an ``_rnn_layer`` reading its slices
    of ``parameters`` and its first state; the directions' outputs joined; Dropout
    between layers; the last states stacked as MXNet returns them."""
    extra = dict(zip(_rnn_input_names(attrs)[3:], rest))
    cells, lengths = extra.get("state_cell"), extra.get("sequence_length")
    pieces = {name: F.reshape(F.slice(parameters, begin=(offset,),
                                      end=(offset + int(np.prod(shape)),)), shape=shape)
              for name, offset, shape in packed_layout(_shape_of(data)[2], attrs)}
    layer_attrs = {k: attrs[k] for k in ("mode", "projection_size", "use_sequence_length",
                                         "lstm_state_clip_min", "lstm_state_clip_max")}
    directions = "lr"[:2 if attrs["bidirectional"] else 1]
    x, finals = data, []
    for layer in range(attrs["num_layers"]):
        outs = []
        for d in directions:
            k = layer * len(directions) + directions.index(d)
            names = ("i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias") + (
                ("h2r_weight",) if attrs["projection_size"] else ())
            args = [x] + [pieces[f"{d}{layer}_{n}"] for n in names] + [_row(F, state, k)]
            args += [_row(F, cells, k)] if cells is not None else []
            args += [lengths] if lengths is not None else []
            result = list(F._rnn_layer(*args, reverse=d == "r", **layer_attrs))
            outs.append(result[0])
            finals.append(result[1:])
        x = outs[0] if len(outs) == 1 else F.concat(*outs, dim=2)
        if attrs["p"] > 0 and layer < attrs["num_layers"] - 1:
            x = run_lowering(get("Dropout"), F, [x], {"p": attrs["p"]})
    if not attrs["state_outputs"]:
        return x
    return [x] + [F.stack(*column, axis=0) for column in zip(*finals)]


def _row(F: Any, stacked: Any, k: int) -> Any:
    """Layer-and-direction ``k``'s first state: row ``k`` of the stacked states."""
    return F.reshape(F.slice_axis(stacked, axis=0, begin=k, end=k + 1), shape=(-3, -2))


register_layer(
    "RNN", _rnn_lower, _rnn_infer, inputs=_rnn_input_names,
    num_outputs=_rnn_outputs, infer_params=_param_shapes,
    attrs={"state_size": Attr("int", low=1), "num_layers": Attr("int", low=1),
           "bidirectional": Attr("bool", False), "mode": Attr("str", choices=tuple(GATES)),
           "p": Attr("float", 0.0, low=0, high=1), "state_outputs": Attr("bool", False),
           "projection_size": Attr("index", None), "use_sequence_length": Attr("bool", False),
           "lstm_state_clip_min": Attr("any", None), "lstm_state_clip_max": Attr("any", None),
           "lstm_state_clip_nan": Attr("bool", False)},
    doc="MXNet's fused recurrent layers: ``num_layers`` layers of ``mode`` (lstm, gru, "
        "rnn_tanh, rnn_relu) over TNC ``data``, all weights in one ``parameters`` vector "
        "(MXNet's packed order), first states ``state`` (and ``state_cell``) of shape "
        "(layers * directions, N, state_size); outputs the sequence, then (with "
        "``state_outputs``) the last states.")


# -- the sequence operators: time on ``axis``, a count of valid steps per sample ----------

def _sequence_inputs(attrs: dict[str, Any]) -> tuple[str, ...]:
    return ("data", "sequence_length") if attrs["use_sequence_length"] else ("data",)


def _valid(x: np.ndarray, lengths: np.ndarray | None, axis: int) -> np.ndarray:
    """Booleans shaped like ``x``'s first two axes: is step t of sample n valid?"""
    steps, batch = (x.shape[0], x.shape[1]) if axis == 0 else (x.shape[1], x.shape[0])
    count = np.full(batch, steps) if lengths is None else lengths.astype(np.int64)
    valid = np.arange(steps)[:, None] < count[None, :]  # (T, N)
    return valid if axis == 0 else valid.T


def _check_sequence(name: str, x: Aval, lengths: Aval | None, axis: int) -> None:
    batch = x.shape[1 - axis] if len(x.shape) >= 2 else -1
    if axis not in (0, 1) or len(x.shape) < 2 or lengths is not None and \
            lengths.shape != (batch,):
        raise ShapeError(f"{name}: data needs time on axis 0 or 1 and a batch axis, and "
                         f"sequence_length one count per sample; got data {x.shape}, axis "
                         f"{axis}, sequence_length {None if lengths is None else lengths.shape}")


def _mask(x: np.ndarray, lengths: np.ndarray | None = None, *, use_sequence_length: bool,
          value: float, axis: int) -> np.ndarray:
    valid = _valid(x, lengths, axis).reshape(x.shape[:2] + (1,) * (x.ndim - 2))
    return np.where(valid, x, np.asarray(value, x.dtype))


def _mask_grad(F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any],
               **attrs: Any) -> list[Any]:
    return [F.SequenceMask(out_grads[0], *inputs[1:], **{**attrs, "value": 0.0})] + \
        [None] * (len(inputs) - 1)


def _same_infer(name: str) -> Any:
    def infer(x: Aval, lengths: Aval | None = None, **attrs: Any) -> list[Aval]:
        _check_sequence(name, x, lengths, attrs["axis"])
        return [x]

    return infer


_SEQUENCE = {"use_sequence_length": Attr("bool", False), "axis": Attr("int", 0)}
register(OpDef(
    name="SequenceMask", kernel=_mask, infer=_same_infer("SequenceMask"), grad=_mask_grad,
    kind=Kind.OPAQUE, inputs=_sequence_inputs, attrs={**_SEQUENCE, "value": Attr("float", 0.0)},
    doc="Steps past each sample's ``sequence_length`` set to ``value`` (time on ``axis``)."))


def _last_index(x: np.ndarray, lengths: np.ndarray | None, axis: int) -> np.ndarray:
    steps = x.shape[axis]
    return np.full(x.shape[1 - axis], steps - 1) if lengths is None else \
        lengths.astype(np.int64) - 1


def _last(x: np.ndarray, lengths: np.ndarray | None = None, *, use_sequence_length: bool,
          axis: int) -> np.ndarray:
    last = _last_index(x, lengths, axis)
    batch = np.arange(len(last))
    return np.ascontiguousarray(x[last, batch] if axis == 0 else x[batch, last])


def _last_infer(x: Aval, lengths: Aval | None = None, **attrs: Any) -> list[Aval]:
    _check_sequence("SequenceLast", x, lengths, attrs["axis"])
    return [Aval(tuple(n for i, n in enumerate(x.shape) if i != attrs["axis"]), x.dtype)]


def _last_grad(F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any],
               **attrs: Any) -> list[Any]:
    return [F._sequence_last_grad(out_grads[0], *inputs, **attrs)] + [None] * (len(inputs) - 1)


def _last_backward(g: np.ndarray, x: np.ndarray, lengths: np.ndarray | None = None, *,
                   use_sequence_length: bool, axis: int) -> np.ndarray:
    """Zeros like ``x`` but for the gradient at each sample's last valid step."""
    grad = np.zeros_like(x, dtype=g.dtype)
    last = _last_index(x, lengths, axis)
    batch = np.arange(len(last))
    if axis == 0:
        grad[last, batch] = g
    else:
        grad[batch, last] = g
    return grad


register(OpDef(
    name="SequenceLast", kernel=_last, infer=_last_infer, grad=_last_grad, kind=Kind.OPAQUE,
    inputs=_sequence_inputs, attrs=_SEQUENCE,
    doc="Each sample's last valid step (``sequence_length``), the time axis removed."))
register(OpDef(
    name="_sequence_last_grad", kernel=_last_backward, kind=Kind.OPAQUE, grad=None,
    grad_missing="SequenceLast's backward has no second order",
    infer=lambda g, x, lengths=None, **attrs: [Aval(x.shape, g.dtype)],
    inputs=lambda attrs: ("grad", "data") + _sequence_inputs(attrs)[1:], attrs=_SEQUENCE,
    doc="SequenceLast's gradient: the output gradient at each last valid step, else 0."))


def _reverse(x: np.ndarray, lengths: np.ndarray | None = None, *, use_sequence_length: bool,
             axis: int) -> np.ndarray:
    """Each sample's first ``sequence_length`` steps in reverse order; padding stays."""
    steps, batch = x.shape[0], x.shape[1]
    count = np.full(batch, steps) if lengths is None else lengths.astype(np.int64)
    t = np.arange(steps)[:, None]
    source = np.where(t < count[None, :], count[None, :] - 1 - t, t)  # (T, N)
    return np.ascontiguousarray(x[source, np.arange(batch)[None, :]])


def _reverse_grad(F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any],
                  **attrs: Any) -> list[Any]:
    return [F.SequenceReverse(out_grads[0], *inputs[1:], **attrs)] + [None] * (len(inputs) - 1)


def _reverse_infer(x: Aval, lengths: Aval | None = None, **attrs: Any) -> list[Aval]:
    if attrs["axis"] != 0:
        raise ShapeError("SequenceReverse: only axis=0 (time first), as in MXNet")
    _check_sequence("SequenceReverse", x, lengths, 0)
    return [x]


register(OpDef(
    name="SequenceReverse", kernel=_reverse, infer=_reverse_infer, grad=_reverse_grad,
    kind=Kind.OPAQUE, inputs=_sequence_inputs, attrs=_SEQUENCE,
    doc="Each sample's valid steps (``sequence_length``) reversed along axis 0."))
