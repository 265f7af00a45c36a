"""F.contrib.cond / foreach / while_loop: the same results imperatively and hybridized."""

import numpy as np
import pytest

from hybridlab import errors, nd
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
    return F.broadcast_add(outputs, total)  # (n, d) + (d,): a Symbol's + needs one shape


def count_up(F, x):
    outputs, (i, value) = F.contrib.while_loop(
        lambda i, v: i < 3, lambda i, v: ([v], [i + 1, v * 2]),
        [F.zeros_like(F.sum(x)), F.sum(x)], max_iterations=5)
    return F.broadcast_add(outputs[0].reshape((-1,)), value)  # [v]: a list of one, as MXNet


def paired_rows(F, x):
    outputs, state = F.contrib.foreach(lambda rows, acc: (rows[0] * rows[1] + acc, acc + 1),
                                       [x, x * 2], F.zeros_like(F.sum(x, axis=0)))
    return F.broadcast_add(outputs, state)


@pytest.mark.parametrize("function", [clipped_double, running_sum, count_up, paired_rows],
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
    np.testing.assert_array_equal(outputs[0].asnumpy().ravel(), [10, 11, 0, 0])
    assert i.asscalar() == 2 and value.asscalar() == 12


def test_cond_picks_the_branch():
    x = nd.array([1.0, 2.0])
    then = nd.contrib.cond(nd.array([1.0]), lambda: x + 1, lambda: x - 1)
    other = nd.contrib.cond(nd.array([0.0]), lambda: x + 1, lambda: x - 1)
    np.testing.assert_array_equal(then.asnumpy(), [2, 3])
    np.testing.assert_array_equal(other.asnumpy(), [0, 1])


def _never():
    raise AssertionError("the branch the predicate did not select ran")


def test_imperative_cond_runs_only_the_branch_the_predicate_selects():
    """As MXNet's nd.contrib.cond: the other branch may even be one that would fail."""
    x = nd.array([1.0, 2.0])
    np.testing.assert_array_equal(nd.contrib.cond(nd.array([1.0]), lambda: x + 1,
                                                  _never).asnumpy(), [2, 3])
    np.testing.assert_array_equal(nd.contrib.cond(x.sum() > 5, _never,
                                                  lambda: x - 1).asnumpy(), [0, 1])
    assert nd.contrib.cond(True, lambda: "then", _never) == "then"  # a Python predicate too


def test_cond_with_several_predicate_values_selects_elementwise_in_both_forms():
    x = nd.array([1.0, 2.0])
    chosen = nd.contrib.cond(nd.array([1.0, 0.0]), lambda: x + 1, lambda: x - 1)
    np.testing.assert_array_equal(chosen.asnumpy(), [2, 1])


def test_traced_cond_holds_both_branches_and_imperative_runs_one():
    calls = []

    def tracked(F, x):
        def branch(name, value):
            def run():
                calls.append(name)
                return value
            return run
        return F.contrib.cond(x.sum() > 10, branch("then", x * 0), branch("else", x * 2))

    net = Body(tracked)
    x = nd.array([1.0, 2.0])
    np.testing.assert_array_equal(net(x).asnumpy(), [2, 4])
    assert calls == ["else"]
    net.hybridize()
    np.testing.assert_array_equal(net(x).asnumpy(), [2, 4])
    assert calls == ["else", "then", "else"]  # the trace: a graph holds both branches


def test_imperative_while_loop_may_omit_max_iterations_and_runs_only_while_cond_holds():
    calls = []

    def step(i, v):
        calls.append(i.asscalar())
        return v, [i + 1, v * 2]  # one array per step: outputs come back as one array

    outputs, (i, value) = nd.contrib.while_loop(lambda i, v: i < 3, step,
                                                [nd.array([0.0]), nd.array([1.0])])
    np.testing.assert_array_equal(outputs.asnumpy().ravel(), [1, 2, 4])
    assert value.asscalar() == 8 and calls == [0, 1, 2]  # func never ran past the end


def test_while_loop_without_outputs_returns_an_empty_list():
    outputs, value = nd.contrib.while_loop(lambda v: v < 10, lambda v: (None, v * 3),
                                           nd.array([1.0]), max_iterations=5)
    assert outputs == [] and value.asscalar() == 27


def test_hybridized_while_loop_needs_max_iterations():
    def unbounded(F, x):
        _, total = F.contrib.while_loop(lambda v: v < 10, lambda v: (None, v * 3), F.sum(x))
        return total  # the line above is the user line

    net = Body(unbounded)
    assert net(nd.ones((2,))).asscalar() == 18
    net.hybridize()
    with pytest.raises(errors.UnboundedLoopError, match=r"(?s)test_contrib.py:\d+ `_, total = "
                                                        r"F.contrib.while_loop.*max_iterations="):
        net(nd.ones((2,)))
    assert isinstance(errors.UnboundedLoopError("x"), ValueError)
