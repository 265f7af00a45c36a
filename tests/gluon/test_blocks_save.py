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


class _ByName(gluon.Block):
    """Children kept under keys made from their names, which differ between two builds."""

    def add(self, block):
        self._children[block.name + str(len(self._children))] = block

    def forward(self, x):
        for block in self._children.values():
            x = block(x)
        return x


def test_children_are_matched_in_order_when_their_keys_differ(tmp_path):
    def build():
        net = _ByName()
        net.add(nn.Dense(3))
        return net

    net = build()
    net.initialize()
    x = nd.ones((1, 2))
    expected = net(x).asnumpy()
    net.save(str(tmp_path / "named"))
    copy = build()  # its Dense has another name, so another key
    assert list(copy._children) != list(net._children)
    copy.load(str(tmp_path / "named"))
    np.testing.assert_allclose(copy(x).asnumpy(), expected)
