"""mx.io's NDArrayIter and mx.metric's accumulators."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import hybridlab as mx
from hybridlab import nd


def _epoch(it):
    return [(b.data[0].asnumpy().tolist(), b.label[0].asnumpy().tolist() if b.label else None,
             b.pad) for b in it]


def test_ndarray_iter_pads_discards_or_rolls_over_the_last_batch():
    x, y = np.arange(10), np.arange(10) * 10
    padded = _epoch(mx.io.NDArrayIter(x, y, batch_size=4))
    assert padded[-1] == ([8, 9, 0, 1], [80, 90, 0, 10], 2)  # filled from the start
    assert len(_epoch(mx.io.NDArrayIter(x, y, batch_size=4, last_batch_handle="discard"))) == 2
    rolling = mx.io.NDArrayIter(x, batch_size=4, last_batch_handle="roll_over")
    first = _epoch(rolling)
    rolling.reset()
    second = _epoch(rolling)
    assert [b[0] for b in first] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert [b[0] for b in second] == [[8, 9, 0, 1], [2, 3, 4, 5], [6, 7, 8, 9]]


def test_ndarray_iter_describes_its_batches_and_shuffles_rows_together():
    np.random.seed(3)
    it = mx.io.NDArrayIter({"a": np.arange(6.0), "b": np.ones((6, 2))}, np.arange(6) * 2,
                           batch_size=3, shuffle=True, label_name="y")
    assert [(d.name, d.shape) for d in it.provide_data] == [("a", (3,)), ("b", (3, 2))]
    assert [(d.name, d.shape) for d in it.provide_label] == [("y", (3,))]
    rows = [(b.data[0].asnumpy(), b.label[0].asnumpy()) for b in it]
    seen = np.concatenate([r[0] for r in rows])
    assert sorted(seen.tolist()) == list(range(6)) and seen.tolist() != list(range(6))
    for data, label in rows:
        np.testing.assert_array_equal(label, data * 2)  # data and label stay paired
    with pytest.raises(ValueError, match="last_batch_handle='wrap'"):
        mx.io.NDArrayIter(np.arange(3), last_batch_handle="wrap")
    with pytest.raises(ValueError, match=r"has 6 samples but \[\('y', 2\)\] fewer"):
        mx.io.NDArrayIter(np.arange(6), np.arange(2), label_name="y")


def test_metrics_by_name_and_their_config_round_trip():
    for name, kwargs in [("acc", {"axis": 0}), ("f1", {}), ("mcc", {}), ("pearsonr", {}),
                         ("nll_loss", {}), ("ce", {}), ("top_k_acc", {"top_k": 2})]:
        metric = mx.metric.create(name, **kwargs)
        again = mx.metric.create(json.dumps(metric.get_config()))
        assert type(again) is type(metric) and again.get_config() == metric.get_config()
    with pytest.raises(ValueError, match="unknown metric 'accuracyy'"):
        mx.metric.create("accuracyy")


def test_accuracy_and_top_k_by_hand():
    pred = nd.array([[0.3, 0.7, 0.0], [0.5, 0.1, 0.4], [0.2, 0.3, 0.5]])
    label = nd.array([1, 2, 2])
    acc = mx.metric.Accuracy()
    acc.update([label], [pred])
    assert acc.get() == ("accuracy", 2 / 3)
    top2 = mx.metric.create("top_k_accuracy", top_k=2)
    top2.update([label], [pred])
    assert top2.get() == ("top_k_accuracy_2", 1.0)


def test_local_and_global_accumulators():
    metric = mx.metric.create("mae")
    metric.update([nd.array([1.0, 2.0])], [nd.array([1.5, 2.5])])
    metric.reset_local()
    metric.update([nd.array([0.0])], [nd.array([2.0])])
    assert metric.get() == ("mae", 2.0)  # since reset_local
    assert metric.get_global() == ("mae", 1.25)  # since reset: (0.5 + 2) / 2 updates
    metric.reset()
    assert math.isnan(metric.get()[1]) and math.isnan(metric.get_global()[1])


def test_f1_macro_averages_updates_and_micro_pools_them():
    batches = [([nd.array([1, 0])], [nd.array([[0.1, 0.9], [0.4, 0.6]])]),
               ([nd.array([1])], [nd.array([[0.3, 0.7]])])]
    macro, micro = mx.metric.F1(average="macro"), mx.metric.F1(average="micro")
    for labels, preds in batches:
        macro.update(labels, preds)
        micro.update(labels, preds)
    # batch 1: tp 1, fp 1 -> f1 2/3; batch 2: tp 1 -> f1 1; pooled: tp 2, fp 1 -> 4/5
    assert macro.get()[1] == pytest.approx((2 / 3 + 1) / 2)
    assert micro.get()[1] == pytest.approx(0.8) and micro.num_inst == 3


def test_perplexity_loss_pcc_and_a_custom_metric():
    perplexity = mx.metric.Perplexity(ignore_label=None)
    perplexity.update([nd.array([0, 1])], [nd.array([[0.5, 0.5], [0.2, 0.8]])])
    assert perplexity.get()[1] == pytest.approx(math.exp(-(math.log(0.5) + math.log(0.8)) / 2))
    loss = mx.metric.Loss()
    loss.update(None, nd.array([1.0, 3.0]))
    assert loss.get() == ("loss", 2.0)
    labels, preds = [nd.array([0, 0, 1, 1])], [nd.array([[1, 0], [0, 1], [0, 1], [0, 1]])]
    pcc, mcc = mx.metric.create("pcc"), mx.metric.create("mcc")
    pcc.update(labels, preds)
    mcc.update(labels, preds)
    assert pcc.get()[1] == pytest.approx(mcc.get()[1])  # two classes: the same number
    custom = mx.metric.np(lambda label, pred: float(np.abs(label - pred).max()), name="maxerr")
    custom.update([nd.array([1.0, 2.0])], [nd.array([1.0, 4.0])])
    assert custom.get() == ("maxerr", 2.0)


def test_a_composite_metric_reports_each():
    composite = mx.metric.create(["acc", "mse"])
    composite.update([nd.array([1.0, 0.0])], [nd.array([1.0, 1.0])])
    assert composite.get() == (["accuracy", "mse"], [0.5, 0.5])
