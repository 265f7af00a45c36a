"""Reference solutions for lesson 09 (real networks); tests/test_lessons.py runs them, and
`make assignments` builds the lesson's assignment from them (tools/assignments.py)."""

# %% Exercise 1
### BEGIN SOLUTION
# The second dense block starts from 128 channels; 12 layers add 32 each: 128 + 12 x 32 =
# 512 channels of 28 x 28 float32 numbers (4 bytes each).
DENSE_CONCAT_BYTES = (128 + 12 * 32) * 28 * 28 * 4
### END SOLUTION

# %% Exercise 2
### BEGIN SOLUTION
# With unit costs the speed-up is at most work / span. Each inception block runs four
# branches side by side, but the stem, the head and the poolings between stages are
# single chains: on 4 workers the list schedule reaches about work / span, a little over 2
# (lesson09.check_inception_speedup prints the exact figures).
INCEPTION_SPEEDUP = 2.3
### END SOLUTION


# %% Exercise 3
def count_sums(graph):
    ### BEGIN SOLUTION
    # A residual sum adds two results computed by operators; an imported BatchNorm's bias
    # is a weight (a var), so its broadcast_add does not count.
    sums = ("broadcast_add", "elemwise_add", "_plus", "add")
    return sum(1 for node in graph.nodes
               if node.kind == "call" and node.op in sums
               and sum(value.node.kind == "call" for value in node.inputs) == 2)
    ### END SOLUTION


# %% Autograding
AUTOGRADE = {
    1: ["check_dense_concat_bytes(DENSE_CONCAT_BYTES)"],
    2: ["check_inception_speedup(INCEPTION_SPEEDUP)"],
    3: ["check_residual_sums(count_sums)"],
}
