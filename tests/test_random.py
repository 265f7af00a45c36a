"""mx.random: one seed stream drawn at push time, so numbers never depend on the engine."""

from __future__ import annotations

import numpy as np
import pytest

import hybridlab as mx
from hybridlab import engine, nd

pytestmark = pytest.mark.timeout(60)  # pytest-timeout: a deadlocked wait fails fast


def _draw(engine_choice) -> list[np.ndarray]:
    with engine.engine_scope(engine_choice):
        mx.random.seed(42)
        arrays = [nd.random.normal(shape=(3, 2)), nd.random_uniform(-1, 1, shape=(4,)),
                  mx.random.normal(1.0, 2.0, shape=(2,)), mx.random.uniform(shape=(2, 2)),
                  nd.Dropout(nd.ones((8,)), p=0.5, mode="always")]
        return [a.asnumpy() for a in arrays]


def test_same_seed_same_numbers_on_every_engine_and_worker_count():
    reference = _draw("NaiveEngine")
    for choice in ["StepEngine", engine.ThreadedEngine(1), engine.ThreadedEngine(2),
                   engine.ThreadedEngine(4)]:
        for expected, got in zip(reference, _draw(choice)):
            np.testing.assert_array_equal(got, expected)


def test_seed_restarts_the_stream_and_differs_between_seeds():
    mx.random.seed(1)
    first = nd.random.normal(shape=(5,)).asnumpy()
    second = nd.random.normal(shape=(5,)).asnumpy()
    mx.random.seed(1)
    np.testing.assert_array_equal(nd.random.normal(shape=(5,)).asnumpy(), first)
    assert not np.array_equal(first, second)
    mx.random.seed(2)
    assert not np.array_equal(nd.random.normal(shape=(5,)).asnumpy(), first)


def test_distribution_parameters_and_dtype():
    mx.random.seed(0)
    x = nd.random.uniform(2, 3, shape=(1000,))
    values = x.asnumpy()
    assert x.dtype == np.float32 and values.min() >= 2 and values.max() < 3
    y = nd.random.normal(loc=5, scale=0.1, shape=(2000,), dtype="float64").asnumpy()
    assert y.dtype == np.float64 and abs(y.mean() - 5) < 0.02


def test_seed_rejects_non_integers():
    with pytest.raises(TypeError, match="seed_state must be an int"):
        mx.random.seed(1.5)
    with pytest.raises(ValueError, match=">= 0"):
        mx.random.seed(-1)
