"""F.contrib.cond / foreach / while_loop: the same results imperatively and hybridized."""

import numpy as np
import pytest

from hybridlab import nd
from hybridlab.gluon import nn


class Body(nn.HybridBlock):
    def __init__(self, function):
        super().__init__()
        self._function = function

    def hybrid_forward(self, F, x):
        return self._function(F, x)


def clipped_double(F, x):
    return F.contrib.cond(x.sum() > 10, lambda: x * 0, lambda: x * 2)


def running_sum(F, x):
    outputs, total = F.contrib.foreach(lambda row, acc: (row + acc, row + acc), x,
                                       F.zeros_like(F.sum(x, axis=0)))
    return outputs + total


def count_up(F, x):
    outputs, (i, value) = F.contrib.while_loop(
        lambda i, v: i < 3, lambda i, v: ([v], [i + 1, v * 2]),
        [F.zeros_like(F.sum(x)), F.sum(x)], max_iterations=5)
    return F.broadcast_add(outputs.reshape((-1,)), value)


@pytest.mark.parametrize("function", [clipped_double, running_sum, count_up],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("scale", [1.0, 5.0])
def test_control_flow_agrees_imperative_and_hybridized(function, scale):
    x = nd.array(np.arange(6, dtype="float32").reshape(3, 2) * scale / 6)
    net = Body(function)
    expected = net(x).asnumpy()
    net.hybridize()
    np.testing.assert_allclose(net(x).asnumpy(), expected, rtol=1e-6)


def test_while_loop_stops_and_pads_with_zeros():
    outputs, (i, value) = nd.contrib.while_loop(
        lambda i, v: i < 2, lambda i, v: ([v], [i + 1, v + 1]),
        [nd.array([0.0]), nd.array([10.0])], max_iterations=4)
    np.testing.assert_array_equal(outputs.asnumpy().ravel(), [10, 11, 0, 0])
    assert i.asscalar() == 2 and value.asscalar() == 12


def test_cond_picks_the_branch():
    x = nd.array([1.0, 2.0])
    then = nd.contrib.cond(nd.array([1.0]), lambda: x + 1, lambda: x - 1)
    other = nd.contrib.cond(nd.array([0.0]), lambda: x + 1, lambda: x - 1)
    np.testing.assert_array_equal(then.asnumpy(), [2, 3])
    np.testing.assert_array_equal(other.asnumpy(), [0, 1])
