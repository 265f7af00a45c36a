"""Reference solutions for lesson 06 (hybridize pitfalls); tests/test_lessons.py runs them."""

from hybridlab.gluon import nn


class SignGate(nn.HybridBlock):
    """Exercise 1: an operator makes the decision, so the compiled program holds both
    branches and the data picks one on every call."""

    def hybrid_forward(self, F, x):
        return F.where(x.sum() > 0, x * 2, x / 2)


class FlattenBlock(nn.HybridBlock):
    """Exercise 2: reshape codes say "keep axis 0, infer the rest" without any size."""

    def hybrid_forward(self, F, x):
        return x.reshape((0, -1))


class LastColumn(nn.HybridBlock):
    """Exercise 3: an operator slices; begin=-1 counts from the end at any width."""

    def hybrid_forward(self, F, x):
        return F.slice_axis(x, axis=1, begin=-1, end=None)


# Exercise 4: a new shape traces the block, runs the passes and compiles new source
# (milliseconds); a repeated shape only runs the cached program (tens of microseconds):
# a ratio of the order of fifty.
RETRACE_RATIO = 50
