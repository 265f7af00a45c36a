"""Loss functions (``gluon.loss``): HybridBlocks from (prediction, label) to one loss per sample.

What this module teaches
------------------------
A loss is just another HybridBlock, so it is traced and compiled together with the
network when both are hybridized. Most losses return a vector with one value per sample
(the mean over every axis except ``batch_axis``); ``loss.backward()`` then sums it,
and ``Trainer.step(batch_size)`` divides by the batch size. (As in MXNet, a few differ:
``KLDivLoss`` sums over the other axes, ``TripletLoss`` sums the squared distances,
``PoissonNLLLoss`` returns one mean over everything, ``CosineEmbeddingLoss`` an (N, 1)
column.)

``weight`` scales a loss and ``sample_weight`` (an array broadcast against it) scales
each element: both applied before the mean.

Numerically stable forms are used on purpose: softmax cross-entropy goes through
``log_softmax`` (no ``log(softmax(x))`` underflow) and the sigmoid losses use
``relu(x) - x*y + log(1 + exp(-|x|))`` (no ``exp`` overflow).
"""

from __future__ import annotations

import math
from typing import Any

from hybridlab import ndarray
from hybridlab.gluon.block import HybridBlock


class Loss(HybridBlock):
    """Base class: ``weight`` scales the loss; ``batch_axis`` is the sample axis (0)."""

    def __init__(self, weight: float | None = None, batch_axis: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._weight, self._batch_axis = weight, batch_axis

    def __repr__(self) -> str:
        return f"{type(self).__name__}(batch_axis={self._batch_axis}, w={self._weight})"

    def _weighted(self, F: Any, loss: Any, sample_weight: Any, weight: Any = "own") -> Any:
        if sample_weight is not None:
            loss = F.broadcast_mul(loss, sample_weight)
        weight = self._weight if weight == "own" else weight
        return loss if weight is None else loss * weight

    def _per_sample(self, F: Any, loss: Any, reduce: str = "mean") -> Any:
        """Average (or sum) each sample's loss over its other axes."""
        if self._batch_axis != 0:
            loss = F.swapaxes(loss, dim1=0, dim2=self._batch_axis)
        flat = loss.reshape((0, -1))
        return F.mean(flat, axis=1) if reduce == "mean" else F.sum(flat, axis=1)

    def _finish(self, F: Any, loss: Any, sample_weight: Any) -> Any:
        """Apply the weights, then average each sample's loss over its other axes."""
        return self._per_sample(F, self._weighted(F, loss, sample_weight))


def _like(label: Any, pred: Any) -> Any:
    return label.reshape_like(pred)


class L2Loss(Loss):
    """``weight/2 * (pred - label)**2`` (MXNet's L2Loss includes the 1/2)."""

    def __init__(self, weight: float = 1.0, batch_axis: int = 0, **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)

    def hybrid_forward(self, F: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:
        loss = F.square(F.broadcast_sub(_like(label, pred), pred))
        half = 0.5 * (1.0 if self._weight is None else self._weight)
        return self._per_sample(F, self._weighted(F, loss, sample_weight, half))


class L1Loss(Loss):
    """``weight * |pred - label|``."""

    def hybrid_forward(self, F: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:
        loss = F.abs(F.broadcast_sub(_like(label, pred), pred))
        return self._finish(F, loss, sample_weight)


class SoftmaxCrossEntropyLoss(Loss):
    """``-log softmax(pred)[label]`` for class indices (``sparse_label=True``), or
    ``-sum(label * log softmax(pred))`` for probability labels."""

    def __init__(self, axis: int = -1, sparse_label: bool = True, from_logits: bool = False,
                 weight: float | None = None, batch_axis: int = 0, **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self._axis, self._sparse, self._from_logits = axis, sparse_label, from_logits

    def hybrid_forward(self, F: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:
        if not self._from_logits:
            pred = F.log_softmax(pred, axis=self._axis)
        if self._sparse:
            loss = -F.pick(pred, label, axis=self._axis, keepdims=True)
        else:
            loss = -F.sum(pred * _like(label, pred), axis=self._axis, keepdims=True)
        return self._finish(F, loss, sample_weight)


SoftmaxCELoss = SoftmaxCrossEntropyLoss


def _softplus_of_minus_abs(F: Any, x: Any) -> Any:
    """``log(1 + exp(-|x|))``: never an overflowing exponent."""
    return F.Activation(-F.abs(x), act_type="softrelu")


class SigmoidBinaryCrossEntropyLoss(Loss):
    """Binary cross-entropy on logits (or on probabilities with ``from_sigmoid=True``);
    ``pos_weight`` weights the positive class's term (an extra input, as in MXNet)."""

    def __init__(self, from_sigmoid: bool = False, weight: float | None = None,
                 batch_axis: int = 0, **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self._from_sigmoid = from_sigmoid

    def hybrid_forward(self, F: Any, pred: Any, label: Any, sample_weight: Any = None,
                       pos_weight: Any = None) -> Any:
        label = _like(label, pred)
        if not self._from_sigmoid:
            if pos_weight is None:
                loss = F.relu(pred) - pred * label + _softplus_of_minus_abs(F, pred)
            else:  # log(1 + exp(-x)) weighted for the positives
                scale = F.broadcast_mul(pos_weight - 1, label) + 1
                loss = pred - pred * label + scale * (_softplus_of_minus_abs(F, pred)
                                                      + F.relu(-pred))
        else:
            eps = 1e-12
            positive = F.log(pred + eps) * label
            if pos_weight is not None:
                positive = F.broadcast_mul(positive, pos_weight)
            loss = -(positive + F.log(1.0 - pred + eps) * (1.0 - label))
        return self._finish(F, loss, sample_weight)


SigmoidBCELoss = SigmoidBinaryCrossEntropyLoss


class KLDivLoss(Loss):
    """Kullback-Leibler divergence ``sum(label * (log label - pred))`` with ``pred`` the
    log-probabilities (``from_logits=True``, the default) or scores to ``log_softmax``."""

    def __init__(self, from_logits: bool = True, axis: int = -1, weight: float | None = None,
                 batch_axis: int = 0, **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self._from_logits, self._axis = from_logits, axis

    def hybrid_forward(self, F: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:
        if not self._from_logits:
            pred = F.log_softmax(pred, axis=self._axis)
        loss = label * (F.log(label + 1e-12) - pred)
        return self._per_sample(F, self._weighted(F, loss, sample_weight), reduce="sum")


class CTCLoss(Loss):
    """Connectionist temporal classification (hybridlab/ops/ctc.py): ``pred`` in
    ``layout`` 'NTC' or 'TNC', labels in 'NT' or 'TN' padded with -1 (the blank is the
    last class), optional lengths per sample."""

    def __init__(self, layout: str = "NTC", label_layout: str = "NT",
                 weight: float | None = None, **kwargs: Any) -> None:
        if layout not in ("NTC", "TNC") or label_layout not in ("NT", "TN"):
            raise ValueError(f"CTCLoss: layout must be 'NTC' or 'TNC' and label_layout 'NT' "
                             f"or 'TN', got {layout!r} and {label_layout!r}")
        self._layout, self._label_layout = layout, label_layout
        super().__init__(weight, label_layout.find("N"), **kwargs)

    def hybrid_forward(self, F: Any, pred: Any, label: Any, pred_lengths: Any = None,
                       label_lengths: Any = None, sample_weight: Any = None) -> Any:
        if self._layout == "NTC":
            pred = F.swapaxes(pred, dim1=0, dim2=1)
        if self._batch_axis == 1:
            label = F.swapaxes(label, dim1=0, dim2=1)
        lengths = [x for x in (pred_lengths, label_lengths) if x is not None]
        loss = F.CTCLoss(pred, label, *lengths, use_data_lengths=pred_lengths is not None,
                         use_label_lengths=label_lengths is not None, blank_label="last")
        return self._weighted(F, loss, sample_weight)


class HuberLoss(Loss):
    """Squared error within ``rho`` of the label, absolute error beyond (smooth L1)."""

    def __init__(self, rho: float = 1, weight: float | None = None, batch_axis: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self._rho = rho

    def hybrid_forward(self, F: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:
        error = F.abs(_like(label, pred) - pred)
        loss = F.where(error > self._rho, error - 0.5 * self._rho,
                       (0.5 / self._rho) * F.square(error))
        return self._finish(F, loss, sample_weight)


class HingeLoss(Loss):
    """``max(0, margin - pred * label)`` for labels -1 and 1 (an SVM's loss)."""

    def __init__(self, margin: float = 1, weight: float | None = None, batch_axis: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self._margin = margin

    def hybrid_forward(self, F: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:
        return self._finish(F, F.relu(self._margin - pred * _like(label, pred)), sample_weight)


class SquaredHingeLoss(HingeLoss):
    """``max(0, margin - pred * label)**2``."""

    def hybrid_forward(self, F: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:
        hinge = F.relu(self._margin - pred * _like(label, pred))
        return self._finish(F, F.square(hinge), sample_weight)


class LogisticLoss(Loss):
    """``log(1 + exp(-pred * label))`` for labels in ``label_format`` 'signed' (-1/1) or
    'binary' (0/1)."""

    def __init__(self, weight: float | None = None, batch_axis: int = 0,
                 label_format: str = "signed", **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        if label_format not in ("signed", "binary"):
            raise ValueError(f"LogisticLoss: label_format is 'signed' or 'binary', got "
                             f"{label_format!r}")
        self._label_format = label_format

    def hybrid_forward(self, F: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:
        label = _like(label, pred)
        if self._label_format == "signed":
            label = (label + 1.0) / 2.0
        loss = F.relu(pred) - pred * label + _softplus_of_minus_abs(F, pred)
        return self._finish(F, loss, sample_weight)


class TripletLoss(Loss):
    """``max(0, |pred - positive|^2 - |pred - negative|^2 + margin)`` per sample."""

    def __init__(self, margin: float = 1, weight: float | None = None, batch_axis: int = 0,
                 **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self._margin = margin

    def hybrid_forward(self, F: Any, pred: Any, positive: Any, negative: Any) -> Any:
        gap = F.square(_like(positive, pred) - pred) - F.square(_like(negative, pred) - pred)
        loss = F.relu(self._per_sample(F, gap, reduce="sum") + self._margin)
        return self._weighted(F, loss, None)


class PoissonNLLLoss(Loss):
    """The negative log-likelihood of ``target`` counts under a Poisson of rate
    ``exp(pred)`` (``from_logits``) or ``pred``: one mean over every element;
    ``compute_full`` adds Stirling's term for targets above 1."""

    def __init__(self, weight: float | None = None, from_logits: bool = True,
                 batch_axis: int = 0, compute_full: bool = False, **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self._from_logits, self._compute_full = from_logits, compute_full

    def hybrid_forward(self, F: Any, pred: Any, target: Any, sample_weight: Any = None,
                       epsilon: float = 1e-08) -> Any:
        target = _like(target, pred)
        if self._from_logits:
            loss = F.exp(pred) - target * pred
        else:
            loss = pred - target * F.log(pred + epsilon)
        if self._compute_full:
            stirling = target * F.log(target) - target + 0.5 * F.log(2 * target * math.pi)
            loss = loss + stirling * (target > 1)
        return F.mean(self._weighted(F, loss, sample_weight))


class CosineEmbeddingLoss(Loss):
    """``1 - cos(a, b)`` for pairs labelled 1, ``max(0, cos(a, b) - margin)`` for -1: an
    (N, 1) column."""

    def __init__(self, weight: float | None = None, batch_axis: int = 0, margin: float = 0,
                 **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self._margin = margin

    def hybrid_forward(self, F: Any, input1: Any, input2: Any, label: Any,
                       sample_weight: Any = None) -> Any:
        input1 = _like(input1, input2)
        label = label.reshape((-1, 1))
        norms = F.norm(input1, axis=-1).reshape((-1, 1)) * F.norm(input2, axis=-1).reshape(
            (-1, 1))
        cosine = F.sum(input1 * input2, axis=-1).reshape((-1, 1)) / F.maximum(norms, 1e-12)
        similar = (1 - cosine) * (label == 1)
        different = F.relu((label == -1) * (cosine - self._margin))
        return self._weighted(F, similar + different, sample_weight)


class SDMLLoss(Loss):
    """Smoothed deep metric learning (Bonadiman et al.): each of ``x1`` should be nearest
    its own row of ``x2`` among the batch -- a KL divergence between the softmax of
    minus the squared distances and smoothed one-hot labels."""

    def __init__(self, smoothing_parameter: float = 0.3, weight: float = 1.0,
                 batch_axis: int = 0, **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self.kl_loss = KLDivLoss(from_logits=True)
        self.smoothing_parameter = smoothing_parameter

    def hybrid_forward(self, F: Any, x1: Any, x2: Any) -> Any:
        batch = x1.shape[0] if F is ndarray else x1._static_shape()[0]
        distances = F.sum(F.square(F.broadcast_sub(F.expand_dims(x1, axis=1),
                                                   F.expand_dims(x2, axis=0))), axis=2)
        gold = F.eye(batch)
        smooth = self.smoothing_parameter
        labels = gold * (1 - smooth) + (1 - gold) * smooth / (batch - 1)
        return self.kl_loss(F.log_softmax(-distances, axis=1), labels)
