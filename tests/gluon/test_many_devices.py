"""Several devices in one process: contexts, copies, split_and_load, one copy of each
Parameter per device, and the Trainer keeping them equal (hybridlab/context.py, NOTE [One
copy per device] in gluon/parameter.py)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hybridlab as mx
from hybridlab import autograd, engine, gluon, nd
from hybridlab.gluon import nn

CPU0, CPU1 = mx.cpu(0), mx.cpu(1)


def test_arrays_keep_their_device_and_results_take_the_first_inputs():
    a, b = nd.ones((2,)), nd.ones((2,), ctx=CPU1)
    assert a.context is CPU0 and b.context is CPU1 and mx.cpu(1) is CPU1  # interned
    assert (a + b).context is CPU0 and (b + a).context is CPU1  # MXNet 1.9.1's rule
    assert nd.dot(b, a).context is CPU1 and (b * 2).context is CPU1
    assert repr(b).endswith("<NDArray 2 @cpu(1)>")
    with mx.cpu(2):
        assert nd.zeros((1,)).context is mx.cpu(2) and nd.array([1]).context is mx.cpu(2)
        with mx.cpu(3):
            assert mx.current_context() is mx.cpu(3)
        assert mx.current_context() is mx.cpu(2)
    assert mx.current_context() is CPU0
    with pytest.raises(ValueError, match="device id"):
        mx.cpu(-1)


def test_copyto_a_device_is_one_engine_op_that_copies_the_bytes():
    x = nd.array([1.0, 2.0])
    x.wait_to_read()
    with engine.engine_scope("NaiveEngine") as eng:
        eng.set_tracing(True)
        y = x.copyto(CPU1)
        z = y.as_in_context(CPU0)
        assert y.as_in_context(CPU1) is y
        names = [record.name for record in eng.trace]
    assert names == ["_copyto", "_copyto"]
    assert y.context is CPU1 and z.context is CPU0
    assert not np.shares_memory(x._data, y._data)
    np.testing.assert_array_equal(z.asnumpy(), [1.0, 2.0])


def test_a_copy_to_another_device_passes_the_gradient_back():
    x = nd.array([1.0, 2.0, 3.0])
    x.attach_grad()
    with autograd.record():
        y = (x.copyto(CPU1) * 3).sum()
    y.backward()
    assert y.context is CPU1 and x.grad.context is CPU0
    np.testing.assert_array_equal(x.grad.asnumpy(), [3.0, 3.0, 3.0])


def test_split_and_load_puts_one_slice_on_each_device():
    batch = nd.arange(12).reshape((6, 2))
    parts = gluon.utils.split_and_load(batch, [CPU0, CPU1])
    assert [p.context for p in parts] == [CPU0, CPU1]
    np.testing.assert_array_equal(np.concatenate([p.asnumpy() for p in parts]), batch.asnumpy())
    odd = gluon.utils.split_and_load(nd.arange(6).reshape((3, 2)), [CPU0, CPU1],
                                     even_split=False)
    assert [p.shape for p in odd] == [(2, 2), (1, 2)]  # MXNet's sizes
    with pytest.raises(ValueError, match="evenly"):
        gluon.utils.split_and_load(nd.arange(6).reshape((3, 2)), [CPU0, CPU1])
    (whole,) = gluon.utils.split_and_load(np.ones((3, 2)), [CPU1])
    assert whole.context is CPU1 and whole.shape == (3, 2)


def test_a_parameter_holds_one_equal_copy_per_device():
    net = nn.Dense(2, in_units=3)
    net.initialize(ctx=[CPU0, CPU1])
    assert net.weight.list_ctx() == [CPU0, CPU1]
    first, second = net.weight.list_data()
    assert first.context is CPU0 and second.context is CPU1
    np.testing.assert_array_equal(first.asnumpy(), second.asnumpy())
    assert not np.shares_memory(first._data, second._data)
    assert net.weight.data(CPU1) is second and net.weight.data() is first  # current: cpu(0)
    assert [g.context for g in net.weight.list_grad()] == [CPU0, CPU1]
    assert net(nd.ones((1, 3), ctx=CPU1)).context is CPU1
    with pytest.raises(RuntimeError, match=r"was not initialized on context cpu\(2\)\. It was "
                                           r"only initialized on \[cpu\(0\), cpu\(1\)\]"):
        net(nd.ones((1, 3), ctx=mx.cpu(2)))
    with pytest.raises(ValueError, match="twice"):
        nn.Dense(2, in_units=3).initialize(ctx=[CPU0, CPU0])


def test_deferred_parameters_are_made_on_every_device_and_hybridized_calls_feed_theirs():
    net = nn.HybridSequential()
    net.add(nn.Dense(4, activation="relu"), nn.Dense(2))
    net.initialize(ctx=[CPU0, CPU1])
    net.hybridize()
    x = nd.random.normal(shape=(3, 5))
    on0, on1 = net(x), net(x.as_in_context(CPU1))
    assert on0.context is CPU0 and on1.context is CPU1
    np.testing.assert_allclose(on0.asnumpy(), on1.asnumpy(), rtol=1e-6)
    net[0].weight.data(CPU1)[:] = 0  # the cpu(1) program reads cpu(1)'s copy
    assert not np.allclose(net(x.as_in_context(CPU1)).asnumpy(), on0.asnumpy())
    np.testing.assert_allclose(net(x).asnumpy(), on0.asnumpy(), rtol=1e-6)


def _mlp(hidden, seed, devices, hybrid):
    mx.random.seed(seed)
    net = nn.HybridSequential()
    for units in hidden:
        net.add(nn.Dense(units, activation="relu"))
    net.add(nn.Dense(3))
    net.initialize(mx.init.Xavier(), ctx=devices)
    if hybrid:
        net.hybridize()
    return net


def _train(hidden, seed, devices, hybrid, kvstore="device", update_on_kvstore=None,
           optimizer=("sgd", {"learning_rate": 0.1, "momentum": 0.9}), steps=3, batch=6):
    net = _mlp(hidden, seed, devices, hybrid)
    trainer = gluon.Trainer(net.collect_params(), *optimizer, kvstore=kvstore,
                            update_on_kvstore=update_on_kvstore)
    rng = np.random.default_rng(seed)
    loss = gluon.loss.SoftmaxCrossEntropyLoss()
    for _ in range(steps):
        x = nd.array(rng.normal(size=(batch, 5)))
        y = nd.array(rng.integers(0, 3, size=(batch,)))
        xs = gluon.utils.split_and_load(x, devices, even_split=False)
        ys = gluon.utils.split_and_load(y, devices, even_split=False)
        with autograd.record():
            losses = [loss(net(a), b) for a, b in zip(xs, ys)]
        for value in losses:
            value.backward()
        trainer.step(batch)
    return net, trainer


@settings(max_examples=12, deadline=None)
@given(hidden=st.lists(st.integers(1, 6), min_size=0, max_size=2), seed=st.integers(0, 99),
       devices=st.integers(2, 3), batch=st.integers(3, 7), hybrid=st.booleans(),
       mode=st.sampled_from([("device", None), ("local", None), ("device", False)]),
       optimizer=st.sampled_from([("sgd", {"learning_rate": 0.1, "momentum": 0.9}),
                                  ("adam", {"learning_rate": 0.01})]))
def test_one_device_and_several_train_the_same_weights(hidden, seed, devices, batch, hybrid,
                                                       mode, optimizer):
    """Data parallelism changes where the gradient is computed, not what it is: the sum
    of the slices' gradients is the batch's (to float32 rounding of the order of sums)."""
    one, _ = _train(hidden, seed, [CPU0], hybrid, optimizer=optimizer, batch=batch)
    many, trainer = _train(hidden, seed, [mx.cpu(i) for i in range(devices)], hybrid, *mode,
                           optimizer=optimizer, batch=batch)
    assert trainer._kvstore is not None and trainer._update_on_kvstore is (mode[1] is None)
    for p1, pn in zip(one.collect_params().values(), many.collect_params().values()):
        for copy in pn.list_data():
            np.testing.assert_allclose(copy.asnumpy(), p1.data().asnumpy(), rtol=1e-4,
                                       atol=1e-5)


def test_without_a_store_each_device_follows_its_own_gradient():
    """MXNet's kvstore=None: no sum across devices, so the copies drift apart."""
    net, trainer = _train([4], 0, [CPU0, CPU1], False, kvstore=None)
    first, second = net[0].weight.list_data()
    assert trainer._kvstore is None
    assert not np.allclose(first.asnumpy(), second.asnumpy())


