"""Reference solutions for lesson 02 (hybridize); tests/test_lessons.py runs them, and
`make assignments` builds the lesson's assignment from them (tools/assignments.py)."""

import os

from hybridlab import nd
from hybridlab.gluon import nn


# %% Exercise 1
class RowScaler(nn.HybridBlock):
    ### BEGIN SOLUTION
    """Divide each row by its sum, with F.* operators only."""

    def hybrid_forward(self, F, x):  # noqa: N803 -- MXNet's signature
        return F.broadcast_div(x, F.sum(x, axis=1, keepdims=True))
    ### END SOLUTION


# %% Exercise 2
### BEGIN SOLUTION
PRINT_COUNT = 3  # two imperative calls, then one trace; cached calls run no Python
### END SOLUTION


# %% Exercise 3
def export_roundtrip(directory: str) -> tuple:
    """Hybridize, run once, export at epoch 1; returns (prefix, net, x, epoch), what the
    check takes."""
    ### BEGIN SOLUTION
    net = nn.HybridSequential()
    net.add(nn.Dense(8, activation="relu"), nn.Dense(2))
    net.initialize()
    net.hybridize()
    x = nd.random.normal(shape=(3, 5))
    net(x)
    prefix = os.path.join(directory, "exercise")
    net.export(prefix, epoch=1)  # writes exercise-symbol.json and exercise-0001.params
    return prefix, net, x, 1
    ### END SOLUTION


# %% Exercise 4
### BEGIN SOLUTION
# The arena holds the two hidden layers' outputs, 16 x 256 and 16 x 128 float32; each
# relu writes in place, and the last layer's 16 x 2 result is handed to the caller, not
# kept: 16 * (256 + 128) * 4 bytes.
ARENA_BYTES = 16 * (256 + 128) * 4
### END SOLUTION

# %% Autograding
AUTOGRADE = {
    1: ["check_hybridizable(RowScaler)"],
    2: ["check_print_count(PRINT_COUNT)"],
    3: ["check_export_roundtrip(*export_roundtrip('.'))"],
    4: ["check_arena_bytes(ARENA_BYTES)"],
}
