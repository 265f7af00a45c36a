

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