def test_one_device_makes_no_store():
    _, trainer = _train([4], 0, [CPU0], False)
    assert trainer._kvstore is None


def test_dist_async_refuses_updates_off_the_store():
    net = _mlp([2], 0, [CPU0], False)
    with pytest.raises(ValueError, match="update_on_kvstore=True"):
        trainer = gluon.Trainer(net.collect_params(), "sgd", kvstore="dist_async",
                                update_on_kvstore=False)
        trainer.step(1)


def test_reset_ctx_moves_every_parameter_with_its_values():
    net = nn.Dense(2, in_units=3)
    net.initialize()
    before = net.weight.data().asnumpy()
    net.collect_params().reset_ctx([CPU0, CPU1])
    assert net.collect_params().list_ctx() == [CPU0, CPU1]
    for copy in net.weight.list_data():
        np.testing.assert_array_equal(copy.asnumpy(), before)
    assert net(nd.ones((1, 3), ctx=CPU1)).context is CPU1


@pytest.mark.parametrize("hybrid", [False, True])
def test_a_step_on_two_devices_runs_each_devices_ops_on_its_own_worker(hybrid):
    """NOTE [A worker per device] in engine.py: on a ThreadedEngine every op of a device's
    forward, backward and update runs on that device's worker, the copies on the copy
    stream of the device they copy into, and the weights are NaiveEngine's, bit for bit."""
    def step() -> tuple[list, list]:
        mx.random.seed(5)
        net = nn.HybridSequential()
        net.add(nn.Dense(8, activation="relu", in_units=4), nn.Dense(3, in_units=8))
        net.initialize(mx.init.Xavier(), ctx=[CPU0, CPU1])
        if hybrid:
            net.hybridize()
        trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
        loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        xs = gluon.utils.split_and_load(nd.random.normal(shape=(6, 4)), [CPU0, CPU1])
        ys = gluon.utils.split_and_load(nd.array([0, 1, 2, 0, 1, 2]), [CPU0, CPU1])
        with autograd.record():
            losses = [loss_fn(net(x), y) for x, y in zip(xs, ys)]
        grads_on = [loss.context for loss in losses]
        for value in losses:
            value.backward()
        grads_on += [g.context for p in net.collect_params().values() for g in p.list_grad()]
        trainer.step(6)
        weights = [w.asnumpy() for p in net.collect_params().values() for w in p.list_data()]
        return weights, grads_on

    with engine.engine_scope("NaiveEngine"):
        expected, _ = step()
    ran: list = []  # (the op's device, whether a copy, its name, the stream that ran it)
    with engine.engine_scope(engine.ThreadedEngine(1)) as eng:
        def pretask(task: engine.Task, worker: int) -> None:
            ran.append((task.device, task.copy, task.name, eng.worker_names[worker]))

        with engine.Callback(pretask=pretask):
            weights, grads_on = step()
            nd.waitall()
    for want, have in zip(expected, weights):
        np.testing.assert_array_equal(have, want)
    assert grads_on[:2] == [CPU0, CPU1] and set(grads_on[2:]) == {CPU0, CPU1}
    # every op ran on its stream (or in the caller, waiting for it: NOTE [help while waiting])
    for device, copy, name, stream in ran:
        assert stream in (f"{device} copy" if copy else f"{device}", "caller"), name
    assert {(device, copy) for device, copy, _, _ in ran} == {(CPU0, False), (CPU1, False),
                                                              (CPU0, True), (CPU1, True)}
    forward = "CachedOp" if hybrid else "FullyConnected"
    assert {(device, name) for device, copy, name, _ in ran if not copy} >= {
        (CPU0, forward), (CPU1, forward), (CPU0, "kv_update")}  # the store is on cpu(0)


