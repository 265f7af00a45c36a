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

# %% Exercise 5
class Centre(nn.HybridBlock):
    ### BEGIN SOLUTION
    """A new value instead of a write into the input; the (batch, 1) means broadcast with
    an operator, since a Symbol's - does not broadcast."""

    def hybrid_forward(self, F, x):
        return F.broadcast_sub(x, x.mean(axis=1, keepdims=True))
    ### END SOLUTION


# %% Exercise 6
### BEGIN SOLUTION
# hybridize() on a plain Block compiles each hybrid child, one CachedOp task per child per
# call; the Block's own forward is never traced, so its relu and its * 0.5 run one task
# each, twice: 2 compiled programs among 6 tasks.
MIXED_TASKS = (6, 2)
### END SOLUTION


# %% Exercise 7
class AddRowMeans(nn.HybridBlock):
    ### BEGIN SOLUTION
    """F.broadcast_add broadcasts the (batch, 1) means in both modes."""

    def hybrid_forward(self, F, x):
        return F.broadcast_add(x, x.mean(axis=1, keepdims=True))
    ### END SOLUTION


# %% Autograding
# Exercise 4 is graded with the compile clock of the reference tests: a task costs 0.1 ms
# and compiling a program 8 ms, so its grade never depends on the machine's load.
AUTOGRADE = {
    1: ["check_sign_gate(SignGate)"],
    2: ["check_flatten(FlattenBlock)"],
    3: ["check_last_column(LastColumn)"],
    4: ["check_retrace_cost(RETRACE_RATIO, timer=CompileClock())"],
    5: ["check_centre(Centre)"],
    6: ["check_mixed_tasks(MIXED_TASKS)"],
    7: ["check_row_means(AddRowMeans)"],
}
