"""Reference solutions for lesson 01 (imperative vs symbolic); tests/test_lessons.py runs them."""


def exercise_symbol(a, b, c, d):
    """Exercise 1: the operators build a graph when the arguments are Symbols."""
    return (a - b) * (c + d)


FANCY_FUNC_NODES = 7  # exercise 2: the four input variables and the three additions


def dense_from_primitives(F, x, weight, bias):  # noqa: N803 -- F as in hybrid_forward
    """Exercise 3: FullyConnected as a matrix product and a broadcast addition."""
    return F.broadcast_add(F.dot(x, weight, transpose_b=True), bias)


# Exercise 4: while `return np.tanh(h3)` runs, h1, h2 and h3 are all still bound to local
# names -- an interpreter frees a local when the function returns, not after its last use
# -- so three arrays of 250,000 float32 numbers (4 bytes each) are held. (x is the
# caller's, and the result is not a local.)
HELD_BYTES = 3 * 250_000 * 4
