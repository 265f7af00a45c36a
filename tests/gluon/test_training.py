"""Training end to end: the digits MLP learns, and imperative == hybridized step by step."""

import numpy as np
import pytest

import hybridlab as mx
from hybridlab import autograd, gluon, nd
from hybridlab.gluon import nn

pytest.importorskip("sklearn")


def train_digits(hybridize, epochs=4, optimizer="sgd"):
    mx.random.seed(7)
    np.random.seed(7)
    train, test = gluon.data.load_digits()
    net = nn.HybridSequential()
    net.add(nn.Dense(64, activation="relu"), nn.Dense(10))
    net.initialize(mx.init.Xavier())
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    if hybridize:
        net.hybridize()
        loss_fn.hybridize()
    params = {"learning_rate": 0.1, "momentum": 0.9} if optimizer == "sgd" \
        else {"learning_rate": 0.01}
    trainer = gluon.Trainer(net.collect_params(), optimizer, params)
    losses = []
    for _ in range(epochs):
        for data, label in gluon.data.DataLoader(train, batch_size=32, shuffle=True):
            with autograd.record():
                loss = loss_fn(net(data), label)
            loss.backward()
            trainer.step(data.shape[0])
            losses.append(loss.mean().asscalar())
    images, labels = test[:]
    predicted = net(nd.array(images)).argmax(axis=1).asnumpy()
    return np.array(losses), float((predicted == labels).mean())


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_digits_mlp_learns_in_both_modes_with_the_same_losses(optimizer):
    imperative_losses, imperative_accuracy = train_digits(False, optimizer=optimizer)
    hybrid_losses, hybrid_accuracy = train_digits(True, optimizer=optimizer)
    assert imperative_accuracy >= 0.9 and hybrid_accuracy >= 0.9
    assert imperative_losses[-20:].mean() < imperative_losses[:20].mean() / 3
    np.testing.assert_allclose(hybrid_losses, imperative_losses, rtol=1e-3, atol=1e-4)


def test_losses_match_their_formulas():
    pred = nd.array([[0.5, -1.0], [2.0, 0.0]])
    label = nd.array([[1.0, 0.0], [0.0, 0.0]])
    p, y = pred.asnumpy(), label.asnumpy()
    np.testing.assert_allclose(gluon.loss.L2Loss()(pred, label).asnumpy(),
                               ((p - y) ** 2 / 2).mean(axis=1), rtol=1e-6)
    np.testing.assert_allclose(gluon.loss.L1Loss()(pred, label).asnumpy(),
                               np.abs(p - y).mean(axis=1), rtol=1e-6)
    bce = np.maximum(p, 0) - p * y + np.log1p(np.exp(-np.abs(p)))
    np.testing.assert_allclose(gluon.loss.SigmoidBinaryCrossEntropyLoss()(pred, label).asnumpy(),
                               bce.mean(axis=1), rtol=1e-5)
    classes = nd.array([0.0, 1.0])
    log_softmax = p - np.log(np.exp(p).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(gluon.loss.SoftmaxCrossEntropyLoss()(pred, classes).asnumpy(),
                               -log_softmax[[0, 1], [0, 1]], rtol=1e-5)


def test_trainer_sgd_step_matches_the_update_rule():
    param = gluon.Parameter("w", shape=(2,))
    param.initialize(mx.init.One())
    trainer = gluon.Trainer([param], "sgd", {"learning_rate": 0.5, "wd": 0.1})
    with autograd.record():
        loss = (param.data() * nd.array([2.0, 4.0])).sum()
    loss.backward()
    trainer.step(2)
    np.testing.assert_allclose(param.data().asnumpy(), 1 - 0.5 * (np.array([1.0, 2.0]) + 0.1),
                               rtol=1e-6, atol=1e-7)


def test_trainer_rejects_unknown_optimizer_parameters():
    with pytest.raises(ValueError, match="momentum"):
        gluon.Trainer([], "adam", {"momentum": 0.9})


def test_dataloader_batches_and_shuffles():
    data = gluon.data.ArrayDataset(np.arange(10, dtype="float32"), np.arange(10) * 2)
    batches = list(gluon.data.DataLoader(data, batch_size=4))
    assert [b[0].shape for b in batches] == [(4,), (4,), (2,)]
    np.testing.assert_array_equal(batches[1][1].asnumpy(), [8, 10, 12, 14])
    shuffled = np.concatenate([b[0].asnumpy() for b in gluon.data.DataLoader(
        data, batch_size=3, shuffle=True)])
    assert sorted(shuffled) == list(range(10)) and list(shuffled) != list(range(10))
    assert len(gluon.data.DataLoader(data, batch_size=4, last_batch="discard")) == 2


def test_digits_without_scikit_learn_says_how_to_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(ImportError, match="pip install scikit-learn"):
        gluon.data.load_digits()


def test_digits_split_is_fixed_and_scaled():
    train, test = gluon.data.load_digits()
    assert len(train) + len(test) == 1797 and len(test) == 450
    image, label = train[0]
    assert image.shape == (64,) and image.dtype == np.float32 and 0 <= image.min() <= 1
    assert train[0][1] == gluon.data.load_digits()[0][0][1] and 0 <= label <= 9
