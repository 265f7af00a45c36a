"""Reference solutions for lesson 07 (autograd and memory); tests/test_lessons.py runs them,
and `make assignments` builds the lesson's assignment from them (tools/assignments.py)."""

import numpy as np

from hybridlab import autograd
from hybridlab.exercises import lesson07


# %% Exercise 1
def gradients(x, w):
    ### BEGIN SOLUTION
    # Mark both inputs, record the forward, let backward fill the .grad.
    x.attach_grad()
    w.attach_grad()
    with autograd.record():
        result = lesson07.energy(x, w)
    result.backward()
    return x.grad, w.grad
    ### END SOLUTION


# %% Exercise 2
def numeric_gradient(f, x, eps=1e-5):
    ### BEGIN SOLUTION
    # Central differences, one entry at a time, each put back afterwards.
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        saved = x[index]
        x[index] = saved + eps
        above = f(x)
        x[index] = saved - eps
        below = f(x)
        x[index] = saved
        grad[index] = (above - below) / (2 * eps)
    return grad
    ### END SOLUTION


# %% Exercise 3
def train_step(layer, x, weights, every):
    ### BEGIN SOLUTION
    # The forward records only the last segment, whose tape the backward then uses as it
    # is; the segments before it are recomputed from their checkpoints.
    segments = [weights[i:i + every] for i in range(0, len(weights), every)]
    checkpoints, h = [], x
    for segment in segments[:-1]:
        checkpoints.append(h)
        for w in segment:
            h = layer(h, w)
    h.attach_grad()
    with autograd.record():
        end = h
        for w in segments[-1]:
            end = layer(end, w)
    end.backward()  # the gradient of sum(end): ones
    out_grad = h.grad
    for segment, start in zip(reversed(segments[:-1]), reversed(checkpoints)):
        start.attach_grad()
        with autograd.record():
            end = start
            for w in segment:
                end = layer(end, w)
        end.backward(out_grad)
        out_grad = start.grad
    ### END SOLUTION


# %% Exercise 4
### BEGIN SOLUTION
# Each of the 16 layers leaves its dot result and its tanh output on the tape, and the
# input is read by the first dot: 2 * 16 + 1 arrays of 32 x 64 float32.
TAPE_BYTES = (2 * 16 + 1) * 32 * 64 * 4
### END SOLUTION

# %% Autograding
AUTOGRADE = {
    1: ["check_gradients(gradients)"],
    2: ["check_numeric_gradient(numeric_gradient)"],
    3: ["check_train_step(train_step)"],
    4: ["check_tape_bytes(TAPE_BYTES)"],
}
