"""Reference solutions for lesson 01 (imperative vs symbolic); tests/test_lessons.py runs
them, and `make assignments` builds the lesson's assignment from them
(tools/assignments.py)."""


# %% Exercise 1
def exercise_symbol(a, b, c, d):
    ### BEGIN SOLUTION
    # The operators build a graph when the arguments are Symbols.
    return (a - b) * (c + d)
    ### END SOLUTION


# %% Exercise 2
### BEGIN SOLUTION
FANCY_FUNC_NODES = 7  # the four input variables and the three additions
### END SOLUTION


# %% Exercise 3
def dense_from_primitives(F, x, weight, bias):  # noqa: N803 -- F as in hybrid_forward
    ### BEGIN SOLUTION
    # FullyConnected as a matrix product and a broadcast addition.
    return F.broadcast_add(F.dot(x, weight, transpose_b=True), bias)
    ### END SOLUTION


# %% Exercise 4
### BEGIN SOLUTION
# While `return np.tanh(h3)` runs, h1, h2 and h3 are all still bound to local names -- an
# interpreter frees a local when the function returns, not after its last use -- so three
# arrays of 250,000 float32 numbers (4 bytes each) are held. (x is the caller's, and the
# result is not a local.)
HELD_BYTES = 3 * 250_000 * 4
### END SOLUTION

# %% Autograding
AUTOGRADE = {
    1: ["check_symbol_program(exercise_symbol)"],
    2: ["check_fancy_func_nodes(FANCY_FUNC_NODES)"],
    3: ["check_dense_from_primitives(dense_from_primitives)"],
    4: ["check_held_bytes(HELD_BYTES)"],
}
