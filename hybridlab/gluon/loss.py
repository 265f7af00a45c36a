"""Loss functions (``gluon.loss``): HybridBlocks from (prediction, label) to one loss per sample.

What this module teaches
------------------------
A loss is just another HybridBlock, so it is traced and compiled together with the
network when both are hybridized. Each loss returns a vector with one value per sample
(the mean over every axis except ``batch_axis``); ``loss.backward()`` then sums it,
and ``Trainer.step(batch_size)`` divides by the batch size.

Numerically stable forms are used on purpose: softmax cross-entropy goes through
``log_softmax`` (no ``log(softmax(x))`` underflow) and the sigmoid loss uses
``relu(x) - x*y + log(1 + exp(-|x|))`` (no ``exp`` overflow).
"""

from __future__ import annotations

from typing import Any

from hybridlab.gluon.block import HybridBlock


class Loss(HybridBlock):
    """Base class: ``weight`` scales the loss; ``batch_axis`` is the sample axis (0)."""

    def __init__(self, weight: float | None = None, batch_axis: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._weight, self._batch_axis = weight, batch_axis

    def _finish(self, F: Any, loss: Any, sample_weight: Any) -> Any:
        """Apply the weights, then average each sample's loss over its other axes."""
        if sample_weight is not None:
            loss = F.broadcast_mul(loss, sample_weight)
        if self._weight is not None:
            loss = loss * self._weight
        if self._batch_axis != 0:
            loss = F.swapaxes(loss, dim1=0, dim2=self._batch_axis)
        return F.mean(loss.reshape((0, -1)), axis=1)


class L2Loss(Loss):
    """``weight/2 * (pred - label)**2`` (MXNet's L2Loss includes the 1/2)."""

    def __init__(self, weight: float = 1.0, batch_axis: int = 0, **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)

    def hybrid_forward(self, F: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:
        loss = F.square(F.broadcast_sub(label.reshape_like(pred), pred)) * 0.5
        return self._finish(F, loss, sample_weight)


class L1Loss(Loss):
    """``weight * |pred - label|``."""

    def hybrid_forward(self, F: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:
        loss = F.abs(F.broadcast_sub(label.reshape_like(pred), pred))
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
            loss = -F.sum(pred * label.reshape_like(pred), axis=self._axis, keepdims=True)
        return self._finish(F, loss, sample_weight)


SoftmaxCELoss = SoftmaxCrossEntropyLoss


class SigmoidBinaryCrossEntropyLoss(Loss):
    """Binary cross-entropy on logits (or on probabilities with ``from_sigmoid=True``)."""

    def __init__(self, from_sigmoid: bool = False, weight: float | None = None,
                 batch_axis: int = 0, **kwargs: Any) -> None:
        super().__init__(weight, batch_axis, **kwargs)
        self._from_sigmoid = from_sigmoid

    def hybrid_forward(self, F: Any, pred: Any, label: Any, sample_weight: Any = None) -> Any:
        label = label.reshape_like(pred)
        if self._from_sigmoid:
            eps = 1e-12
            loss = -(F.log(pred + eps) * label + F.log(1.0 - pred + eps) * (1.0 - label))
        else:
            softplus = F.log(F.exp(-F.abs(pred)) + 1.0)
            loss = F.relu(pred) - pred * label + softplus
        return self._finish(F, loss, sample_weight)


SigmoidBCELoss = SigmoidBinaryCrossEntropyLoss
