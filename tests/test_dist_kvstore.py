"""dist_sync and dist_async on a 2-process Dask cluster (hybridlab/dask.py's store actor,
NOTE [The store as a Dask actor]): the same weights as one process, and errors, not hangs."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridlab import kvstore
from hybridlab.errors import MXNetError
from hybridlab.exercises import lesson10


def _close(a, b):
    for x, y in zip(a["weights"], b["weights"]):
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-5)


@settings(max_examples=4, deadline=None)
@given(hidden=st.lists(st.integers(1, 8), min_size=0, max_size=2).map(tuple),
       seed=st.integers(0, 50), batch=st.integers(2, 9), devices=st.integers(1, 2))
def test_dist_sync_on_two_workers_trains_the_weights_of_one_process(dask_client, hidden, seed,
                                                                    batch, devices):
    """Each rank trains on its slice of every batch and steps with the global batch size;
    the store sums the ranks' gradients and applies SGD once: one process's update."""
    one = lesson10.train_mlp(hidden, seed, steps=3, batch=batch, devices=1)
    ranks = kvstore.run_workers(lesson10.train_mlp, hidden, seed, 3, batch, 5, devices,
                              "dist_sync", client=dask_client)
    assert [r["rank"] for r in ranks] == [0, 1] and ranks[0]["num_workers"] == 2
    for result in ranks:
        _close(result, one)


def test_dist_async_applies_every_push_and_keeps_the_ranks_close(dask_client):
    """dist_async applies each push once, as it arrives, and no rank waits for the other:
    with momentum, two half-gradients applied one after the other are not the synchronous
    step's one sum, so the weights differ from one process's (and depend on timing)."""
    ranks = kvstore.run_workers(lesson10.train_mlp, (4,), 0, 3, 8, 5, 1, "dist_async",
                              client=dask_client)
    one = lesson10.train_mlp((4,), 0, steps=3, batch=8)
    assert [r["rank"] for r in ranks] == [0, 1]
    assert all(np.isfinite(w).all() for r in ranks for w in r["weights"])
    moved = [np.abs(w - w0).max() for w, w0 in zip(ranks[0]["weights"], one["weights"])]
    assert max(moved) > 0  # async is not the synchronous update


def _pushes_then_fails(fail_rank):
    import hybridlab as mx
    from hybridlab import nd

    kv = mx.kv.create("dist_sync")
    kv.init(0, nd.zeros((2,)))
    if kv.rank == fail_rank:
        raise RuntimeError("this worker stops here")
    out = nd.zeros((2,))
    kv.pushpull(0, nd.ones((2,)), out=out)  # waits for the other rank's push: never comes
    return out.asnumpy()


def test_a_lost_worker_is_an_error_on_every_rank_not_a_hang(dask_client):
    with pytest.raises(RuntimeError, match="this worker stops here"):
        kvstore.run_workers(_pushes_then_fails, 1, client=dask_client, timeout=30)


def test_the_store_waits_a_bounded_time(dask_client):
    """A rank that never pushes (alive, but stopped calling the store): the other raises
    after the store's timeout, naming what it waited for."""
    with pytest.raises(MXNetError, match="waited 2 s for the other workers' push of key 0"):
        kvstore.run_workers(_one_rank_skips_the_push, client=dask_client, timeout=2)


def _one_rank_skips_the_push():
    import hybridlab as mx
    from hybridlab import nd

    kv = mx.kv.create("dist_sync")
    kv.init(0, nd.zeros((2,)))
    if kv.rank == 0:
        out = nd.zeros((2,))
        kv.pushpull(0, nd.ones((2,)), out=out)
    return kv.rank


def _one_rank_dies():
    import os

    import hybridlab as mx
    from hybridlab import nd

    kv = mx.kv.create("dist_sync")
    kv.init(0, nd.zeros((2,)))
    if kv.rank == 1:
        os._exit(1)  # the process is gone: Dask's nanny notices and starts a new one
    out = nd.zeros((2,))
    kv.pushpull(0, nd.ones((2,)), out=out)
    return kv.rank


def test_a_worker_process_that_dies_mid_step_is_an_error_not_a_hang(dask_client):
    """Rank 1's process exits; rank 0's pushpull waits for its push until the store's
    timeout, and run_workers raises that, naming the wait (then gives up on rank 1)."""
    try:
        with pytest.raises(MXNetError, match="a worker was lost"):
            kvstore.run_workers(_one_rank_dies, client=dask_client, timeout=3)
    finally:
        dask_client.wait_for_workers(2, timeout=60)  # the nanny's new worker, for the others


