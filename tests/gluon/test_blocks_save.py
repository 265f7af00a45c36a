"""Block.save / Block.load: MXNet's whole-model files (structure and parameters)."""

from __future__ import annotations

import numpy as np
import pytest

from hybridlab import gluon, nd
from hybridlab.gluon import nn


class _Chain(gluon.Block):
    """A plain Block whose children run in turn (MXNet's own test builds one like it)."""

    def add(self, block):
        self.register_child(block)

    def forward(self, x):
        for block in self._children.values():
            x = block(x)
        return x


def _build():
    inner = _Chain()
    inner.add(nn.Dense(4))
    net = _Chain()
    net.add(inner)
    net.add(nn.Dense(3))
    return net


def test_a_saved_model_loads_into_a_new_copy_with_its_hybridized_blocks(tmp_path):
    net = _build()
    net.initialize()
    net.hybridize()
    x = nd.ones((2, 5))
    expected = net(x).asnumpy()
    net.save(str(tmp_path / "model"))
    copy = _build()  # not initialised: load gives every parameter its value
    copy.load(str(tmp_path / "model"))
    np.testing.assert_allclose(copy(x).asnumpy(), expected, rtol=1e-6)
    dense = list(copy._children.values())[1]
    assert dense._active  # hybridized again, as it was when saved


def test_loading_into_another_network_is_refused(tmp_path):
    net = _build()
    net.initialize()
    net(nd.ones((1, 5)))
    net.save(str(tmp_path / "model"))
    other = _Chain()
    other.add(nn.Dense(3))
    with pytest.raises(ValueError, match="describes another network"):
        other.load(str(tmp_path / "model"))
