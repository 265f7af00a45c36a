"""Reference solutions for lesson 01 (imperative vs symbolic); tests/test_lessons.py runs them."""


def exercise_symbol(a, b, c, d):
    """Exercise 1: the operators build a graph when the arguments are Symbols."""
    return (a - b) * (c + d)


FANCY_FUNC_NODES = 7  # exercise 2: the four input variables and the three additions


def dense_from_primitives(F, x, weight, bias):  # noqa: N803 -- F as in hybrid_forward
    """Exercise 3: FullyConnected as a matrix product and a broadcast addition."""
    return F.broadcast_add(F.dot(x, weight, transpose_b=True), bias)


# Exercise 4: lesson 00's imperative call cost a few hundred microseconds for five engine
# operations, most of it the framework's Python around each one: some tens of
# microseconds per operation, and more on a threaded engine, which hands every task to its
# worker. An extra add is one more such operation with a tiny kernel.
OPERATOR_COST_US = 50
