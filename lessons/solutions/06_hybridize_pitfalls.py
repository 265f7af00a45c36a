"""Reference solutions for lesson 06 (hybridize pitfalls); tests/test_lessons.py runs them,
and `make assignments` builds the lesson's assignment from them (tools/assignments.py)."""

from hybridlab.gluon import nn


# %% Exercise 1
class SignGate(nn.HybridBlock):
    ### BEGIN SOLUTION
    """An operator makes the decision, so the compiled program holds both branches and the
    data picks one on every call."""

    def hybrid_forward(self, F, x):
        return F.where(x.sum() > 0, x * 2, x / 2)
    ### END SOLUTION


# %% Exercise 2
class FlattenBlock(nn.HybridBlock):
    ### BEGIN SOLUTION
    """Reshape codes say "keep axis 0, infer the rest" without any size."""

    def hybrid_forward(self, F, x):
        return x.reshape((0, -1))
    ### END SOLUTION


# %% Exercise 3
class LastColumn(nn.HybridBlock):
    ### BEGIN SOLUTION
    """An operator slices; begin=-1 counts from the end at any width."""

    def hybrid_forward(self, F, x):
        return F.slice_axis(x, axis=1, begin=-1, end=None)
    ### END SOLUTION


# %% Exercise 4
### BEGIN SOLUTION
# A new shape traces the block, runs the passes and compiles new source (milliseconds);
# a repeated shape only runs the cached program (tens of microseconds): a ratio of the
# order of fifty.
RETRACE_RATIO = 50
### END SOLUTION

# %% Autograding
# Exercise 4 is graded on the scripted clock of the reference tests (a new shape 8 ms,
# a repeated one 0.1 ms), so its grade never depends on the machine's load.
AUTOGRADE = {
    1: ["check_sign_gate(SignGate)"],
    2: ["check_flatten(FlattenBlock)"],
    3: ["check_last_column(LastColumn)"],
    4: ["check_retrace_cost(RETRACE_RATIO, clock=scripted_clock([8e-3, 1e-4]))"],
}
