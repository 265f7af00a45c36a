"""mx.optimizer: every optimizer MXNet 1.9.1 registers, MXNet's subclassing interface, the
fast numpy path against it, multi-precision, rate multipliers, and the schedulers."""

from __future__ import annotations

import math

import numpy as np
import pytest

import hybridlab as mx
from hybridlab import autograd, gluon, nd
from hybridlab import optimizer as opt

MXNET_1_9_1 = ["adadelta", "adagrad", "adam", "adamax", "ccsgd", "dcasgd", "ftml", "ftrl",
               "lamb", "lars", "nadam", "nag", "rmsprop", "sgd", "sgld", "signum", "test"]
RNG = np.random.default_rng(0)
W0 = RNG.uniform(-1, 1, (3, 4)).astype(np.float32)
G0 = RNG.uniform(-1, 1, (3, 4)).astype(np.float32)


def _step(optimizer, steps=2, weight=W0, grad=G0, dtype=np.float32):
    """``steps`` updates through MXNet's interface; the weight and the state after."""
    w, g = nd.array(weight, dtype=dtype), nd.array(grad, dtype=dtype)
    state = optimizer.create_state_multi_precision(0, w)
    for _ in range(steps):
        optimizer.update_multi_precision(0, w, g, state)
    return w.asnumpy(), state


@pytest.mark.parametrize("name", MXNET_1_9_1)
def test_every_optimizer_of_mxnet_is_created_by_name_and_moves_the_weight(name):
    optimizer = mx.optimizer.create(name, learning_rate=0.1)
    assert type(optimizer).__name__.lower() == name
    w, _ = _step(optimizer)
    assert np.isfinite(w).all() and not np.allclose(w, W0)


@pytest.mark.parametrize("kwargs", [{"momentum": 0.9, "wd": 0.01},
                                    {"clip_gradient": 0.3, "rescale_grad": 2.0},
                                    {"momentum": 0.5, "clip_gradient": 0.2, "wd": 0.1}])
def test_sgd_by_hand(kwargs):
    """MXNet's SGD: ``mom = m*mom - lr*wd*w - lr*clip(rescale*g)``; ``w += mom``."""
    lr, m = 0.1, kwargs.get("momentum", 0.0)
    w, mom = W0.astype(np.float64), np.zeros_like(W0, np.float64)
    for _ in range(2):
        g = G0 * kwargs.get("rescale_grad", 1.0)
        if "clip_gradient" in kwargs:
            g = np.clip(g, -kwargs["clip_gradient"], kwargs["clip_gradient"])
        mom = m * mom - lr * kwargs.get("wd", 0.0) * w - lr * g
        w = w + mom
    got, _ = _step(opt.SGD(learning_rate=lr, **kwargs))
    np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name, kwargs", [("sgd", {"momentum": 0.9, "wd": 0.01}),
                                          ("sgd", {"clip_gradient": 0.2}),
                                          ("adam", {"wd": 0.02}),
                                          ("adam", {"clip_gradient": 0.1, "wd": 0.5})])
def test_the_one_op_step_matches_mxnets_update(name, kwargs):
    """NOTE [One op per step]: the Trainer's numpy rule and ``update`` through MXNet's
    update operators give the same weights."""
    reference, _ = _step(opt.create(name, learning_rate=0.1, **kwargs), steps=3)
    param = gluon.Parameter("w", shape=W0.shape)
    param.initialize()
    param.set_data(nd.array(W0))
    trainer = gluon.Trainer([param], name, {"learning_rate": 0.1, **kwargs})
    assert trainer._optimizer.fused_rule() is not None
    for _ in range(3):
        with autograd.record():
            loss = (param.data() * nd.array(G0)).sum()
        loss.backward()
        trainer.step(1)
    np.testing.assert_allclose(param.data().asnumpy(), reference, rtol=1e-5, atol=1e-6)


def test_adagrad_adadelta_adamax_by_hand():
    lr, eps = 0.1, 1e-7
    history = G0.astype(np.float64) ** 2
    expected = W0 - lr * G0 / np.sqrt(history + eps)
    np.testing.assert_allclose(_step(opt.AdaGrad(learning_rate=lr), 1)[0], expected, rtol=1e-5)
    rho, eps = 0.9, 1e-5
    acc_g = (1 - rho) * G0.astype(np.float64) ** 2
    delta = np.sqrt(eps) / np.sqrt(acc_g + eps) * G0
    np.testing.assert_allclose(_step(opt.AdaDelta(), 1)[0], W0 - delta, rtol=1e-5)
    mean, peak = 0.1 * G0.astype(np.float64), np.abs(G0)
    expected = W0 - 0.002 / (1 - 0.9) * mean / peak
    np.testing.assert_allclose(_step(opt.Adamax(), 1)[0], expected, rtol=1e-5)


