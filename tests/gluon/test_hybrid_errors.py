"""A hybridized block fails (or works) as the same block run imperatively does."""

import pytest

from hybridlab import nd
from hybridlab.errors import MXNetError
from hybridlab.gluon import nn

pytestmark = pytest.mark.filterwarnings("ignore:hybridization report")


class FoldsAFailure(nn.HybridBlock):
    def hybrid_forward(self, F, x):
        bad = F.linalg_potrf(F.zeros((2, 2)) - 1)  # constant inputs: computed when compiling
        return x + bad.reshape((4,))


@pytest.mark.parametrize("hybridize", [False, True])
def test_a_kernel_failing_in_constant_folding_is_the_imperative_error(hybridize):
    net = FoldsAFailure()
    if hybridize:
        net.hybridize()
    with pytest.raises(MXNetError, match=r"operator 'linalg_potrf' failed with ValueError: "
                                         r"linalg.potrf: .*\n  pushed at .*"
                                         r"test_hybrid_errors.py:14"):
        net(nd.ones((4,))).asnumpy()


@pytest.mark.parametrize("hybridize", [False, True])
def test_a_zero_size_batch_works_on_the_first_call(hybridize):
    net = nn.Dense(3)
    net.initialize()
    if hybridize:
        net.hybridize()
    assert net(nd.ones((0, 4))).shape == (0, 3)
    assert net(nd.ones((2, 4))).shape == (2, 3)  # and sizes the weight from that call
    assert net.weight.shape == (3, 4)


def test_a_wrong_input_count_is_said_in_the_blocks_terms():
    net = nn.HybridSequential()
    net.add(nn.Dense(3))
    net.initialize()
    net.hybridize()
    net(nd.ones((2, 4)))
    with pytest.raises(TypeError, match=r"HybridSequential 'hybridsequential\d+' takes 1 "
                                        r"input \(its hybrid_forward's data arguments\), got 2"):
        net(nd.ones((2, 4)), nd.ones((2, 4)))
