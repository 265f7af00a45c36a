"""Trainer: SGD with momentum and Adam against updates worked out by hand.

One parameter ``w``, loss ``sum(w * x)``, so the gradient is ``x`` and, with
``step(batch_size=2)``, the rescaled gradient is ``g = x / 2``. The expected numbers
below were computed by hand from MXNet's update rules (see gluon/trainer.py).
"""

import numpy as np
import pytest

from hybridlab import autograd, gluon, nd


def train(optimizer, hyper, inputs):
    w = gluon.Parameter("w", shape=(2,))
    w.initialize()
    w.set_data(nd.array([1.0, -2.0]))
    trainer = gluon.Trainer([w], optimizer, hyper)
    for x in inputs:
        with autograd.record():
            loss = (w.data() * nd.array(x)).sum()
        loss.backward()
        trainer.step(2)
    return w.data().asnumpy()


def test_sgd_with_momentum():
    # g = [1, 2];  state = -0.1 g = [-0.1, -0.2], w = [0.9, -2.2]
    # state = 0.9 [-0.1, -0.2] - 0.1 [1, 2] = [-0.19, -0.38], w = [0.71, -2.58]
    got = train("sgd", {"learning_rate": 0.1, "momentum": 0.9}, [[2.0, 4.0]] * 2)
    np.testing.assert_allclose(got, [0.71, -2.58], rtol=1e-6)