def _train_with_rates(rates, kind, schedule=False):
    """A Dense layer trained with momentum, a new learning rate (``rates``, or a
    scheduler's when ``schedule``) and batch size each step; on ``kind`` ('dist_sync':
    this rank's half of each batch), or alone (kind None)."""
    import hybridlab as mx
    from hybridlab import autograd, gluon, nd
    from hybridlab.gluon import nn

    mx.random.seed(0)
    net = nn.Dense(3, in_units=4)
    net.initialize(mx.init.Xavier())
    kv = mx.kv.create(kind) if kind else None
    rank, workers = (kv.rank, kv.num_workers) if kv else (0, 1)
    hyper = {"learning_rate": 0.1, "momentum": 0.5}
    if schedule:
        hyper["lr_scheduler"] = mx.lr_scheduler.FactorScheduler(1, 0.5, base_lr=0.3)
    trainer = gluon.Trainer(net.collect_params(), "sgd", hyper, kvstore=kv)
    data = np.random.default_rng(1).normal(size=(8, 7)).astype("float32")
    rows = slice(rank * 8 // workers, (rank + 1) * 8 // workers)
    loss_fn = gluon.loss.L2Loss()
    for step, rate in enumerate(rates):
        if not schedule:
            trainer.set_learning_rate(rate)
        x, y = nd.array(data[rows, :4]), nd.array(data[rows, 4:])
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(8 * (1 + step % 2))  # the batch size changes too (rescale_grad)
    return [p.data().asnumpy() for p in net.collect_params().values()]


def test_set_learning_rate_and_a_new_batch_size_reach_the_dist_store(dask_client):
    """With update_on_kvstore the optimizer runs on the store: a new learning rate
    (Trainer.set_learning_rate) and a new batch size must reach it, or two workers would
    go on with the first ones while one process follows them."""
    rates = [0.1, 0.3, 0.0, 0.05]
    alone = _train_with_rates(rates, None)
    ranks = kvstore.run_workers(_train_with_rates, rates, "dist_sync", client=dask_client)
    for weights in ranks:
        for got, want in zip(weights, alone):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    fixed = _train_with_rates([0.1] * 4, None)  # the rates matter: a check that can fail
    assert max(np.abs(a - b).max() for a, b in zip(alone, fixed)) > 1e-3


def _compressed_pushes(grads_by_rank, threshold):
    """Each rank pushes its gradients (one per step) through 2-bit compression; the
    values it pulls after each step."""
    import hybridlab as mx
    from hybridlab import nd

    kv = mx.kv.create("dist_sync")
    kv.set_gradient_compression({"type": "2bit", "threshold": threshold})
    kv.init(0, nd.zeros((4,)))
    pulled = []
    for grad in grads_by_rank[kv.rank]:
        out = nd.zeros((4,))
        kv.pushpull(0, nd.array(grad), out=out)
        pulled.append(out.asnumpy())
    return pulled


def test_2bit_compression_from_each_worker_to_the_store(dask_client):
    """MXNet compresses worker -> server: each rank sends its thresholded residual (the
    reference below), the store sums them; three steps, so the residuals carry over."""
    rng = np.random.default_rng(3)
    grads = [[rng.normal(scale=0.3, size=4).astype(np.float32) for _ in range(3)]
             for _ in range(2)]
    pulled = kvstore.run_workers(_compressed_pushes, grads, 0.25, client=dask_client)
    residuals = [np.zeros(4, np.float32) for _ in range(2)]
    for step in range(3):
        expected = np.zeros(4, np.float32)
        for rank in range(2):
            total = residuals[rank] + grads[rank][step]
            sent = np.where(total >= 0.25, 0.25, np.where(total <= -0.25, -0.25, 0.0))
            residuals[rank] = total - sent.astype(np.float32)
            expected += sent.astype(np.float32)
        for rank in range(2):
            np.testing.assert_array_equal(pulled[rank][step], expected)
    assert any(np.abs(values).max() > 0 for values in pulled[0])  # something was sent


def test_an_lr_scheduler_reaches_the_dist_store(dask_client):
    """The scheduler's rate of each step is the store's optimizer's too."""
    alone = _train_with_rates([None] * 4, None, schedule=True)
    ranks = kvstore.run_workers(_train_with_rates, [None] * 4, "dist_sync", True,
                              client=dask_client)
    for weights in ranks:
        for got, want in zip(weights, alone):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    fixed = _train_with_rates([0.3] * 4, None)  # the schedule matters: a check that can fail
    assert max(np.abs(a - b).max() for a, b in zip(alone, fixed)) > 1e-3
