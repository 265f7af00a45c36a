"""Reference solutions for lesson 00 (the tour); tests/test_lessons.py runs them."""

from hybridlab import nd
from hybridlab.gluon import nn


def tour_mlp() -> nn.HybridSequential:
    """Exercise 1: 20 features -> 32 -> 16 -> 3, a ReLU after each hidden layer."""
    net = nn.HybridSequential()
    net.add(nn.Dense(32, activation="relu"), nn.Dense(16, activation="relu"), nn.Dense(3))
    net.initialize()
    return net


def lesson_net() -> nn.HybridSequential:
    """The network of the tour after its first call, for exercises 2 and 3."""
    net = nn.HybridSequential()
    net.add(nn.Dense(128, activation="relu"), nn.Dense(64, activation="relu"), nn.Dense(10))
    net.initialize()
    net(nd.random.normal(shape=(8, 64)))
    return net


FC_COUNT = 3  # exercise 2: one FullyConnected per Dense layer; the ReLUs are separate nodes

# Exercise 3: an imperative call is five engine operations (3 FullyConnected + 2 relu),
# each paying the framework's Python; a hybridized call is one. If every operation cost
# the same, hybridized would be five times faster; the compiled operation is leaner than
# an imperative one, so guess a little more. (The check measures; on a real clock the
# imperative operations turn out dearer still -- that is the lesson of its feedback.)
SPEEDUP_GUESS = 6
