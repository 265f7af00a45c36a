"""Evaluation metrics (``mx.metric``): numbers that summarise predictions against labels.

What this module teaches
------------------------
A metric is an accumulator: ``update(labels, preds)`` after every batch adds to a sum and
a count (``sum_metric``, ``num_inst``), and ``get()`` returns ``(name, sum / count)`` --
the mean over everything seen since the last ``reset()``. Metrics read values, so an
update is a sync point: it waits for the predictions (``asnumpy``).

Each metric keeps two accumulators, as MXNet's do: the *local* one, which
``reset_local()`` clears (a training loop prints the accuracy of the last few batches),
and the *global* one (``get_global()``), which only ``reset()`` clears (the whole epoch).

``mx.metric.create('acc')`` finds a metric by name or alias (``'ce'``, ``'nll_loss'``,
``'pearsonr'``...), a list makes a :class:`CompositeEvalMetric`, a function a
:class:`CustomMetric`; ``create(json.dumps(m.get_config()))`` makes ``m`` again.

Two families differ in how they average: ``F1``, ``MCC`` and ``PearsonCorrelation``
with ``average='macro'`` compute the score of each ``update`` call and average those;
with ``'micro'`` they pool the counts of every call and score once. ``PCC`` keeps a
confusion matrix of any number of classes and scores it as a multi-class MCC.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from typing import Any, Callable

import numpy

from hybridlab import ndarray as nd

_REGISTRY: dict[str, type] = {}


def register(klass: type) -> type:
    """``@mx.metric.register``: ``create`` finds the class by its lower-case name."""
    _REGISTRY[klass.__name__.lower()] = klass
    return klass


def alias(*names: str) -> Callable[[type], type]:
    """``@mx.metric.alias('acc')``: more names for ``create``."""
    def decorate(klass: type) -> type:
        for name in names:
            _REGISTRY[name.lower()] = klass
        return klass

    return decorate


def create(metric: Any, *args: Any, **kwargs: Any) -> EvalMetric:
    """A metric from a name (or alias), a metric, a function, a list, a config dict or its
    JSON (``get_config``'s)."""
    if isinstance(metric, EvalMetric):
        if args or kwargs:
            raise ValueError(f"create: {metric!r} is already a metric; extra arguments are "
                             f"not accepted")
        return metric
    if callable(metric):
        return CustomMetric(metric, *args, **kwargs)
    if isinstance(metric, list):
        return CompositeEvalMetric([create(m, *args, **kwargs) for m in metric])
    if isinstance(metric, dict):
        return create(**metric)
    if not isinstance(metric, str):
        raise TypeError(f"create: a metric is a name such as 'acc', a function, a list or "
                        f"a config, got {metric!r}")
    if metric.startswith("["):
        name, config = json.loads(metric)
        return create(name, **config)
    if metric.startswith("{"):
        return create(**json.loads(metric))
    found = _REGISTRY.get(metric.lower())
    if found is None:
        raise ValueError(f"unknown metric {metric!r}; known: {sorted(_REGISTRY)}")
    made: EvalMetric = found(*args, **kwargs)
    return made


def check_label_shapes(labels: Any, preds: Any, wrap: bool = False, shape: bool = False
                       ) -> tuple[Any, Any]:
    """Raise unless there are as many labels as predictions (or, with ``shape``, the two
    arrays have one shape); with ``wrap`` one NDArray becomes a list of one."""
    got = (labels.shape, preds.shape) if shape else (len(labels), len(preds))
    if got[0] != got[1]:
        raise ValueError(f"Shape of labels {got[0]} does not match shape of predictions "
                         f"{got[1]}")
    if wrap:
        labels = [labels] if isinstance(labels, nd.NDArray) else labels
        preds = [preds] if isinstance(preds, nd.NDArray) else preds
    return labels, preds


class EvalMetric:
    """The base of every metric: a local and a global sum and count."""

    def __init__(self, name: str, output_names: Any = None, label_names: Any = None,
                 **kwargs: Any) -> None:
        self.name = str(name)
        self.output_names, self.label_names = output_names, label_names
        self._has_global_stats = kwargs.pop("has_global_stats", False)
        self._kwargs = kwargs  # (the constructor's arguments: get_config)
        self.reset()

    def __str__(self) -> str:
        return f"EvalMetric: {dict(self.get_name_value())}"

    def get_config(self) -> dict[str, Any]:
        """What ``create`` needs to make this metric again (JSON-serialisable)."""
        return {**self._kwargs, "metric": type(self).__name__, "name": self.name,
                "output_names": self.output_names, "label_names": self.label_names}

    def update_dict(self, label: dict, pred: dict) -> None:
        """``update`` with dicts by name (``output_names``/``label_names`` pick them)."""
        preds = [pred[n] for n in self.output_names] if self.output_names is not None \
            else list(pred.values())
        labels = [label[n] for n in self.label_names] if self.label_names is not None \
            else list(label.values())
        self.update(labels, preds)

    def update(self, labels: Any, preds: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define update(labels, preds)")

    def _add(self, total: float, count: float) -> None:
        self.sum_metric += total
        self.global_sum_metric += total
        self.num_inst += count
        self.global_num_inst += count

    def reset(self) -> None:
        self.reset_local()
        self.global_num_inst: Any = 0
        self.global_sum_metric: Any = 0.0

    def reset_local(self) -> None:
        self.num_inst: Any = 0
        self.sum_metric: Any = 0.0

    def _value(self, total: float, count: float) -> float:
        return float("nan") if count == 0 else total / count

    def get(self) -> tuple[Any, Any]:
        return self.name, self._value(self.sum_metric, self.num_inst)

    def get_global(self) -> tuple[Any, Any]:
        if not self._has_global_stats:
            return self.get()
        return self.name, self._value(self.global_sum_metric, self.global_num_inst)

    @staticmethod
    def _pairs(name: Any, value: Any) -> list[tuple[Any, Any]]:
        names = name if isinstance(name, list) else [name]
        return list(zip(names, value if isinstance(value, list) else [value]))

    def get_name_value(self) -> list[tuple[Any, Any]]:
        return self._pairs(*self.get())

    def get_global_name_value(self) -> list[tuple[Any, Any]]:
        return self._pairs(*self.get_global())


@register
@alias("composite")
class CompositeEvalMetric(EvalMetric):
    """Several metrics updated together; ``get`` gives their names and values as lists."""

    def __init__(self, metrics: list | None = None, name: str = "composite",
                 output_names: Any = None, label_names: Any = None) -> None:
        self.metrics: list[EvalMetric] = [create(m) for m in (metrics or [])]
        super().__init__(name, output_names, label_names, has_global_stats=True)

    def add(self, metric: Any) -> None:
        self.metrics.append(create(metric))

    def get_metric(self, index: int) -> EvalMetric:
        if not 0 <= index < len(self.metrics):
            raise ValueError(f"metric index {index} is out of range 0..{len(self.metrics)}")
        return self.metrics[index]

    def update_dict(self, labels: dict, preds: dict) -> None:
        if self.label_names is not None:
            labels = OrderedDict((k, v) for k, v in labels.items() if k in self.label_names)
        if self.output_names is not None:
            preds = OrderedDict((k, v) for k, v in preds.items() if k in self.output_names)
        for metric in self.metrics:
            metric.update_dict(labels, preds)

    def update(self, labels: Any, preds: Any) -> None:
        for metric in self.metrics:
            metric.update(labels, preds)

    def reset(self) -> None:
        for metric in getattr(self, "metrics", []):
            metric.reset()

    def reset_local(self) -> None:
        for metric in getattr(self, "metrics", []):
            metric.reset_local()

    def _joined(self, results: list[tuple[Any, Any]]) -> tuple[list, list]:
        names: list = []
        values: list = []
        for name, value in results:
            names += name if isinstance(name, list) else [name]
            values += value if isinstance(value, list) else [value]
        return names, values

    def get(self) -> tuple[Any, Any]:
        return self._joined([m.get() for m in self.metrics])

    def get_global(self) -> tuple[Any, Any]:
        return self._joined([m.get_global() for m in self.metrics])

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "metrics": [m.get_config() for m in self.metrics]}


def _pairs_of(labels: Any, preds: Any) -> list[tuple[numpy.ndarray, numpy.ndarray]]:
    """The (label, prediction) pairs of an update, as numpy arrays (a sync point)."""
    labels, preds = check_label_shapes(labels, preds, True)
    return [(label.asnumpy(), pred.asnumpy()) for label, pred in zip(labels, preds)]


@register
@alias("acc")
class Accuracy(EvalMetric):
    """The fraction of samples whose predicted class (the ``argmax`` along ``axis``, unless
    the prediction already has the label's shape) equals the label."""

    def __init__(self, axis: int = 1, name: str = "accuracy", output_names: Any = None,
                 label_names: Any = None) -> None:
        super().__init__(name, output_names, label_names, axis=axis, has_global_stats=True)
        self.axis = axis

    def update(self, labels: Any, preds: Any) -> None:
        for label, pred in _pairs_of(labels, preds):
            if pred.shape != label.shape:
                pred = pred.argmax(axis=self.axis)
            label, pred = label.astype("int32").ravel(), pred.astype("int32").ravel()
            check_label_shapes(label, pred)
            self._add(int((pred == label).sum()), len(pred))


@register
@alias("top_k_accuracy", "top_k_acc")
class TopKAccuracy(EvalMetric):
    """The fraction of samples whose label is among the ``top_k`` highest scores."""

    def __init__(self, top_k: int = 1, name: str = "top_k_accuracy", output_names: Any = None,
                 label_names: Any = None) -> None:
        super().__init__(name, output_names, label_names, top_k=top_k, has_global_stats=True)
        if top_k <= 1:
            raise ValueError("TopKAccuracy: top_k must be more than 1 (use Accuracy for 1)")
        self.top_k = top_k
        if not self.name.endswith(f"_{top_k}"):  # (a config made again keeps its name)
            self.name += f"_{top_k}"

    def update(self, labels: Any, preds: Any) -> None:
        for label, pred in _pairs_of(labels, preds):
            if pred.ndim > 2:
                raise ValueError(f"TopKAccuracy: predictions of at most 2 dimensions, got "
                                 f"{pred.shape}")
            label = label.astype("int32").ravel()
            if pred.ndim == 1:
                hits = int((pred.astype("int32") == label).sum())
            else:
                top = numpy.argsort(pred.astype("float32"), axis=1)[:, -self.top_k:]
                hits = int((top == label[:, None]).any(axis=1).sum())
            self._add(hits, len(label))


class _Confusion:
    """True/false positives/negatives of a binary classifier, local and global."""

    def __init__(self) -> None:
        self.local = numpy.zeros(4, numpy.int64)  # tp, fp, fn, tn
        self.overall = numpy.zeros(4, numpy.int64)

    def add(self, label: numpy.ndarray, pred: numpy.ndarray) -> None:
        check_label_shapes(label, pred)
        label = label.astype("int32")
        if len(numpy.unique(label)) > 2:
            raise ValueError("F1 and MCC are for binary classification (labels 0 and 1)")
        said, truth = pred.argmax(axis=1) == 1, label == 1
        counts = numpy.array([(said & truth).sum(), (said & ~truth).sum(),
                           (~said & truth).sum(), (~said & ~truth).sum()])
        self.local += counts
        self.overall += counts

    @staticmethod
    def fscore(counts: numpy.ndarray) -> float:
        tp, fp, fn, _ = (float(c) for c in counts)
        precision = tp / (tp + fp) if tp + fp > 0 else 0.0
        recall = tp / (tp + fn) if tp + fn > 0 else 0.0
        total = precision + recall
        return 2 * precision * recall / total if total > 0 else 0.0

    @staticmethod
    def mcc(counts: numpy.ndarray) -> float:
        if not counts.sum():
            return 0.0
        tp, fp, fn, tn = (float(c) for c in counts)
        denominator = math.prod(t for t in (tp + fp, tp + fn, tn + fp, tn + fn) if t != 0)
        return (tp * tn - fp * fn) / math.sqrt(denominator)


class _BinaryScore(EvalMetric):
    """F1 and MCC: a score of the confusion counts, averaged per update (``'macro'``) or
    of all the counts pooled (``'micro'``)."""

    score: Callable[[numpy.ndarray], float]

    def __init__(self, name: str, output_names: Any, label_names: Any, average: str) -> None:
        if average not in ("macro", "micro"):
            raise ValueError(f"{type(self).__name__}: average={average!r}; use 'macro' or "
                             f"'micro'")
        self.average, self._counts = average, _Confusion()
        super().__init__(name, output_names, label_names, has_global_stats=True)

    def update(self, labels: Any, preds: Any) -> None:
        for label, pred in _pairs_of(labels, preds):
            self._counts.add(label, pred)
        local, overall = self._counts.local, self._counts.overall
        if self.average == "macro":
            self._add(self.score(local), 1)  # (and the global sum: the same update's score)
            self._counts = _Confusion()
        else:
            self.sum_metric, self.num_inst = self.score(local) * local.sum(), int(local.sum())
            self.global_sum_metric = self.score(overall) * overall.sum()
            self.global_num_inst = int(overall.sum())

    def reset(self) -> None:
        super().reset()
        self._counts = _Confusion()

    def reset_local(self) -> None:
        super().reset_local()
        if hasattr(self, "_counts"):
            self._counts.local[:] = 0


@register
class F1(_BinaryScore):
    """The F1 score ``2 * precision * recall / (precision + recall)`` (binary labels)."""

    score = staticmethod(_Confusion.fscore)

    def __init__(self, name: str = "f1", output_names: Any = None, label_names: Any = None,
                 average: str = "macro") -> None:
        super().__init__(name, output_names, label_names, average)


@register
class MCC(_BinaryScore):
    """Matthews' correlation coefficient of a binary classifier."""

    score = staticmethod(_Confusion.mcc)

    def __init__(self, name: str = "mcc", output_names: Any = None, label_names: Any = None,
                 average: str = "macro") -> None:
        super().__init__(name, output_names, label_names, average)


@register
class Perplexity(EvalMetric):
    """``exp(mean(-log p(label)))``; labels equal to ``ignore_label`` are not counted."""

    def __init__(self, ignore_label: Any, axis: int = -1, name: str = "perplexity",
                 output_names: Any = None, label_names: Any = None) -> None:
        super().__init__(name, output_names, label_names, ignore_label=ignore_label,
                         has_global_stats=True)
        self.ignore_label, self.axis = ignore_label, axis

    def update(self, labels: Any, preds: Any) -> None:
        if len(labels) != len(preds):
            raise ValueError(f"Perplexity: {len(labels)} labels for {len(preds)} predictions")
        loss, count = 0.0, 0
        for label, pred in zip(labels, preds):
            if label.size != pred.size // pred.shape[-1]:
                raise ValueError(f"Perplexity: shape mismatch: {label.shape} vs {pred.shape}")
            label = label.as_in_context(pred.context).reshape((label.size,))
            picked = nd.pick(pred, label.astype("int32"), axis=self.axis)
            if self.ignore_label is not None:
                ignore = (label == self.ignore_label).astype(picked.dtype)
                count -= int(nd.sum(ignore).asscalar())
                picked = picked * (1 - ignore) + ignore
            loss -= float(nd.sum(nd.log(nd.maximum(1e-10, picked))).asscalar())
            count += picked.size
        self._add(loss, count)

    def _value(self, total: float, count: float) -> float:
        return float("nan") if count == 0 else math.exp(total / count)


def _columns(label: numpy.ndarray, pred: numpy.ndarray) -> tuple[numpy.ndarray, numpy.ndarray]:
    """A 1-D label or prediction as a column (MAE/MSE/RMSE compare (N, 1) arrays)."""
    return (label.reshape(-1, 1) if label.ndim == 1 else label,
            pred.reshape(-1, 1) if pred.ndim == 1 else pred)


class _Regression(EvalMetric):
    """The mean over updates of ``error(label, pred)`` of each pair."""

    def __init__(self, name: str, output_names: Any, label_names: Any) -> None:
        super().__init__(name, output_names, label_names, has_global_stats=True)

    def error(self, label: numpy.ndarray, pred: numpy.ndarray) -> float:
        raise NotImplementedError

    def update(self, labels: Any, preds: Any) -> None:
        for label, pred in _pairs_of(labels, preds):
            self._add(self.error(*_columns(label, pred)), 1)


@register
class MAE(_Regression):
    """Mean absolute error."""

    def __init__(self, name: str = "mae", output_names: Any = None,
                 label_names: Any = None) -> None:
        super().__init__(name, output_names, label_names)

    def error(self, label: numpy.ndarray, pred: numpy.ndarray) -> float:
        return float(numpy.abs(label - pred).mean())


@register
class MSE(_Regression):
    """Mean squared error."""

    def __init__(self, name: str = "mse", output_names: Any = None,
                 label_names: Any = None) -> None:
        super().__init__(name, output_names, label_names)

    def error(self, label: numpy.ndarray, pred: numpy.ndarray) -> float:
        return float(((label - pred) ** 2.0).mean())


@register
class RMSE(_Regression):
    """Root mean squared error (of each update, then averaged)."""

    def __init__(self, name: str = "rmse", output_names: Any = None,
                 label_names: Any = None) -> None:
        super().__init__(name, output_names, label_names)

    def error(self, label: numpy.ndarray, pred: numpy.ndarray) -> float:
        return float(numpy.sqrt(((label - pred) ** 2.0).mean()))


class _PickedLog(EvalMetric):
    """``-log(p(label) + eps)`` summed over samples: predictions are probabilities."""

    def __init__(self, eps: float, name: str, output_names: Any, label_names: Any) -> None:
        super().__init__(name, output_names, label_names, eps=eps, has_global_stats=True)
        self.eps = eps

    def update(self, labels: Any, preds: Any) -> None:
        for label, pred in _pairs_of(labels, preds):
            label = label.ravel()
            if label.shape[0] != pred.shape[0]:
                raise ValueError(f"{type(self).__name__}: {label.shape[0]} labels for "
                                 f"{pred.shape[0]} predictions")
            prob = pred[numpy.arange(label.shape[0]), numpy.int64(label)]
            self._add(float((-numpy.log(prob + self.eps)).sum()), label.shape[0])


@register
@alias("ce")
class CrossEntropy(_PickedLog):
    """Cross-entropy of probabilities (after a softmax) against class labels."""

    def __init__(self, eps: float = 1e-12, name: str = "cross-entropy",
                 output_names: Any = None, label_names: Any = None) -> None:
        super().__init__(eps, name, output_names, label_names)


@register
@alias("nll_loss")
class NegativeLogLikelihood(_PickedLog):
    """Negative log-likelihood of the labels under the predicted probabilities."""

    def __init__(self, eps: float = 1e-12, name: str = "nll-loss",
                 output_names: Any = None, label_names: Any = None) -> None:
        super().__init__(eps, name, output_names, label_names)


@register
@alias("pearsonr")
class PearsonCorrelation(EvalMetric):
    """Pearson's correlation of predictions and labels: of each update averaged
    (``'macro'``), or of everything seen, from running means and sums of squares
    (``'micro'``, Welford's update)."""

    def __init__(self, name: str = "pearsonr", output_names: Any = None,
                 label_names: Any = None, average: str = "macro") -> None:
        self.average = average
        super().__init__(name, output_names, label_names, has_global_stats=True)

    def reset(self) -> None:
        super().reset()
        self._moments: dict[str, Any] = {"n": 0, "mean_l": 0.0, "mean_p": 0.0, "sse_l": 0.0,
                                         "sse_p": 0.0, "cov": 0.0}

    @staticmethod
    def _welford(values: numpy.ndarray, count: int, mean: float, sse: float
                 ) -> tuple[int, float, float]:
        count += len(values)
        delta = values - mean
        mean += float(numpy.sum(delta / count))
        sse += float(numpy.sum(delta * (values - mean)))
        return count, mean, sse

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            check_label_shapes(label, pred, False, True)
            label = label.asnumpy().ravel().astype(numpy.float64)
            pred = pred.asnumpy().ravel().astype(numpy.float64)
            if self.average == "macro":
                self._add(float(numpy.corrcoef(pred, label)[0, 1]), 1)
                continue
            self._add(0.0, 1)
            m = self._moments
            n, m["mean_l"], m["sse_l"] = self._welford(label, m["n"], m["mean_l"], m["sse_l"])
            m["cov"] += float(numpy.sum((label - m["mean_l"]) * (pred - m["mean_p"])))
            m["n"], m["mean_p"], m["sse_p"] = self._welford(pred, m["n"], m["mean_p"],
                                                            m["sse_p"])

    def get(self) -> tuple[Any, Any]:
        if self.num_inst == 0 or self.average == "macro":
            return super().get()
        m = self._moments
        n = m["n"]
        return self.name, m["cov"] / ((n - 1) * numpy.sqrt(m["sse_p"] / (n - 1))
                                      * numpy.sqrt(m["sse_l"] / (n - 1)))


@register
class PCC(EvalMetric):
    """The multi-class Matthews correlation of a confusion matrix (rows: predicted class,
    columns: label), which grows as new classes appear; equal to MCC for two classes."""

    lcm: numpy.ndarray  # the confusion matrix since reset_local() (rows: predicted class)
    gcm: numpy.ndarray  # ... since reset()

    def __init__(self, name: str = "pcc", output_names: Any = None, label_names: Any = None,
                 has_global_stats: bool = True) -> None:
        self.k = 2
        super().__init__(name, output_names, label_names, has_global_stats=has_global_stats)

    @staticmethod
    def _mcc(matrix: numpy.ndarray) -> float:
        n, x, y = matrix.sum(), matrix.sum(axis=1), matrix.sum(axis=0)
        cov_xx, cov_yy = numpy.sum(x * (n - x)), numpy.sum(y * (n - y))
        if cov_xx == 0 or cov_yy == 0:
            return float("nan")
        return float(numpy.sum(matrix.diagonal() * n - x * y) / (cov_xx * cov_yy) ** 0.5)

    def update(self, labels: Any, preds: Any) -> None:
        for label, pred in _pairs_of(labels, preds):
            label = label.astype("int32")
            pred = pred.argmax(axis=1) if pred.shape != label.shape else pred.astype("int32")
            grow = max(int(pred.max()), int(label.max())) + 1 - self.k
            if grow > 0:
                self.lcm, self.gcm = (numpy.pad(m, ((0, grow), (0, grow))) for m in (self.lcm,
                                                                                   self.gcm))
                self.k += grow
            batch = numpy.zeros((self.k, self.k))
            numpy.add.at(batch, (pred, label), 1)
            self.lcm += batch
            self.gcm += batch
        self.num_inst += 1
        self.global_num_inst += 1

    @property  # type: ignore[override]
    def sum_metric(self) -> float:
        return self._mcc(self.lcm) * self.num_inst

    @sum_metric.setter
    def sum_metric(self, value: float) -> None:
        """(The confusion matrix is the state; the sum follows from it.)"""

    @property  # type: ignore[override]
    def global_sum_metric(self) -> float:
        return self._mcc(self.gcm) * self.global_num_inst

    @global_sum_metric.setter
    def global_sum_metric(self, value: float) -> None:
        """(As ``sum_metric``.)"""

    def reset(self) -> None:
        super().reset()
        self.gcm = numpy.zeros((self.k, self.k))

    def reset_local(self) -> None:
        super().reset_local()
        self.lcm = numpy.zeros((self.k, self.k))


@register
class Loss(EvalMetric):
    """The mean of the predictions themselves: for a network whose output is its loss
    (``sym.make_loss``); labels are ignored."""

    def __init__(self, name: str = "loss", output_names: Any = None,
                 label_names: Any = None) -> None:
        super().__init__(name, output_names, label_names, has_global_stats=True)

    def update(self, _: Any, preds: Any) -> None:
        for pred in [preds] if isinstance(preds, nd.NDArray) else preds:
            self._add(float(nd.sum(pred).asscalar()), pred.size)


@register
class Torch(Loss):
    """MXNet's name for a Loss of a Torch module's output."""

    def __init__(self, name: str = "torch", output_names: Any = None,
                 label_names: Any = None) -> None:
        super().__init__(name, output_names, label_names)


@register
class Caffe(Loss):
    """MXNet's name for a Loss of a Caffe operator's output."""

    def __init__(self, name: str = "caffe", output_names: Any = None,
                 label_names: Any = None) -> None:
        super().__init__(name, output_names, label_names)


@register
class CustomMetric(EvalMetric):
    """``feval(label, pred)`` on numpy arrays, averaged over pairs; a ``(sum, count)``
    tuple it returns is added as it is."""

    def __init__(self, feval: Callable[..., Any], name: str | None = None,
                 allow_extra_outputs: bool = False, output_names: Any = None,
                 label_names: Any = None) -> None:
        if name is None:
            name = feval.__name__
            name = f"custom({name})" if "<" in name else name
        super().__init__(name, output_names, label_names, feval=feval,
                         allow_extra_outputs=allow_extra_outputs, has_global_stats=True)
        self._feval, self._allow_extra_outputs = feval, allow_extra_outputs

    def update(self, labels: Any, preds: Any) -> None:
        if not self._allow_extra_outputs:
            labels, preds = check_label_shapes(labels, preds, True)
        for pred, label in zip(preds, labels):
            value = self._feval(label.asnumpy(), pred.asnumpy())
            total, count = value if isinstance(value, tuple) else (value, 1)
            self._add(total, count)

    def get_config(self) -> dict[str, Any]:
        raise NotImplementedError("a CustomMetric holds a Python function: it has no config")


def np(numpy_feval: Callable[..., Any], name: str | None = None,
       allow_extra_outputs: bool = False) -> CustomMetric:
    """``mx.metric.np(f)``: a :class:`CustomMetric` of a function on numpy arrays."""
    def feval(label: Any, pred: Any) -> Any:
        return numpy_feval(label, pred)

    feval.__name__ = numpy_feval.__name__
    return CustomMetric(feval, name, allow_extra_outputs)

