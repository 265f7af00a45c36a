"""Views (NOTE [Views] in ndarray.py): rows of the first axis and reshapes share their
base's values both ways, as in MXNet, by copy-on-write on the base's Var."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridlab import autograd, engine, nd
from hybridlab.graph.cached_op import CachedOp
from hybridlab.symbol import var

ENGINES = ["NaiveEngine", "ThreadedEngine"]


def _base():
    return nd.array(np.arange(24, dtype=np.float32).reshape(4, 6))


@pytest.mark.parametrize("engine_name", ENGINES)
def test_writes_go_through_a_view_and_into_it(engine_name):
    with engine.engine_scope(engine_name):
        x = _base()
        rows, row, flat = x[1:3], x[2], x.reshape((6, 4))
        rows[:] = 7
        expected = np.arange(24, dtype=np.float32).reshape(4, 6)
        expected[1:3] = 7
        np.testing.assert_array_equal(x.asnumpy(), expected)  # the base and every view
        np.testing.assert_array_equal(rows.asnumpy(), expected[1:3])  # see the write
        np.testing.assert_array_equal(row.asnumpy(), expected[2])
        np.testing.assert_array_equal(flat.asnumpy(), expected.reshape(6, 4))
        x[:] = 1  # a write to the base reaches the views
        assert rows.asnumpy().tolist() == [[1.0] * 6] * 2 and row.asnumpy().sum() == 6
        row += 2  # in place through a view: only its row of the base changes
        assert x.asnumpy()[:, 0].tolist() == [1.0, 1.0, 3.0, 1.0]
        nd.relu(nd.full((6, 4), -1.0), out=flat)  # out= a view
        assert x.asnumpy().sum() == 0


def test_ops_pushed_before_a_write_see_the_old_values():
    with engine.engine_scope("StepEngine"):
        x = _base()
        view = x[0]
        before = view * 1  # pushed now, run later
        view[:] = -1
        after = view * 1
        assert before.asnumpy().tolist() == list(range(6))
        assert after.asnumpy().tolist() == [-1.0] * 6


def test_what_stays_a_copy():
    x = _base()
    for copied in (x[:, 1], x[::2], x[1:3, 2:4], nd.reshape(x, shape=(6, 4)), x[1:3].copy()):
        copied[:] = 100
    assert x.asnumpy().max() == 23  # none of them wrote into x
    x.attach_grad()  # on the tape: indexing is an operator, so gradients flow
    with autograd.record():
        y = x[1:3] * 2
    y.backward()
    assert x.grad.asnumpy()[1:3].tolist() == [[2.0] * 6] * 2 and x.grad.asnumpy()[0].sum() == 0
    ones = nd.ones((2, 3))
    with autograd.record():
        part = ones[0]
    part[:] = 5  # made under record(): a copy, the ones stay ones
    assert ones.asnumpy().sum() == 6 and part.asnumpy().sum() == 15


def test_views_feed_compiled_programs_and_a_copy_is_a_copy():
    x = _base()
    view = x[1:3]
    op = CachedOp(var("a") * 2)
    np.testing.assert_array_equal(op(view).asnumpy(), np.arange(6, 18).reshape(2, 6) * 2)
    snapshot = view.copy()
    x[:] = 0
    np.testing.assert_array_equal(op(view).asnumpy(), 0)
    np.testing.assert_array_equal(snapshot.asnumpy(), np.arange(6, 18).reshape(2, 6))
    values = view.asnumpy()
    values[:] = 9  # asnumpy gives a copy the caller owns
    assert x.asnumpy().max() == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["rows", "row", "reshape", "base"]),
                          st.integers(0, 3), st.integers(1, 4), st.floats(-5, 5, width=32)),
                min_size=1, max_size=8))
def test_random_writes_through_views_match_numpys_views(steps):
    """hybridlab's views against numpy's (whose views share memory): the same writes,
    through random views, leave the same values everywhere."""
    x, model = _base(), np.arange(24, dtype=np.float32).reshape(4, 6)
    for kind, start, length, value in steps:
        stop = min(start + length, 4)
        if kind == "rows":
            ours, theirs = x[start:stop], model[start:stop]
        elif kind == "row":
            ours, theirs = x[start], model[start]
        elif kind == "reshape":
            ours, theirs = x.reshape((2, 12)), model.reshape(2, 12)
        else:
            ours, theirs = x, model
        ours += value
        theirs += np.float32(value)
        np.testing.assert_allclose(ours.asnumpy(), theirs, rtol=1e-6)
    np.testing.assert_allclose(x.asnumpy(), model, rtol=1e-6)
