"""Reference solutions for lesson 04 (schedules); tests/test_lessons.py runs them, and
`make assignments` builds the lesson's assignment from them (tools/assignments.py)."""

# %% Exercise 1
### BEGIN SOLUTION
# The longest chain is ones -> sum (or difference) -> product: a span of 3. One worker
# runs the five tasks one after another; two workers run, in time 0-1 the two ones, 1-2
# the sum and the difference side by side, 2-3 the product: the span is reached.
SPAN = 3
MAKESPAN_ON_ONE_WORKER = 5
MAKESPAN_ON_TWO_WORKERS = 3
### END SOLUTION

# %% Exercise 2
### BEGIN SOLUTION
# 23 unit tasks with a span of 9; three workers already finish in 9 units.
ENOUGH_WORKERS = 3
### END SOLUTION


# %% Exercise 3
def total(xs):
    ### BEGIN SOLUTION
    # Add neighbours pairwise, level by level.
    while len(xs) > 1:
        pairs = [xs[i] + xs[i + 1] for i in range(0, len(xs) - 1, 2)]
        xs = pairs + ([xs[-1]] if len(xs) % 2 else [])
    return xs[0]
    ### END SOLUTION


# %% Exercise 4
### BEGIN SOLUTION
# Two chains that never meet, one per worker: at best half the time (2x); the cores also
# run Python and the engine's bookkeeping, so somewhat below.
SPEEDUP = 1.8
### END SOLUTION

# %% Autograding
# Exercise 4 is graded with the worker clock of the reference tests (a task's computing
# shared among the workers, its Python overhead not), so its grade never depends on the
# machine's load.
AUTOGRADE = {
    1: ["check_span(SPAN)", "check_makespan(1, MAKESPAN_ON_ONE_WORKER)",
        "check_makespan(2, MAKESPAN_ON_TWO_WORKERS)"],
    2: ["check_enough_workers(ENOUGH_WORKERS)"],
    3: ["check_tree_sum(total)"],
    4: ["check_speedup(SPEEDUP, timer=WorkerClock(), rounds=3)"],
}
HIDDEN = {3: ["check_tree_sum(total, n=13)", "check_tree_sum(total, n=2)"]}
