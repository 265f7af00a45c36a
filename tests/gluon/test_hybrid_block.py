"""HybridBlock behaviour shared with MXNet: cache invalidation, errors that match."""

from __future__ import annotations

import pytest


def test_a_child_registered_after_hybridize_invalidates_the_compiled_program():
    import numpy as np

    from hybridlab import nd
    from hybridlab.gluon import nn

    net = nn.HybridSequential()
    net.add(nn.Dense(4, in_units=3))
    net.initialize()
    net.hybridize()
    x = nd.ones((2, 3))
    before = net(x).asnumpy()
    net.add(nn.Activation("relu"))  # registered after the first compiled call
    after = net(x).asnumpy()
    np.testing.assert_allclose(after, np.maximum(before, 0))
    assert (before < 0).any()  # (so the relu really changed something)


def test_hybridized_errors_match_the_imperative_ones():
    """Wrong input counts name the block and its inputs both ways; an empty batch works
    both ways; a kernel failing while compiling is the op's MXNetError with the user line."""
    import numpy as np

    from hybridlab import engine, nd, np_shape
    from hybridlab.errors import BlockInputError, MXNetError
    from hybridlab.gluon import nn

    messages = []
    for hybrid in (False, True):
        net = nn.Dense(3)
        net.initialize()
        net.hybridize(hybrid)
        with np_shape():  # MXNet makes an empty batch only with numpy's shapes on
            assert net(nd.ones((0, 4))).shape == (0, 3)  # an empty first batch sizes the weight
        with pytest.raises(BlockInputError) as caught:
            net(nd.ones((2, 4)), nd.ones((2, 4)))
        messages.append(str(caught.value).replace(net.name, "NAME"))
        assert net(nd.ones((2, 4))).shape == (2, 3)
    assert messages[0] == messages[1] == "Dense 'NAME' takes 1 input(s) (x), got 2"

    class FoldsAFailure(nn.HybridBlock):
        def hybrid_forward(self, F, x):
            return x + F.linalg_potrf(F.ones((1, 2, 2)) * -1)  # not positive definite

    errors = []
    for hybrid in (False, True):
        with engine.engine_scope(engine.NaiveEngine()):
            block = FoldsAFailure()
            block.hybridize(hybrid)
            with pytest.raises(MXNetError, match="operator 'linalg_potrf' failed with "
                                                 "ValueError") as caught:
                block(nd.ones((1, 2, 2))).asnumpy()
            errors.append(str(caught.value))
    assert all("test_hybrid_block.py" in text for text in errors)
    assert np.isfinite(nd.ones((1,)).asnumpy()).all()


@pytest.mark.parametrize("engine_name", ["NaiveEngine", "ThreadedEngine"])
def test_a_parameter_larger_than_memory_is_the_same_error_on_every_engine(engine_name):
    from hybridlab import engine
    from hybridlab.errors import MXNetError
    from hybridlab.gluon import nn

    with engine.engine_scope(engine_name):
        layer = nn.Dense(10**12, in_units=10)
        with pytest.raises(MXNetError, match=r"needs \d+\.\d GiB, more than this machine's"):
            layer.initialize()