def test_sgd_with_momentum_and_weight_decay():
    # g + wd w = [1, 2] + 0.1 [1, -2] = [1.1, 1.8];  state = [-0.11, -0.18], w = [0.89, -2.18]
    # g + wd w = [1.089, 1.782];  state = 0.9 [-0.11, -0.18] - 0.1 [1.089, 1.782]
    #          = [-0.2079, -0.3402],  w = [0.6821, -2.5202]
    got = train("sgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.1}, [[2.0, 4.0]] * 2)
    np.testing.assert_allclose(got, [0.6821, -2.5202], rtol=1e-6)


def test_adam_with_bias_correction():
    # step 1, g = [1, 2]: m = [0.1, 0.2], v = [0.001, 0.004],
    #   lr_1 = 0.1 sqrt(1 - 0.999) / (1 - 0.9) = 0.0316228;  w -= lr_1 m / sqrt(v)
    #   = [0.1, 0.1]  ->  w = [0.9, -2.1]
    # step 2, g = [2, -1]: m = [0.29, 0.08], v = [0.004999, 0.004996],
    #   lr_2 = 0.1 sqrt(1 - 0.999^2) / (1 - 0.9^2) = 0.0235317
    #   w -= lr_2 m / sqrt(v) = [0.0965182, 0.0266337]  ->  w = [0.8034818, -2.1266337]
    got = train("adam", {"learning_rate": 0.1}, [[2.0, 4.0], [4.0, -2.0]])
    np.testing.assert_allclose(got, [0.8034818, -2.1266337], rtol=1e-6)


def test_unknown_optimizer_and_parameter_are_named():
    w = gluon.Parameter("w", shape=(2,))
    with pytest.raises(ValueError, match="unknown optimizer 'rmsporp'"):
        gluon.Trainer([w], "rmsporp")
    with pytest.raises(ValueError, match=r"sgd: unknown optimizer parameter\(s\) \['beta1'\]"):
        gluon.Trainer([w], "sgd", {"beta1": 0.9})


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_a_step_leaves_arrays_sharing_the_old_weights_alone(optimizer):
    """NOTE [Immutable buffers]: ``detach()`` may share the weight's buffer, so the update
    writes a fresh one instead of changing the old one in place."""
    from hybridlab import engine

    with engine.engine_scope("NaiveEngine"):  # detach() shares the buffer at once here
        w = gluon.Parameter("w", shape=(2,))
        w.initialize()
        w.set_data(nd.array([1.0, -2.0]))
        old = w.data().detach()
        shared = old._data is w.data()._data
        with autograd.record():
            loss = (w.data() * nd.array([2.0, 4.0])).sum()
        loss.backward()
        gluon.Trainer([w], optimizer, {"learning_rate": 0.1}).step(2)
        np.testing.assert_array_equal(old.asnumpy(), [1.0, -2.0])
        assert shared and not np.allclose(w.data().asnumpy(), [1.0, -2.0])


def test_a_step_is_one_engine_op_and_backward_stores_every_gradient_in_one():
    """Two parameters: ``backward()`` stores both gradients in one ``_assign`` op and the
    Trainer updates both in one ``multi_sgd_update`` op, each reading and writing every
    parameter's Var (so the engine orders them as the per-parameter ops were)."""
    from hybridlab import engine

    with engine.engine_scope("NaiveEngine") as eng:
        w, b = gluon.Parameter("w", shape=(2,)), gluon.Parameter("b", shape=(2,))
        for param, value in ((w, [1.0, -2.0]), (b, [0.5, 0.5])):
            param.initialize()
            param.set_data(nd.array(value))
        trainer = gluon.Trainer([w, b], "sgd", {"learning_rate": 0.1})
        with autograd.record():
            loss = (w.data() * nd.array([2.0, 4.0]) + b.data()).sum()
        eng.set_tracing(True)
        eng.clear_trace()
        loss.backward()
        trainer.step(2)
        records = list(eng.trace)
        eng.set_tracing(False)
    stores = [r for r in records if r.name == "_assign"]
    updates = [r for r in records if r.name.endswith("_update")]
    assert len(stores) == 1 and len(updates) == 1 and updates[0].name == "multi_sgd_update"
    grads = {str(w.grad()._var), str(b.grad()._var)}
    assert set(stores[0].writes) == grads and set(updates[0].reads) == grads
    assert set(updates[0].writes) == {str(w.data()._var), str(b.data()._var)}
    np.testing.assert_allclose(w.data().asnumpy(), [0.9, -2.2], rtol=1e-6)  # g = [1, 2]
    np.testing.assert_allclose(b.data().asnumpy(), [0.45, 0.45], rtol=1e-6)  # g = 1/2


def test_lr_mult_and_wd_mult_scale_each_parameters_update():

    x = gluon.Parameter("x", shape=(3,), lr_mult=0.5, init="ones")
    y = gluon.Parameter("y", shape=(3,), wd_mult=0.0, init="ones")
    for p in (x, y):
        p.initialize()
    trainer = gluon.Trainer([x, y], "sgd", {"learning_rate": 1.0, "wd": 0.1})
    with autograd.record():
        (x.data() + y.data()).sum().backward()
    trainer.step(1)
    # w -= lr * lr_mult * (g + wd * wd_mult * w)
    np.testing.assert_allclose(x.data().asnumpy(), 1 - 0.5 * (1 + 0.1), rtol=1e-6)
    np.testing.assert_allclose(y.data().asnumpy(), 1 - 1.0 * (1 + 0.0), atol=1e-7)
    x.lr_mult = 2.0  # read at every step, as MXNet's optimizer does
    with autograd.record():
        (x.data() * 1).sum().backward()
    before = x.data().asnumpy()
    trainer.step(1)
    np.testing.assert_allclose(x.data().asnumpy(), before - 2.0 * (1 + 0.1 * before), rtol=1e-6)


def test_an_lr_scheduler_sets_the_rate_of_each_step_and_states_round_trip(tmp_path):
    import hybridlab as mx

    x = gluon.Parameter("x", shape=(2,), init="zeros")
    x.initialize()
    schedule = mx.lr_scheduler.FactorScheduler(2, factor=0.1, base_lr=1.0)
    trainer = gluon.Trainer([x], "sgd", {"learning_rate": 1.0, "lr_scheduler": schedule,
                                         "momentum": 0.5})
    rates = []
    for _ in range(5):
        with autograd.record():
            (x.data() + 1).sum().backward()
        trainer.step(1)
        rates.append(trainer.learning_rate)
    np.testing.assert_allclose(rates, [1.0, 1.0, 0.1, 0.1, 0.01])
    with pytest.raises(UserWarning, match="lr_scheduler sets the learning rate"):
        trainer.set_learning_rate(0.5)
    trainer.save_states(str(tmp_path / "t.states"))
    key = ("x", x.list_ctx()[0])  # the optimizer's state of x on its one device
    momentum = trainer._states[key][0].copy()
    trainer._states[key][0][:] = 0
    trainer.load_states(str(tmp_path / "t.states"))
    np.testing.assert_array_equal(trainer._states[key][0], momentum)
    assert trainer._steps == 5


@pytest.mark.parametrize("update_on_kvstore", [True, False])
def test_lr_mult_counts_on_two_devices_whoever_updates(update_on_kvstore):
    import hybridlab as mx

    x = gluon.Parameter("x", shape=(3,), init="zeros")
    x.initialize(ctx=[mx.cpu(0), mx.cpu(1)])
    trainer = gluon.Trainer([x], "sgd", {"learning_rate": 1.0},
                            update_on_kvstore=update_on_kvstore)

    def step():
        with autograd.record():
            for w in x.list_data():
                (w + 1).sum().backward()
        trainer.step(1)

    step()  # two devices' gradients of 1 summed: -2
    x.lr_mult = 0.5  # read at every step, as MXNet's param_dict
    step()  # -2 - 0.5 * 2
    for copy in x.list_data():
        np.testing.assert_allclose(copy.asnumpy(), [-3, -3, -3])
    assert trainer._optimizer._get_lr(0) == 0.5


def _two_device_trainer(**kwargs):
    import hybridlab as mx

    x = gluon.Parameter("x", shape=(3,), init="zeros")
    x.initialize(ctx=[mx.cpu(0), mx.cpu(1)])
    trainer = gluon.Trainer([x], "sgd", {"learning_rate": 1.0, "momentum": 0.5}, **kwargs)

    def step():
        with autograd.record():
            for w in x.list_data():
                (w + 1).sum().backward()
        trainer.step(1)

    return x, trainer, step


def test_the_store_applies_the_trainers_own_optimizer_through_an_updater(tmp_path):
    from hybridlab import optimizer
    from hybridlab.errors import UpdateOnKVStoreError

    x, trainer, step = _two_device_trainer()
    assert trainer._kvstore is None and not trainer._kv_initialized  # made at the first step
    step()
    updater = trainer._kvstore._updater
    assert isinstance(updater, optimizer.Updater) and updater.optimizer is trainer._optimizer
    np.testing.assert_allclose(updater.states[0].asnumpy(), [-2, -2, -2])  # the momentum
    trainer.save_states(str(tmp_path / "t.states"))
    step()  # momentum 0.5 * -2 - 2 = -3
    trainer.load_states(str(tmp_path / "t.states"))
    np.testing.assert_allclose(updater.states[0].asnumpy(), [-2, -2, -2])
    with pytest.raises(UpdateOnKVStoreError, match="call step"):
        trainer.update(1)
    with pytest.raises(AssertionError, match="update_on_kvstore=False"):
        trainer.allreduce_grads()


def test_a_value_set_from_outside_resets_the_store_that_updates_it():
    x, trainer, step = _two_device_trainer()
    step()
    x.set_data(nd.zeros((3,)))  # as a loaded file does
    assert trainer._kvstore is None and not trainer._kv_initialized
    step()  # from the new value, with a fresh momentum: -2, not -2 - 3
    for copy in x.list_data():
        np.testing.assert_allclose(copy.asnumpy(), [-2, -2, -2])
