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


class Centre(nn.HybridBlock):
    """Exercise 5: a new value instead of a write into the input; the (batch, 1) means
    broadcast with an operator, since a Symbol's - does not broadcast."""

    def hybrid_forward(self, F, x):
        return F.broadcast_sub(x, x.mean(axis=1, keepdims=True))


# Exercise 6: hybridize() on a plain Block compiles each hybrid child, one CachedOp task
# per child per call; the Block's own forward is never traced, so its relu and its * 0.5
# run one task each, twice: 2 compiled programs among 6 tasks.
MIXED_TASKS = (6, 2)


class AddRowMeans(nn.HybridBlock):
    """Exercise 7: F.broadcast_add broadcasts the (batch, 1) means in both modes."""

    def hybrid_forward(self, F, x):
        return F.broadcast_add(x, x.mean(axis=1, keepdims=True))
