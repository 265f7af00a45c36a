"""Reference solutions for lesson 04 (schedules); tests/test_lessons.py runs them."""

# Exercise 1: the longest chain is ones -> sum (or difference) -> product: a span of 3.
# One worker runs the five tasks one after another; two workers run, in time 0-1 the two
# ones, 1-2 the sum and the difference side by side, 2-3 the product: the span is reached.
SPAN = 3
MAKESPAN_ON_ONE_WORKER = 5
MAKESPAN_ON_TWO_WORKERS = 3

# Exercise 2: 23 unit tasks with a span of 9; three workers already finish in 9 units.
ENOUGH_WORKERS = 3


# Exercise 3: add neighbours pairwise, level by level.
def total(xs):
    while len(xs) > 1:
        pairs = [xs[i] + xs[i + 1] for i in range(0, len(xs) - 1, 2)]
        xs = pairs + ([xs[-1]] if len(xs) % 2 else [])
    return xs[0]


# Exercise 4: two chains that never meet, one per worker: at best half the time (2x);
# the cores also run Python and the engine's bookkeeping, so somewhat below.
SPEEDUP = 1.8
