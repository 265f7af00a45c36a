"""Reference solutions for lesson 03 (lazy evaluation); tests/test_lessons.py runs them,
and `make assignments` builds the lesson's assignment from them (tools/assignments.py)."""

# %% Exercise 1
### BEGIN SOLUTION
# The calls that need the numbers themselves. shape, dtype and reshape only need what is
# known when the task is pushed.
SYNC_POINTS = {"print", "asnumpy", "asscalar", "wait_to_read", "nd.waitall"}
### END SOLUTION

# %% Exercise 2
### BEGIN SOLUTION
# Once a and b exist, a + b and a - b each read only a and b.
READY_AFTER_TWO_STEPS = 2
### END SOLUTION

# %% Exercise 3
### BEGIN SOLUTION
# loss.wait_to_read() runs loss's tasks only; nd.waitall() would also wait for other, and
# other.asnumpy() waits for the wrong array.
BARRIER = "loss.wait_to_read()"
### END SOLUTION


# %% Exercise 4
def train(batches):
    ### BEGIN SOLUTION
    # Synchronise on each result before pushing the next batch's work.
    from hybridlab import nd

    outputs = []
    for x in batches:
        w = nd.ones((x.shape[1], 8))
        outputs.append(nd.dot(x, w))
        outputs[-1].wait_to_read()
    return outputs
    ### END SOLUTION


# %% Exercise 5
### BEGIN SOLUTION
# d2l's model. Pushing an iteration's two tasks (t1) is quicker than the worker running
# them with its bookkeeping (t2), so without barriers an iteration costs about t2; with
# one it costs t1 + t2 + t3, and the hand-over t3 between two Python threads is of the
# order of t2 itself for such small products: (t1 + t2 + t3) / t2, about two.
BARRIER_RATIO = 2.0
### END SOLUTION

# %% Autograding
# Exercise 5 is graded with d2l's loop model (hybridlab.exercises.clocks.HandOverClock): a
# task costs 10 µs and every barrier adds a 20 µs hand-over.
AUTOGRADE = {
    1: ["check_sync_points(SYNC_POINTS)"],
    2: ["check_ready_after_two_steps(READY_AFTER_TWO_STEPS)"],
    3: ["check_barrier(BARRIER)"],
    4: ["check_bounded_loop(train)"],
    5: ["check_barrier_ratio(BARRIER_RATIO, steps=20, rounds=3, "
        "timer=HandOverClock(tick=1e-5, hand_over=2e-5))"],
}
HIDDEN = {4: ["check_bounded_loop(train, batches=20)"]}
