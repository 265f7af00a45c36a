"""Reference solutions for lesson 03 (lazy evaluation); tests/test_lessons.py runs them."""

# Exercise 1: the calls that need the numbers themselves. shape, dtype and reshape only
# need what is known when the task is pushed.
SYNC_POINTS = {"print", "asnumpy", "asscalar", "wait_to_read", "nd.waitall"}

# Exercise 2: once a and b exist, a + b and a - b each read only a and b.
READY_AFTER_TWO_STEPS = 2

# Exercise 3: loss.wait_to_read() runs loss's tasks only; nd.waitall() would also wait
# for other, and other.asnumpy() waits for the wrong array.
BARRIER = "loss.wait_to_read()"


# Exercise 4: synchronise on each result before pushing the next batch's work.
def train(batches):
    from hybridlab import nd

    outputs = []
    for x in batches:
        w = nd.ones((x.shape[1], 8))
        outputs.append(nd.dot(x, w))
        outputs[-1].wait_to_read()
    return outputs


# Exercise 5: d2l's model. Pushing an iteration's two tasks (t1) is quicker than the worker
# running them with its bookkeeping (t2), so without barriers an iteration costs about t2;
# with one it costs t1 + t2 + t3, and the hand-over t3 between two Python threads is of the
# order of t2 itself for such small products: (t1 + t2 + t3) / t2, about two.
BARRIER_RATIO = 2.0
