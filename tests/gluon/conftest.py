"""Shared fixtures for the gluon tests: fresh name counters and a fixed seed per test."""

import numpy as np
import pytest

import hybridlab as mx


@pytest.fixture(autouse=True)
def fresh_names_and_seed():
    """Each test sees dense0_, hybridnet0_ ... and the same random numbers."""
    mx.random.seed(0)
    np.random.seed(0)
    with mx.name.NameManager():
        yield
    mx.nd.waitall()
