"""MXNet's linalg operators: gemm2 and potrf (values, shapes, gradients, failures)."""

from __future__ import annotations

import numpy as np
import pytest

from hybridlab import autograd, engine, nd
from hybridlab.errors import MXNetError, ShapeError

RNG = np.random.RandomState(0)


def spd(batch: int = 2, n: int = 3) -> np.ndarray:
    b = RNG.randn(batch, n, n)
    return b @ b.transpose(0, 2, 1) + n * np.eye(n)


def test_potrf_is_the_lower_cholesky_factor():
    a = spd()
    lower = nd.linalg.potrf(nd.array(a, dtype="float64")).asnumpy()
    np.testing.assert_allclose(lower @ lower.transpose(0, 2, 1), a, rtol=1e-12)
    assert np.all(np.triu(lower, 1) == 0)


def test_potrf_gradient_matches_finite_differences_along_symmetric_perturbations():
    a, w = spd(), RNG.randn(2, 3, 3)
    x = nd.array(a, dtype="float64")
    x.attach_grad()
    with autograd.record():
        loss = (nd.linalg.potrf(x) * nd.array(w, dtype="float64")).sum()
    loss.backward()
    g = x.grad.asnumpy()
    np.testing.assert_allclose(g, g.transpose(0, 2, 1), atol=1e-12)  # symmetric, as MXNet's

    def f(m):
        return (np.linalg.cholesky(m) * w).sum()

    eps = 1e-6
    for k, i, j in [(0, 0, 0), (0, 2, 1), (1, 1, 0), (1, 2, 2)]:
        d = np.zeros_like(a)
        d[k, i, j] = d[k, j, i] = eps
        numeric = (f(a + d) - f(a - d)) / (2 * eps)
        predicted = g[k, i, j] * (1 if i == j else 2)
        assert predicted == pytest.approx(numeric, rel=1e-5, abs=1e-8)


@pytest.mark.parametrize("ta, tb", [(False, False), (True, False), (False, True), (True, True)])
def test_gemm2_values_and_gradients(ta, tb):
    a, b = RNG.randn(2, 3, 4), RNG.randn(2, 4, 5)
    a_in, b_in = (a.transpose(0, 2, 1) if ta else a), (b.transpose(0, 2, 1) if tb else b)
    x, y = nd.array(a_in, dtype="float64"), nd.array(b_in, dtype="float64")
    x.attach_grad()
    y.attach_grad()
    with autograd.record():
        out = nd.linalg.gemm2(x, y, transpose_a=ta, transpose_b=tb, alpha=0.5)
        loss = (out * out).sum()
    loss.backward()
    np.testing.assert_allclose(out.asnumpy(), 0.5 * a @ b, rtol=1e-12)
    g = 2 * 0.5 * 0.5 * (a @ b)  # d loss / d (a @ b) times alpha
    grad_a, grad_b = g @ b.transpose(0, 2, 1), a.transpose(0, 2, 1) @ g
    np.testing.assert_allclose(x.grad.asnumpy(), grad_a.transpose(0, 2, 1) if ta else grad_a,
                               rtol=1e-10)
    np.testing.assert_allclose(y.grad.asnumpy(), grad_b.transpose(0, 2, 1) if tb else grad_b,
                               rtol=1e-10)


def test_shape_errors_are_raised_at_the_call():
    with pytest.raises(ShapeError, match="op\\(A\\) is 2x3 but op\\(B\\) is 2x3"):
        nd.linalg.gemm2(nd.ones((2, 3)), nd.ones((2, 3)))
    with pytest.raises(ShapeError, match="square"):
        nd.linalg.potrf(nd.ones((2, 3)))


def test_a_matrix_that_is_not_positive_definite_fails_at_the_sync_point_not_the_push():
    with engine.engine_scope("ThreadedEngine"):
        bad = nd.linalg.potrf(nd.array([[1.0, 2.0], [2.0, 1.0]]))  # pushed: returns at once
        fine = nd.ones((2,)) * 3
        with pytest.raises(MXNetError, match="not positive definite.*\\n  pushed at .*"
                                             "test_linalg.py"):
            bad.wait_to_read()
        np.testing.assert_array_equal(fine.asnumpy(), [3.0, 3.0])  # unrelated: still valid


def test_gelqf_factorises_a_wide_matrix_and_differentiates_the_same_in_both_precisions():
    a = np.random.default_rng(1).normal(size=(2, 3, 4))
    q, lower = nd.linalg.gelqf(nd.array(a, dtype="float64"))
    np.testing.assert_allclose(lower.asnumpy() @ q.asnumpy(), a, atol=1e-12)
    np.testing.assert_allclose(q.asnumpy() @ np.swapaxes(q.asnumpy(), 1, 2),
                               np.broadcast_to(np.eye(3), (2, 3, 3)), atol=1e-12)
    assert np.allclose(np.triu(lower.asnumpy(), 1), 0)
    grads = []
    for dtype in ("float32", "float64"):
        x = nd.array(a, dtype=dtype)
        x.attach_grad()
        with autograd.record():
            total = nd.sum(nd.linalg.gelqf(x)[1])
        total.backward()
        grads.append(x.grad.asnumpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-4, atol=1e-5)
    with pytest.raises(ShapeError, match="at most as many rows as columns"):
        nd.linalg.gelqf(nd.ones((3, 2)))
