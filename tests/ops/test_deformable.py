"""``contrib.DeformableConvolution`` against real MXNet 1.9.1, and the layer around it.

The fixtures (tests/fixtures/mxnet/deformable/*.npz) are MXNet's outputs and input gradients
on random data with fractional offsets (taps outside the image and in its last row or
column included), written by ``tools/mxnet_fixtures.py mxnet-deformable``.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from hybridlab import autograd, gluon, nd
from hybridlab.errors import ShapeError

FIXTURES = pathlib.Path(__file__).parent.parent / "fixtures" / "mxnet" / "deformable"


@pytest.mark.parametrize("name", ["plain", "strided"])
def test_deformable_convolution_matches_mxnet_outputs_and_gradients(name):
    saved = np.load(FIXTURES / f"{name}.npz")
    attrs = json.loads(str(saved["attrs"]))
    inputs = {k[3:]: nd.array(saved[k]) for k in saved.files if k.startswith("in_")}
    for value in inputs.values():
        value.attach_grad()
    with autograd.record():
        out = nd.contrib.DeformableConvolution(**inputs, **attrs)
    np.testing.assert_allclose(out.asnumpy(), saved["out"], rtol=1e-4, atol=1e-5)
    out.backward(nd.array(saved["head"]))
    for key, value in inputs.items():
        np.testing.assert_allclose(value.grad.asnumpy(), saved[f"grad_{key}"], rtol=1e-4,
                                   atol=1e-4, err_msg=f"{name}: gradient of {key}")


def test_zero_offsets_are_a_convolution_and_whole_offsets_shift_it():
    rng = np.random.default_rng(0)
    x, w = nd.array(rng.standard_normal((1, 2, 6, 6))), nd.array(rng.standard_normal((3, 2, 3, 3)))
    plain = nd.Convolution(x, w, kernel=(3, 3), num_filter=3, no_bias=True).asnumpy()
    zero = nd.contrib.DeformableConvolution(x, nd.zeros((1, 18, 4, 4)), w, kernel=(3, 3),
                                            num_filter=3, no_bias=True).asnumpy()
    np.testing.assert_allclose(zero, plain, rtol=1e-5, atol=1e-5)
    down = np.zeros((1, 18, 4, 4), np.float32)
    down[:, 0::2] = 1.0  # every tap one row lower: the convolution one row down
    shifted = nd.contrib.DeformableConvolution(x, nd.array(down), w, kernel=(3, 3),
                                               num_filter=3, no_bias=True).asnumpy()
    np.testing.assert_allclose(shifted[:, :, :3], plain[:, :, 1:], rtol=1e-5, atol=1e-5)


def test_the_layer_starts_as_its_convolution_and_trains_hybridized():
    layer = gluon.contrib.cnn.DeformableConvolution(4, kernel_size=3, padding=1,
                                                    num_deformable_group=2)
    layer.initialize()
    x = nd.random.uniform(shape=(2, 6, 5, 5))
    eager = layer(x)
    expected = nd.Convolution(x, layer.deformable_conv_weight.data(),
                              layer.deformable_conv_bias.data(), kernel=(3, 3), pad=(1, 1),
                              num_filter=4)
    np.testing.assert_allclose(eager.asnumpy(), expected.asnumpy(), rtol=1e-5, atol=1e-5)
    assert layer.offset_weight.shape == (36, 6, 3, 3)
    layer.hybridize()
    with autograd.record():
        loss = (layer(x) ** 2).sum()
    loss.backward()
    assert np.abs(layer.offset_weight.grad().asnumpy()).sum() > 0  # the offsets learn


def test_offsets_of_the_wrong_shape_are_a_clear_error():
    with pytest.raises(ShapeError, match="needs.*offset"):
        nd.contrib.DeformableConvolution(nd.ones((1, 2, 5, 5)), nd.ones((1, 9, 3, 3)),
                                         nd.ones((3, 2, 3, 3)), kernel=(3, 3), num_filter=3,
                                         no_bias=True)
