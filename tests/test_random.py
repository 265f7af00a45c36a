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


def test_a_negative_seed_is_a_seed_as_in_mxnet():
    draws = []
    for seed in (-1, -1, -2, 1):
        mx.random.seed(seed)
        draws.append(nd.random.uniform(shape=(4,)).asnumpy())
    np.testing.assert_array_equal(draws[0], draws[1])
    assert not np.array_equal(draws[0], draws[2]) and not np.array_equal(draws[0], draws[3])


@pytest.mark.parametrize("call, message", [
    (lambda: nd.random.normal(0, -1, (2, 2)), r"scale=-1.0 is a standard deviation and must"),
    (lambda: nd.random.normal(0, 0, (2, 2)), r"scale=0.0 is a standard deviation and must"),
    (lambda: nd.random.uniform(2, 1, (2, 2)), r"low=2.0 must be less than or equal to high"),
    (lambda: nd.random.randint(6, 5, (2, 2)), r"low=6 must be less than or equal to high=5"),
])
def test_a_sampler_checks_its_parameters_when_it_runs(call, message):
    """As MXNet's kernels: the call returns, the failure is raised at the sync point (the
    array's read, or waitall), naming the operator and the line that pushed it."""
    with engine.engine_scope(engine.ThreadedEngine(1)):
        drawn = call()  # no error here ...
        product = nd.dot(drawn, drawn)  # ... nor here: it reads an array not yet computed
        with pytest.raises(mx.MXNetError, match=message) as failure:
            product.asnumpy()
        assert "_random_" in str(failure.value) and "test_random.py" in str(failure.value)
        healthy = nd.random.uniform(shape=(2,))
        call()
        with pytest.raises(mx.MXNetError, match=message):
            nd.waitall()
        assert healthy.asnumpy().shape == (2,)  # other arrays stay readable


def test_an_empty_sampling_range_gives_its_one_value():
    assert (nd.random.randint(5, 5, (3,)).asnumpy() == 5).all()
    assert (nd.random.uniform(2, 2, (3,)).asnumpy() == 2).all()


@pytest.mark.parametrize("draw, mean, std", [
    (lambda: nd.random.gamma(alpha=9.0, beta=0.5, shape=(20000,)), 4.5, 1.5),
    (lambda: nd.random.exponential(scale=0.25, shape=(20000,)), 0.25, 0.25),
    (lambda: nd.random.poisson(lam=4.0, shape=(20000,)), 4.0, 2.0),
    (lambda: nd.random.negative_binomial(k=3, p=0.4, shape=(20000,)), 4.5, 15 ** 0.5 / 1.2),
    (lambda: nd.random.generalized_negative_binomial(mu=2.0, alpha=0.3, shape=(20000,)),
     2.0, (2.0 + 0.3 * 4) ** 0.5),
    (lambda: nd.random.randn(100, 200, loc=10.0, scale=0.5), 10.0, 0.5),
])
def test_more_samplers_have_mxnets_means_and_spreads(draw, mean, std):
    mx.random.seed(3)
    values = draw().asnumpy().astype(np.float64)
    assert abs(values.mean() - mean) < 0.05 * max(std, 1) and abs(values.std() - std) < 0.05 * std


def test_a_gamma_with_a_negative_shape_fails_at_the_sync_point():
    with engine.engine_scope(engine.ThreadedEngine(1)):
        drawn = nd.random.gamma(alpha=-1.0, shape=(2,))
        with pytest.raises(mx.MXNetError, match="alpha=-1.0 is a shape and must be > 0"):
            drawn.asnumpy()


def test_multinomial_draws_categories_and_differentiates_their_log_probability():
    mx.random.seed(5)
    x = nd.array([[0.0, 0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1, 0.0]])
    x.attach_grad()
    with mx.autograd.record():
        drawn, log_p = nd.random.multinomial(x, shape=20000, get_prob=True)
        (log_p * 5).backward()
    samples, values = drawn.asnumpy(), x.asnumpy()
    assert drawn.dtype == np.int32 and drawn.shape == (2, 20000)
    for row in range(2):
        frequency = np.bincount(samples[row], minlength=5) / 20000
        np.testing.assert_allclose(frequency, values[row], atol=0.02)
        np.testing.assert_allclose(log_p.asnumpy()[row], np.log(values[row][samples[row]]),
                                   rtol=1e-5)
        expected = np.bincount(samples[row], minlength=5) * 5.0 / np.maximum(values[row], 1e-9)
        np.testing.assert_allclose(x.grad.asnumpy()[row], np.where(values[row], expected, 0),
                                   rtol=1e-4)


def test_shuffle_permutes_rows_and_keeps_each_row():
    mx.random.seed(6)
    data = nd.arange(12).reshape((4, 3))
    shuffled = nd.random.shuffle(data).asnumpy()
    assert sorted(shuffled[:, 0]) == [0, 3, 6, 9]
    np.testing.assert_array_equal(shuffled - shuffled[:, :1], np.tile([0, 1, 2], (4, 1)))


def test_unique_zipfian_gives_distinct_classes_and_the_draws_they_took():
    mx.random.seed(3)
    classes, trials = nd._internal._sample_unique_zipfian(50, shape=(3, 20))
    assert classes.shape == (3, 20) and classes.dtype == np.int64 and trials.shape == (3,)
    for row, took in zip(classes.asnumpy(), trials.asnumpy()):
        assert len(set(row)) == 20 and row.min() >= 0 and row.max() < 50 and took >= 20
    everything, took = nd._internal._sample_unique_zipfian(4, shape=(1, 4))
    assert sorted(everything.asnumpy()[0]) == [0, 1, 2, 3] and took.asnumpy()[0] >= 4
    with pytest.raises(mx.base.MXNetError, match="num_sampled <= range_max"):
        nd._internal._sample_unique_zipfian(3, shape=(1, 4))


def test_rand_zipfian_draws_log_uniform_classes_and_their_expected_counts():
    mx.random.seed(5)
    true = nd.array([0, 3, 19]).astype("int32")
    sampled, count_true, count_sampled = nd.contrib.rand_zipfian(true, 20000, 20)
    probability = np.log((np.arange(20) + 2) / (np.arange(20) + 1)) / np.log(21)
    assert sampled.dtype == np.int64 and set(sampled.asnumpy()) <= set(range(20))
    frequency = np.bincount(sampled.asnumpy(), minlength=20) / 20000
    np.testing.assert_allclose(frequency, probability, atol=0.01)
    np.testing.assert_allclose(count_true.asnumpy(), 20000 * probability[[0, 3, 19]])
    np.testing.assert_allclose(count_sampled.asnumpy(), 20000 * probability[sampled.asnumpy()])
    graph = mx.sym.Group(mx.sym.contrib.rand_zipfian(mx.sym.var("t"), 7, 20))
    outs = graph.bind(mx.cpu(), {"t": true}).forward()
    assert [o.shape for o in outs] == [(7,), (3,), (7,)]
