"""Reference solutions for lesson 05 (passes); tests/test_lessons.py runs them, and
`make assignments` builds the lesson's assignment from them (tools/assignments.py)."""

from hybridlab.graph.ir import rebuild, with_inputs

# %% Exercise 1
### BEGIN SOLUTION
# The second sin(x) and the second cos(x).
CSE_COUNT = 2
### END SOLUTION

# %% Exercise 2
### BEGIN SOLUTION
# Fusion turns the elementwise chain (+, *, * 1, + 2, relu) into one node.
BIGGEST_STAGE = "fuse_elementwise"
### END SOLUTION


# %% Exercise 3
def drop_times_one(graph, context):
    ### BEGIN SOLUTION
    # Replace each x * 1 by x itself.
    changes = []

    def visit(node, inputs):
        node = with_inputs(node, inputs)
        if node.kind == "call" and node.op == "_mul_scalar" and dict(node.attrs)["scalar"] == 1:
            changes.append(f"{node.name}: x * 1 -> x")
            return [inputs[0]]
        return node

    return rebuild(graph, visit), changes
    ### END SOLUTION


# %% Exercise 4
### BEGIN SOLUTION
# At batch 32 the first layer's output (32 x 256 float32, computed in place by relu) is
# still alive while the second layer's product writes its 32 x 128 result:
# (32 * 256 + 32 * 128) * 4 bytes. Nothing alive at any other step adds up to more.
LIVENESS_BOUND = (32 * 256 + 32 * 128) * 4
### END SOLUTION

# %% Autograding
AUTOGRADE = {
    1: ["check_cse_count(CSE_COUNT)"],
    2: ["check_biggest_stage(BIGGEST_STAGE)"],
    3: ["check_times_one_pass(drop_times_one)"],
    4: ["check_liveness_bound(LIVENESS_BOUND)"],
}
