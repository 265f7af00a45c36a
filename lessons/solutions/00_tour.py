"""Reference solutions for lesson 00 (the tour); tests/test_lessons.py runs them, and
`make assignments` builds the lesson's assignment from them (tools/assignments.py)."""

from hybridlab import nd
from hybridlab.gluon import nn


def lesson_net() -> nn.HybridSequential:
    """The network of the tour after its first call, for exercises 2 and 3."""
    net = nn.HybridSequential()
    net.add(nn.Dense(128, activation="relu"), nn.Dense(64, activation="relu"), nn.Dense(10))
    net.initialize()
    net(nd.random.normal(shape=(8, 64)))
    return net


# %% Exercise 1
def tour_mlp() -> nn.HybridSequential:
    ### BEGIN SOLUTION
    # 20 features -> 32 -> 16 -> 3, a ReLU after each hidden layer.
    net = nn.HybridSequential()
    net.add(nn.Dense(32, activation="relu"), nn.Dense(16, activation="relu"), nn.Dense(3))
    net.initialize()
    return net
    ### END SOLUTION


# %% Exercise 2
### BEGIN SOLUTION
FC_COUNT = 3  # one FullyConnected per Dense layer; the ReLUs are separate nodes
### END SOLUTION

# %% Exercise 3
### BEGIN SOLUTION
# An imperative call is five engine operations (3 FullyConnected + 2 relu), each paying
# the framework's Python; a hybridized call is one. If every operation cost the same,
# hybridized would be five times faster; the compiled operation is leaner than an
# imperative one, so guess a little more. (The check measures; on a real clock the
# imperative operations turn out dearer still -- that is the lesson of its feedback.)
SPEEDUP_GUESS = 6
### END SOLUTION

# %% Autograding
# The checks each exercise's answer must pass (expressions giving a Feedback); timed
# checks run on the deterministic clocks of hybridlab.exercises.clocks, so a grade never
# depends on the machine's load. Graded with the task clock, exercise 3's guess is
# judged against the 5 engine operations an imperative call runs for each hybridized one.
AUTOGRADE = {
    1: ["check_tour_mlp(tour_mlp())"],
    2: ["check_fc_count(lesson_net(), FC_COUNT)"],
    3: ["check_speedup_guess(lesson_net(), SPEEDUP_GUESS, calls=3, rounds=3, "
        "timer=TaskClock())"],
}
