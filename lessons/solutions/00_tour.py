"""Reference solutions for lesson 00 (the tour); tests/test_lessons.py runs them."""

from hybridlab import nd
from hybridlab.gluon import nn


def tour_mlp() -> nn.HybridSequential:
    """Exercise 1: 20 features -> 32 -> 16 -> 3."""
    net = nn.HybridSequential()
    net.add(nn.Dense(32, activation="relu"), nn.Dense(16, activation="relu"), nn.Dense(3))
    net.initialize()
    return net


def lesson_net() -> nn.HybridSequential:
    """The network of the tour after its first call, for exercise 2."""
    net = nn.HybridSequential()
    net.add(nn.Dense(128, activation="relu"), nn.Dense(64, activation="relu"), nn.Dense(10))
    net.initialize()
    net(nd.random.normal(shape=(8, 64)))
    return net


FC_COUNT = 3  # exercise 2: one FullyConnected per Dense layer; the ReLUs are separate nodes


def outputs_before_and_after() -> tuple:
    """Exercise 3: one network, one input, run before and after hybridize()."""
    net = lesson_net()
    x = nd.random.normal(shape=(4, 64))
    before = net(x)
    net.hybridize()
    return before, net(x)
