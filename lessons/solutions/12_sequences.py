"""Reference solutions for lesson 12 (sequences); tests/test_lesson12.py runs them, and
`make assignments` builds the lesson's assignment from them (tools/assignments.py)."""

from hybridlab.exercises import lesson12


# %% Exercise 1
### BEGIN SOLUTION
# Every step adds one copy of the cell's operators (the difference between two steps and
# one); what is left over at one step does not repeat.
ONE, TWO = lesson12.unrolled_nodes(1), lesson12.unrolled_nodes(2)
UNROLLED_NODES_50 = (ONE - (TWO - ONE)) + (TWO - ONE) * 50
### END SOLUTION

# %% Exercise 2
### BEGIN SOLUTION
# The lines go to keys 8, 8, 8, 16, 32, 32: 104 tokens computed for 76 real ones.
PADDING = 1 - (3 + 5 + 8 + 9 + 20 + 31) / (8 + 8 + 8 + 16 + 32 + 32)
### END SOLUTION

# %% Exercise 3
### BEGIN SOLUTION
# The bound grows by the same bytes per step, so extend the line through the
# measurements at 16 and 24 steps by another 8 steps.
AT_16, AT_24 = lesson12.bptt_bytes(16), lesson12.bptt_bytes(24)
BPTT_32 = AT_24 + (AT_24 - AT_16)
### END SOLUTION


# %% Exercise 4
def make_body(F, hidden, i2h_weight, h2h_weight, i2h_bias, h2h_bias):
    """One GRU step as a foreach body, MXNet's gates stacked reset, update, new."""
    ### BEGIN SOLUTION
    units = 3 * hidden

    def body(x, states):
        h = states[0]
        x_r, x_z, x_n = F.split(F.FullyConnected(x, i2h_weight, i2h_bias, num_hidden=units),
                                num_outputs=3, axis=1)
        h_r, h_z, h_n = F.split(F.FullyConnected(h, h2h_weight, h2h_bias, num_hidden=units),
                                num_outputs=3, axis=1)
        r, z = F.sigmoid(x_r + h_r), F.sigmoid(x_z + h_z)
        new = F.tanh(x_n + r * h_n)
        h = (1 - z) * new + z * h
        return h, [h]

    return body
    ### END SOLUTION


# %% Autograding
# Every check here is exact or counts (nodes, tokens, the planner's bytes): no clock needed.
AUTOGRADE = {
    1: ["check_unrolled_nodes(UNROLLED_NODES_50, 50)"],
    2: ["check_padding_waste(PADDING, [3, 5, 8, 9, 20, 31], [8, 16, 32])"],
    3: ["check_bptt_bytes(BPTT_32, 32)"],
    4: ["check_gru_body(make_body)"],
}
