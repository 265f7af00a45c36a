"""gluon.utils (split_data, split_and_load, clip_global_norm) and Parameter.list_data."""

import warnings

import numpy as np
import pytest

import hybridlab as mx
from hybridlab import gluon, nd


def test_split_data_slices_like_array_split_and_refuses_an_uneven_even_split():
    x = nd.array(np.arange(2 * 33 * 2, dtype=np.float32).reshape(2, 33, 2))
    parts = gluon.utils.split_data(x, 4, batch_axis=1, even_split=False)
    for mine, numpys in zip(parts, np.array_split(x.asnumpy(), 4, axis=1)):
        np.testing.assert_array_equal(mine.asnumpy(), numpys)
    with pytest.raises(ValueError, match="cannot be split evenly into 4 slices"):
        gluon.utils.split_data(x, 4, batch_axis=1)
    assert gluon.utils.split_and_load(x, [mx.cpu()])[0] is x
    assert [p.shape for p in gluon.utils.split_and_load(x, [mx.cpu()] * 2)] == [(1, 33, 2)] * 2


def test_clip_global_norm_scales_in_place_and_warns_on_nan():
    a, b = nd.ones((3, 3)), nd.ones((4, 4))
    assert gluon.utils.clip_global_norm([a, b], 1.0) == pytest.approx(5.0)
    np.testing.assert_allclose(a.asnumpy(), np.full((3, 3), 0.2), rtol=1e-6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gluon.utils.clip_global_norm([nd.array([1.0, float("nan")])], 2.0)
    assert len(caught) == 1 and "not finite" in str(caught[0].message)


def test_parameter_list_data_is_its_one_array():
    param = gluon.Parameter("w", shape=(2,))
    param.initialize()
    assert param.list_data()[0] is param.data()