@pytest.mark.parametrize("update_on_kvstore", [True, False])
def test_an_lr_scheduler_sets_the_rate_of_a_store_that_updates(update_on_kvstore):
    """The rate the scheduler gives each step reaches the optimizer wherever it runs: on
    the store (update_on_kvstore) as on each device; two devices follow one device."""
    def train(devices):
        param = gluon.Parameter("w", shape=(2,))
        param.initialize(mx.init.Zero(), ctx=devices)
        schedule = mx.lr_scheduler.FactorScheduler(step=1, factor=0.5, base_lr=1.0)
        trainer = gluon.Trainer([param], "sgd", {"learning_rate": 1.0, "momentum": 0.5,
                                                 "lr_scheduler": schedule},
                                update_on_kvstore=update_on_kvstore if len(devices) > 1
                                else None)
        for _ in range(4):
            for grad in param.list_grad():
                grad[:] = nd.ones((2,), ctx=grad.context) / len(devices)
            trainer.step(1)
        return [w.asnumpy() for w in param.list_data()]

    alone = train([CPU0])[0]
    # at a constant rate 1 the momentum steps are -1, -1.5, -1.75, -1.875: the rate changed
    assert not np.allclose(alone, -6.125)
    for weights in train([CPU0, CPU1]):
        np.testing.assert_allclose(weights, alone, rtol=1e-6)
