"""mx.contrib.autograd: MXNet's first autograd interface, a thin layer over the tape."""

from __future__ import annotations

import numpy as np

from hybridlab import autograd, nd
from hybridlab.contrib import autograd as old


def test_grad_and_loss_returns_the_gradients_beside_the_value():
    x, y = nd.array([1.0, 2.0]), nd.array([3.0, 4.0])
    grads, value = old.grad_and_loss(lambda a, b, scale: a * b * scale, argnum=[0, 1])(x, y, 2)
    np.testing.assert_array_equal(value.asnumpy(), [6.0, 16.0])
    np.testing.assert_array_equal(grads[0].asnumpy(), [6.0, 8.0])
    np.testing.assert_array_equal(grads[1].asnumpy(), [2.0, 4.0])
    (only,) = old.grad(nd.exp)(nd.array([0.0]))
    np.testing.assert_allclose(only.asnumpy(), [1.0])


def test_sections_switch_recording_and_training_together():
    assert not autograd.is_recording() and not autograd.is_training()
    with old.train_section():
        assert autograd.is_recording() and autograd.is_training()
        with old.test_section():
            assert not autograd.is_recording() and not autograd.is_training()
        assert autograd.is_recording()
    assert not autograd.is_recording() and not autograd.is_training()


def test_backward_with_a_missing_head_gradient_uses_ones():
    x, dx = nd.ones((2, 2)), nd.zeros((2, 2))
    old.mark_variables([x], [dx])
    with old.train_section():
        top, bottom = nd.split(x, axis=0, num_outputs=2, squeeze_axis=True)
        old.backward([top, bottom], [None, nd.array([2.0, 3.0])])
    np.testing.assert_array_equal(dx.asnumpy(), [[1, 1], [2, 3]])
