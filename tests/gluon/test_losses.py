"""gluon.loss: every loss of MXNet 1.9.1 against numpy, hybridized == imperative, and the
CTC operator against central differences."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hybridlab import autograd, gluon, nd
from hybridlab.gluon import loss as L

RNG = np.random.default_rng(0)
P = RNG.normal(size=(4, 3)).astype(np.float32)
Y = RNG.normal(size=(4, 3)).astype(np.float32)
SIGNS = np.sign(RNG.normal(size=(4, 3))).astype(np.float32)


def _softplus(x):
    return np.log1p(np.exp(x))


CASES = [  # (loss, inputs, numpy reference per sample)
    (L.HuberLoss(rho=0.5), [P, Y], lambda p, y: np.where(
        np.abs(p - y) > 0.5, np.abs(p - y) - 0.25, np.square(p - y)).mean(axis=1)),
    (L.HingeLoss(), [P, SIGNS], lambda p, y: np.maximum(0, 1 - p * y).mean(axis=1)),
    (L.SquaredHingeLoss(margin=2), [P, SIGNS],
     lambda p, y: np.square(np.maximum(0, 2 - p * y)).mean(axis=1)),
    (L.LogisticLoss(), [P, SIGNS], lambda p, y: _softplus(-p * y).mean(axis=1)),
    (L.LogisticLoss(label_format="binary"), [P, (SIGNS > 0).astype(np.float32)],
     lambda p, y: _softplus(-p * (2 * y - 1)).mean(axis=1)),
    (L.KLDivLoss(from_logits=False), [P, np.abs(Y) / np.abs(Y).sum(1, keepdims=True)],
     lambda p, y: (y * (np.log(y + 1e-12) - (p - np.log(np.exp(p).sum(1, keepdims=True))))
                   ).sum(axis=1)),
    (L.TripletLoss(margin=0.5), [P, Y, -Y], lambda p, a, b: np.maximum(
        0, ((a - p) ** 2 - (b - p) ** 2).sum(axis=1) + 0.5)),
    (L.PoissonNLLLoss(), [P, np.abs(Y)], lambda p, t: (np.exp(p) - t * p).mean()),
    (L.SigmoidBCELoss(), [P, (SIGNS > 0).astype(np.float32), None, np.full((3,), 2.0,
                                                                           np.float32)],
     lambda p, y, _, w: (-(w * y * np.log(1 / (1 + np.exp(-p)))
                           + (1 - y) * np.log(1 - 1 / (1 + np.exp(-p))))).mean(axis=1)),
    (L.CosineEmbeddingLoss(margin=0.1), [P, Y, np.array([1, -1, 1, -1], np.float32)],
     lambda a, b, label: np.where(
         label[:, None] == 1, 1 - _cosine(a, b), np.maximum(0, _cosine(a, b) - 0.1))),
]


def _cosine(a, b):
    return ((a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)))[:, None]


@pytest.mark.parametrize("loss, inputs, reference", CASES,
                         ids=[type(c[0]).__name__ for c in CASES])
def test_loss_matches_numpy_imperative_and_hybridized(loss, inputs, reference):
    arrays = [None if a is None else nd.array(a) for a in inputs]
    expected = reference(*[a for a in inputs])
    got = loss(*arrays).asnumpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    loss.hybridize()
    np.testing.assert_allclose(loss(*arrays).asnumpy(), expected, rtol=1e-5, atol=1e-6)


def test_sample_weight_and_weight_scale_each_element():
    loss = L.L1Loss(weight=2.0)
    got = loss(nd.array(P), nd.array(Y), nd.array([[1.0], [0.0], [1.0], [0.0]])).asnumpy()
    np.testing.assert_allclose(got, 2 * np.abs(P - Y).mean(1) * [1, 0, 1, 0], rtol=1e-6)


def test_sdml_loss_is_smallest_for_matching_rows():
    x = RNG.normal(size=(5, 4)).astype(np.float32)
    sdml = L.SDMLLoss()
    matched = sdml(nd.array(x), nd.array(x)).asnumpy()
    shuffled = sdml(nd.array(x), nd.array(x[::-1].copy())).asnumpy()
    assert matched.shape == (5,) and matched.sum() < shuffled.sum()


def test_ctc_loss_by_hand_and_its_gradient():
    """Two steps of uniform scores over {a, blank}: the paths reading "a" are aa, a_, _a,
    each of probability 1/4, so the loss is -log(3/4). The gradient against central
    differences, with lengths given per sample."""
    ctc = L.CTCLoss(layout="TNC")
    got = ctc(nd.zeros((2, 1, 2)), nd.array([[0, -1]])).asnumpy()
    np.testing.assert_allclose(got, [-math.log(0.75)], rtol=1e-6)
    data = RNG.normal(size=(6, 2, 4))
    label, lengths = np.array([[1, 2, 2], [0, 3, 0]]), np.array([6, 4])

    def loss_of(d):
        return nd.CTCLoss(nd.array(d, dtype="float64"), nd.array(label), nd.array(lengths),
                          use_data_lengths=True).asnumpy().sum()

    x = nd.array(data, dtype="float64")
    x.attach_grad()
    with autograd.record():
        out = nd.CTCLoss(x, nd.array(label), nd.array(lengths), use_data_lengths=True)
    out.backward()
    numeric = np.zeros_like(data)
    for index in np.ndindex(data.shape):
        step = np.zeros_like(data)
        step[index] = 1e-6
        numeric[index] = (loss_of(data + step) - loss_of(data - step)) / 2e-6
    np.testing.assert_allclose(x.grad.asnumpy(), numeric, rtol=1e-5, atol=1e-7)
    assert not x.grad.asnumpy()[4:, 1].any()  # past sample 1's four steps: no gradient


def test_loss_argument_errors_are_clear():
    with pytest.raises(ValueError, match="layout must be 'NTC' or 'TNC'"):
        L.CTCLoss(layout="NCT")
    with pytest.raises(ValueError, match="label_format is 'signed' or 'binary'"):
        L.LogisticLoss(label_format="ones")
    assert gluon.loss.SoftmaxCELoss is gluon.loss.SoftmaxCrossEntropyLoss