def test_a_registered_subclass_is_created_by_name_and_trained_by_the_trainer():
    """MXNet code writes optimizers as subclasses with ``create_state`` and ``update``;
    the Trainer then calls ``update`` for each weight (no numpy rule to fuse)."""
    @mx.optimizer.register
    class HalfStep(mx.optimizer.Optimizer):
        def create_state(self, index, weight):
            return nd.zeros(weight.shape)  # counts the updates, to show the state is kept

        def update(self, index, weight, grad, state):
            self._update_count(index)
            weight[:] -= 0.5 * self._get_lr(index) * grad
            state[:] += 1

    try:
        param = gluon.Parameter("w", shape=(2,))
        param.initialize(mx.init.One())
        trainer = gluon.Trainer([param], "halfstep", {"learning_rate": 1.0})
        assert trainer._optimizer.fused_rule() is None
        for _ in range(2):
            with autograd.record():
                loss = (param.data() * nd.array([2.0, 4.0])).sum()
            loss.backward()
            trainer.step(1)
        np.testing.assert_allclose(param.data().asnumpy(), [-1.0, -3.0])
        states = trainer._updaters[param.list_ctx()[0]].nd_states
        np.testing.assert_array_equal(states[0].asnumpy(), [2.0, 2.0])
        assert trainer._optimizer.num_update == 2
    finally:
        mx.optimizer.Optimizer.opt_registry.pop("halfstep")


def test_multi_precision_keeps_a_float32_master_copy():
    """A float16 weight's small steps are lost when rounded each time; with
    ``multi_precision`` they accumulate in the float32 copy."""
    tiny = np.full((4,), 1e-4, np.float32)
    with pytest.warns(UserWarning, match="multi_precision=True"):
        plain, _ = _step(opt.SGD(learning_rate=1.0), steps=4, weight=np.ones(4), grad=tiny,
                         dtype=np.float16)
    mixed, state = _step(opt.SGD(learning_rate=1.0, multi_precision=True), steps=4,
                         weight=np.ones(4), grad=tiny, dtype=np.float16)
    momentum, master = state
    assert momentum is None and master.dtype == np.float32
    np.testing.assert_allclose(master.asnumpy(), 1 - 4e-4, rtol=1e-6)
    assert (plain == 1.0).all() and (mixed < 1.0).all()  # float16 near 1 steps by ~5e-4


def test_rate_multipliers_by_name_index_and_symbol_attribute():
    data = mx.sym.var("data")
    net = mx.sym.FullyConnected(data, mx.sym.var("fc_weight", lr_mult=0.5),
                                mx.sym.var("fc_bias", wd_mult=3.0), num_hidden=2, name="fc")
    optimizer = opt.SGD(learning_rate=1.0, wd=0.1, sym=net,
                        param_idx2name={0: "fc_weight", 1: "fc_bias", 2: "other"})
    assert optimizer._get_lr(0) == 0.5 and optimizer._get_lr(1) == 1.0
    assert optimizer._get_wd(1) == pytest.approx(0.3)  # the symbol's multiplier
    assert optimizer._get_wd(2) == 0.0  # not a _weight or _gamma: no decay, as in MXNet
    optimizer.set_lr_mult({2: 4.0})
    assert optimizer._get_lr(2) == 4.0


def test_learning_rate_and_its_scheduler():
    schedule = mx.lr_scheduler.FactorScheduler(step=1, base_lr=2.0)
    optimizer = opt.Optimizer(lr_scheduler=schedule)
    assert optimizer.learning_rate == 2.0
    with pytest.raises(UserWarning, match="lr_scheduler"):
        optimizer.set_learning_rate(0.5)
    with pytest.raises(ValueError, match=r"sgd: unknown optimizer parameter\(s\) \['beta9'\]"):
        opt.create("sgd", beta9=1)


def test_poly_and_cosine_schedulers():
    poly = mx.lr_scheduler.PolyScheduler(100, base_lr=2.0, pwr=2, final_lr=0.5,
                                         warmup_steps=10, warmup_begin_lr=0.0)
    assert poly(5) == pytest.approx(1.0)  # half way up the linear warm-up
    assert poly(10) == pytest.approx(2.0)
    assert poly(55) == pytest.approx(0.5 + 1.5 * 0.25)  # half way down: (1 - 0.5)**2
    assert poly(100) == pytest.approx(0.5) and poly(500) == pytest.approx(0.5)
    cosine = mx.lr_scheduler.CosineScheduler(100, base_lr=2.0, final_lr=0.0)
    assert cosine(50) == pytest.approx(1.0) and cosine(100) == pytest.approx(0.0)
    assert cosine(25) == pytest.approx((1 + math.cos(math.pi / 4)) / 2 * 2.0)
    with pytest.raises(ValueError, match="max_update=5 must be >= 1 and more than warmup"):
        mx.lr_scheduler.PolyScheduler(5, warmup_steps=5)
