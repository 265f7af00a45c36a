"""Connectionist temporal classification (``CTCLoss``, Graves et al. 2006).

What this module teaches
------------------------
A recogniser emits a distribution over ``C`` symbols at each of ``T`` steps, and the label
is a shorter sequence with no alignment to the steps. CTC adds a *blank* symbol and sums
the probability of every path of ``T`` symbols that reads as the label once repeats are
merged and blanks removed. The sum is a dynamic programme over the label written with
blanks around every symbol (``_ b _ a _``, length ``2L + 1``): ``alpha[t, s]``, the
probability of the paths reaching position ``s`` at step ``t``, comes from ``s``, ``s - 1``
and -- when that skips a blank between two different symbols -- ``s - 2`` (log space, so
long sequences do not underflow). The loss is ``-log p(label)``.

The gradient needs ``beta`` too (the same recursion from the end): the paths through
``(t, s)`` have probability ``alpha * beta / y[t, s]``, and the gradient of the loss for
the activations (before the softmax the operator applies) is ``y - (those paths'
probability, summed per symbol) / p(label)``.

MXNet's conventions: ``data`` is (T, N, C) activations, ``label`` (N, L); with
``blank_label='first'`` the blank is symbol 0 and labels are padded with 0, with
``'last'`` (Gluon's ``CTCLoss``) the blank is ``C - 1`` and padding is -1; optional
``data_lengths``/``label_lengths`` (per sample) replace the padding rules.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hybridlab.errors import ShapeError
from hybridlab.ops.registry import Attr, Aval, Kind, OpDef, register

_ATTRS = {"use_data_lengths": Attr("bool", False), "use_label_lengths": Attr("bool", False),
          "blank_label": Attr("str", "first", ("first", "last"))}


def _input_names(attrs: dict[str, Any]) -> tuple[str, ...]:
    names: tuple[str, ...] = ("data", "label")
    names += ("data_lengths",) if attrs["use_data_lengths"] else ()
    return names + (("label_lengths",) if attrs["use_label_lengths"] else ())


def _sequences(arrays: tuple[np.ndarray, ...], attrs: dict[str, Any]
               ) -> tuple[np.ndarray, list[tuple[int, np.ndarray]], int]:
    """Log-probabilities (T, N, C), and per sample its step count and label; the blank."""
    given = dict(zip(_input_names(attrs), arrays))
    data, labels = given["data"].astype(np.float64), given["label"]
    steps, batch, classes = data.shape
    shifted = data - data.max(axis=2, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=2, keepdims=True))
    blank = 0 if attrs["blank_label"] == "first" else classes - 1
    pad = 0 if blank == 0 else -1
    samples = []
    for n in range(batch):
        count = int(given["data_lengths"][n]) if "data_lengths" in given else steps
        row = labels[n].astype(np.int64)
        if "label_lengths" in given:
            row = row[:int(given["label_lengths"][n])]
        else:
            ends = np.flatnonzero(row == pad)
            row = row[:ends[0]] if len(ends) else row
        samples.append((count, row))
    return log_probs, samples, blank


def _with_blanks(label: np.ndarray, blank: int) -> np.ndarray:
    extended = np.full(2 * len(label) + 1, blank, np.int64)
    extended[1::2] = label
    return extended


def _recursion(log_y: np.ndarray, extended: np.ndarray, blank: int) -> np.ndarray:
    """``alpha`` (T, S) in log space: the paths reaching each position at each step."""
    steps, size = log_y.shape[0], len(extended)
    alpha = np.full((steps, size), -np.inf)
    alpha[0, :2] = log_y[0, extended[:2]]
    # s - 2 may be skipped when it is a blank between two different symbols
    skip = np.zeros(size, bool)
    skip[2:] = (extended[2:] != blank) & (extended[2:] != extended[:-2])
    for t in range(1, steps):
        previous = alpha[t - 1]
        total = previous.copy()
        total[1:] = np.logaddexp(total[1:], previous[:-1])
        total[2:] = np.where(skip[2:], np.logaddexp(total[2:], previous[:-2]), total[2:])
        alpha[t] = total + log_y[t, extended]
    return alpha


def _log_likelihood(alpha: np.ndarray) -> float:
    last = alpha[-1]
    return float(np.logaddexp(last[-1], last[-2]) if len(last) > 1 else last[-1])


def _ctc_loss(*arrays: np.ndarray, **attrs: Any) -> np.ndarray:
    log_probs, samples, blank = _sequences(arrays, attrs)
    losses = np.zeros(len(samples), arrays[0].dtype)
    for n, (count, label) in enumerate(samples):
        extended = _with_blanks(label, blank)
        losses[n] = -_log_likelihood(_recursion(log_probs[:count, n], extended, blank))
    return losses


def _ctc_backward(*arrays: np.ndarray, **attrs: Any) -> np.ndarray:
    """The loss's gradient for ``data``, each sample's scaled by its output gradient."""
    *inputs, out_grad = arrays
    log_probs, samples, blank = _sequences(tuple(inputs), attrs)
    grad = np.zeros(log_probs.shape)
    for n, (count, label) in enumerate(samples):
        extended = _with_blanks(label, blank)
        log_y = log_probs[:count, n]
        alpha = _recursion(log_y, extended, blank)
        # beta: the same recursion on the reversed steps and positions
        beta = _recursion(log_y[::-1], extended[::-1], blank)[::-1, ::-1]
        through = alpha + beta - log_y[:, extended]  # log p(paths through (t, s))
        per_symbol = np.full(log_y.shape, -np.inf)
        for s, symbol in enumerate(extended):
            per_symbol[:, symbol] = np.logaddexp(per_symbol[:, symbol], through[:, s])
        log_p = _log_likelihood(alpha)
        grad[:count, n] = (np.exp(log_y) - np.exp(per_symbol - log_p)) * out_grad[n]
    return grad.astype(arrays[0].dtype)


def _infer(*avals: Aval, **attrs: Any) -> list[Aval]:
    given = dict(zip(_input_names(attrs), avals))
    data, label = given["data"], given["label"]
    if len(data.shape) != 3 or len(label.shape) != 2 or label.shape[0] != data.shape[1]:
        raise ShapeError(f"CTCLoss: data must be (T, N, C) and label (N, L), got data "
                         f"{data.shape} and label {label.shape}")
    return [Aval((data.shape[1],), data.dtype)]


def _grad(F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any],
          **attrs: Any) -> list[Any]:
    return [F._ctc_loss_backward(*inputs, out_grads[0], **attrs)] + [None] * (len(inputs) - 1)


register(OpDef(
    name="CTCLoss", kernel=_ctc_loss, infer=_infer, grad=_grad, kind=Kind.OPAQUE,
    inputs=_input_names, attrs=_ATTRS,
    aliases=("ctc_loss", "_contrib_CTCLoss", "_contrib_ctc_loss"),
    doc="The CTC loss ``-log p(label | data)`` per sample of (T, N, C) activations (a "
        "softmax is applied) and (N, L) labels; ``blank_label`` 'first' (0) or 'last'."))
register(OpDef(
    name="_ctc_loss_backward", kernel=_ctc_backward, kind=Kind.OPAQUE, grad=None,
    grad_missing="CTCLoss's backward has no second order",
    infer=lambda *avals, **attrs: [avals[0]],
    inputs=lambda attrs: _input_names(attrs) + ("out_grad",), attrs=_ATTRS,
    doc="CTCLoss's gradient for its data (from the alpha and beta recursions)."))
