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
# Lesson 00's imperative call cost a few hundred microseconds for five engine
# operations, most of it the framework's Python around each one: some tens of
# microseconds per operation, and more on a threaded engine, which hands every task to its
# worker. An extra add is one more such operation with a tiny kernel.
OPERATOR_COST_US = 50
### END SOLUTION

# %% Autograding
# Graded with a task clock of 40 µs per engine task: exercise 4's guess is judged
# against 40 µs (hybridlab.exercises.clocks; a grade never depends on the machine's load).
AUTOGRADE = {
    1: ["check_symbol_program(exercise_symbol)"],
    2: ["check_fancy_func_nodes(FANCY_FUNC_NODES)"],
    3: ["check_dense_from_primitives(dense_from_primitives)"],
    4: ["check_operator_cost(OPERATOR_COST_US, calls=3, rounds=3, timer=TaskClock(tick=40e-6))"],
}
