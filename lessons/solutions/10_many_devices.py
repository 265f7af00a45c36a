"""Reference solutions for lesson 10 (many devices); tests/test_lessons.py runs them, and
`make assignments` builds the lesson's assignment from them (tools/assignments.py)."""

import math

# %% Exercise 1
### BEGIN SOLUTION
# A ring of 8 devices makes 2 (n - 1) = 14 steps, each sending one chunk of S / n =
# 1.25e6 bytes: 14 * (20e-6 + 2e-9 * 1.25e6) = 14 * 2.52e-3 s.
RING_TIME = 2 * (8 - 1) * (20e-6 + 2e-9 * 10e6 / 8)
### END SOLUTION

# %% Exercise 2
### BEGIN SOLUTION
# 1 KB is latency-bound (beta * S = 1 us, far below alpha = 50 us). The tree sends
# 2 * ceil(log2 16) = 8 messages in a row, the ring 2 * 15 = 30, the server's port 32.
FASTEST_FOR_1KB = "tree"
### END SOLUTION

# %% Exercise 3
### BEGIN SOLUTION
# The overhead cancels; two workers pay once B * c / 2 > comm, so from the first whole B
# above 2 * comm / c = 400.
BREAK_EVEN_BATCH = math.floor(8e-3 / (40e-6 / 2)) + 1
### END SOLUTION

# %% Exercise 4
### BEGIN SOLUTION
# Each device has a worker thread, but on layers this small a step is mostly Python,
# which runs one thread at a time, so the halves of the batch mostly take turns: the same
# compute as one device, plus the copies (the second slice and its labels, every gradient
# to the store, the weights back), the sum and per-device bookkeeping (two forward calls,
# two backward passes). About twice the time.
TWO_DEVICE_RATIO = 2.0
### END SOLUTION

# %% Autograding
# Exercise 4 is graded with the task clock: every engine task costs the same.
AUTOGRADE = {
    1: ["check_allreduce_time(RING_TIME, 'ring', 8, 10e6, 20e-6, 2e-9)"],
    2: ["check_fastest_way(FASTEST_FOR_1KB, 16, 1e3, 50e-6, 1e-9)"],
    3: ["check_break_even_batch(BREAK_EVEN_BATCH, 40e-6, 1e-3, 8e-3)"],
    4: ["check_two_device_step(TWO_DEVICE_RATIO, timer=TaskClock(), rounds=3)"],
}
