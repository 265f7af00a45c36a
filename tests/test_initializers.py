"""mx.init beyond the basics: MXNet's JSON form (``dumps``, a variable's ``init``),
Bilinear, Orthogonal and MSRAPrelu."""

from __future__ import annotations

import json

import numpy as np
import pytest

import hybridlab as mx
from hybridlab import nd, sym


@pytest.mark.parametrize("init, text", [
    (mx.init.Constant(1), '["constant", {"value": 1}]'),
    (mx.init.Uniform(0.5), '["uniform", {"scale": 0.5}]'),
    (mx.init.Xavier(magnitude=2), '["xavier", {"rnd_type": "uniform", "factor_type": "avg", '
                                  '"magnitude": 2}]'),
    (mx.init.One(), '["one", {}]'),
])
def test_dumps_is_mxnets_json_and_reads_back(init, text):
    assert init.dumps() == text
    assert mx.init.create_from_config(text) == init


def test_an_array_constant_dumps_as_lists_and_a_variable_keeps_its_init():
    assert json.loads(mx.init.Constant(nd.ones((2, 1))).dumps()) == [
        "constant", {"value": [[1.0], [1.0]]}]
    variable = sym.var("w", init=mx.init.Normal(0.5))
    assert variable.attr_dict()["w"]["__init__"] == '["normal", {"sigma": 0.5}]'
    with pytest.raises(ValueError, match="not an initializer's JSON"):
        mx.init.create_from_config('["nope", {}]')


def test_bilinear_is_an_upsampling_kernel():
    weight = nd.empty((2, 1, 4, 4))
    mx.init.Bilinear()._init_weight("up_weight", weight)
    row = np.array([0.25, 0.75, 0.75, 0.25])
    np.testing.assert_array_equal(weight.asnumpy()[1, 0], np.outer(row, row))


def test_orthogonal_rows_and_msraprelu_variance():
    mx.random.seed(0)
    weight = nd.zeros((4, 6))
    mx.init.Orthogonal(scale=1.0)._init_weight("w", weight)
    rows = weight.asnumpy()
    np.testing.assert_allclose(rows @ rows.T, np.eye(4), atol=1e-5)
    drawn = mx.init.MSRAPrelu(factor_type="in", slope=0.0)((400, 50)).asnumpy()
    assert drawn.std() == pytest.approx(np.sqrt(2 / 50), rel=0.05)
