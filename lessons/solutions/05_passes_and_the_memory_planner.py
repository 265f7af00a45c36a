"""Reference solutions for lesson 05 (passes); tests/test_lessons.py runs them."""

from hybridlab.graph.ir import rebuild, with_inputs

# Exercise 1: the second sin(x) and the second cos(x).
CSE_COUNT = 2

# Exercise 2: fusion turns the elementwise chain (+, *, * 1, + 2, relu) into one node.
BIGGEST_STAGE = "fuse_elementwise"


# Exercise 3: replace each x * 1 by x itself.
def drop_times_one(graph, context):
    changes = []

    def visit(node, inputs):
        node = with_inputs(node, inputs)
        if node.kind == "call" and node.op == "_mul_scalar" and dict(node.attrs)["scalar"] == 1:
            changes.append(f"{node.name}: x * 1 -> x")
            return [inputs[0]]
        return node

    return rebuild(graph, visit), changes


# Exercise 4: at batch 32 the first layer's output (32 x 256 float32, computed in place
# by relu) is still alive while the second layer's product writes its 32 x 128 result:
# (32 * 256 + 32 * 128) * 4 bytes. Nothing alive at any other step adds up to more.
LIVENESS_BOUND = (32 * 256 + 32 * 128) * 4
