"""mx.mod: Module's life cycle (bind, init_params, init_optimizer, forward/backward/update,
fit, score, predict, checkpoints) and BucketingModule's shared parameters."""

from __future__ import annotations

import numpy as np
import pytest

import hybridlab as mx
from hybridlab import nd, sym


def _regression(hidden=8):
    data, label = sym.var("data"), sym.var("label")
    net = sym.FullyConnected(sym.Activation(sym.FullyConnected(data, num_hidden=hidden,
                                                               name="fc1"), act_type="relu"),
                             num_hidden=1, name="fc2")
    return sym.make_loss(sym.mean(sym.square(net - sym.reshape(label, shape=(-1, 1)))))


def _data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, 3)).astype(np.float32)
    return x, (x @ np.array([1.0, -2.0, 0.5])).astype(np.float32)


def test_fit_lowers_the_loss_and_score_reports_it():
    x, y = _data()
    train = mx.io.NDArrayIter(x, y, batch_size=10, label_name="label")
    module = mx.mod.Module(_regression(), data_names=["data"], label_names=["label"])
    module.bind(train.provide_data, train.provide_label)
    module.init_params(mx.init.Xavier())
    before = module.score(train, mx.metric.Loss())[0][1]
    module.fit(train, num_epoch=30, optimizer="adam",
               optimizer_params={"learning_rate": 0.02}, eval_metric=mx.metric.Loss())
    after = module.score(train, mx.metric.Loss())[0][1]
    assert after < before / 5


def test_one_step_by_hand_is_sgd_on_the_bound_arrays():
    """forward, backward, update: the weight moves by -lr * gradient / batch size (the
    optimizer's rescale_grad is 1 / batch size unless given)."""
    data = sym.var("data")
    loss = sym.make_loss(sym.sum(sym.FullyConnected(data, num_hidden=1, no_bias=True,
                                                    name="fc")))
    module = mx.mod.Module(loss, label_names=None)
    module.bind([("data", (2, 3))])
    module.init_params(mx.init.One())
    module.init_optimizer(optimizer_params={"learning_rate": 0.5})
    batch = mx.io.DataBatch([nd.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])])
    module.forward(batch, is_train=True)
    module.backward()
    module.update()
    weight = module.get_params()[0]["fc_weight"].asnumpy()
    np.testing.assert_allclose(weight, 1 - 0.5 * np.array([[4.0, 4.0, 4.0]]) / 2)


def test_an_operators_lr_mult_reaches_the_variables_it_makes():
    """``FullyConnected(..., lr_mult=0)``: the weight it creates is frozen; an explicit
    bias keeps its own multiplier."""
    bias = sym.var("fc_bias", lr_mult=1.0)
    net = sym.FullyConnected(sym.var("data"), bias=bias, num_hidden=2, name="fc", lr_mult=0)
    assert net.attr_dict()["fc_weight"]["__lr_mult__"] == "0"
    module = mx.mod.Module(sym.make_loss(sym.sum(net)), label_names=None)
    module.bind([("data", (2, 3))])
    module.init_params(mx.init.One())
    module.init_optimizer(optimizer_params={"learning_rate": 1.0})
    module.forward(mx.io.DataBatch([nd.ones((2, 3))]), is_train=True)
    module.backward()
    module.update()
    params = module.get_params()[0]
    np.testing.assert_array_equal(params["fc_weight"].asnumpy(), np.ones((2, 3)))
    np.testing.assert_allclose(params["fc_bias"].asnumpy(), [-1.0, -1.0])


def test_parameters_start_by_name_and_by_the_variables_init():
    data = sym.var("data")
    net = sym.BatchNorm(sym.FullyConnected(data, sym.var("w", init=mx.init.Constant(3.0)),
                                           num_hidden=2, name="fc"), name="bn")
    module = mx.mod.Module(net, label_names=None)
    module.bind([("data", (4, 2))])
    module.init_params(mx.init.Uniform(5.0))
    arg, aux = module.get_params()
    assert (arg["w"].asnumpy() == 3).all() and (arg["fc_bias"].asnumpy() == 0).all()
    assert (arg["bn_gamma"].asnumpy() == 1).all() and (arg["bn_beta"].asnumpy() == 0).all()
    assert (aux["bn_moving_var"].asnumpy() == 1).all()


def test_predict_cuts_the_padding_and_a_new_batch_size_rebinds():
    module = mx.mod.Module(sym.FullyConnected(sym.var("data"), num_hidden=2, name="fc"),
                           label_names=None)
    module.bind([("data", (4, 3))], for_training=False)
    module.init_params(mx.init.One())
    out = module.predict(mx.io.NDArrayIter(np.ones((10, 3)), batch_size=4))
    assert out.shape == (10, 2)  # three batches of four, the last padded with two
    np.testing.assert_allclose(out.asnumpy(), 3.0)  # weights 1; a bias starts at 0 (by name)
    module.forward(mx.io.DataBatch([nd.ones((7, 3))]), is_train=False)
    assert module.get_outputs()[0].shape == (7, 2)


def test_checkpoint_round_trip_with_optimizer_states(tmp_path):
    x, y = _data()
    train = mx.io.NDArrayIter(x, y, batch_size=10, label_name="label")
    module = mx.mod.Module(_regression(), label_names=["label"])
    module.fit(train, num_epoch=2, optimizer="adam", eval_metric="loss")
    prefix = str(tmp_path / "net")
    module.save_checkpoint(prefix, 2, save_optimizer_states=True)
    again = mx.mod.Module.load(prefix, 2, load_optimizer_states=True, label_names=["label"])
    again.bind(train.provide_data, train.provide_label)
    again.init_optimizer(optimizer="adam")
    for name, value in module.get_params()[0].items():
        np.testing.assert_array_equal(again.get_params()[0][name].asnumpy(), value.asnumpy())
    states = again._updater.states
    assert len(states) == 4 and again._optimizer.counts[0] == module._optimizer.counts[0]
    with pytest.raises(ValueError, match="not a file of save_optimizer_states"):
        again.load_optimizer_states(prefix + "-0002.params")


def test_bucketing_module_shares_parameters_across_lengths():
    def sym_gen(length):  # one weight applied at every step, as a recurrent cell's
        data, weight = sym.var("data"), sym.var("fc_weight")
        steps = sym.split(data, num_outputs=length, axis=1, squeeze_axis=True)
        total = sym.add_n(*[sym.FullyConnected(steps[i], weight, num_hidden=2, no_bias=True,
                                               name=f"fc{i}") for i in range(length)])
        return sym.make_loss(sym.sum(total)), ["data"], None

    module = mx.mod.BucketingModule(sym_gen, default_bucket_key=3)
    module.bind([("data", (2, 3, 4))])
    module.init_params(mx.init.One())
    module.init_optimizer(optimizer_params={"learning_rate": 0.1})
    for length in (2, 3, 2):
        batch = mx.io.DataBatch([nd.ones((2, length, 4))], bucket_key=length,
                                provide_data=[("data", (2, length, 4))])
        module.forward(batch)
        module.backward()
        module.update()
    assert set(module._buckets) == {2, 3}
    shared = module._buckets[2]._exec.arg_dict["fc_weight"]
    assert shared is module._buckets[3]._exec.arg_dict["fc_weight"]
    # three steps of sum over 2, 3 and 2 copies of ones(4) on 2 samples, scaled by 1/2
    np.testing.assert_allclose(module.get_params()[0]["fc_weight"].asnumpy(),
                               1 - 0.1 * (2 + 3 + 2))


def test_module_errors_say_what_to_call_first():
    module = mx.mod.Module(sym.FullyConnected(sym.var("data"), num_hidden=2), label_names=None)
    with pytest.raises(RuntimeError, match="bind"):
        module.init_params()
    with pytest.raises(ValueError, match="data name 'x' is not an input"):
        mx.mod.Module(sym.var("data") * 2, data_names=["x"])


def test_a_gluon_blocks_graph_carries_its_initializers_into_a_module():
    net = mx.gluon.nn.Dense(3, in_units=4, bias_initializer="ones")
    net.initialize()
    module = mx.mod.Module(net(sym.var("data")), data_names=["data"], label_names=None)
    module.bind(data_shapes=[("data", (2, 4))])
    module.init_params(mx.init.Zero())
    params = module.get_params()[0]
    np.testing.assert_array_equal(params[net.bias.name].asnumpy(), np.ones(3))
    np.testing.assert_array_equal(params[net.weight.name].asnumpy(), np.zeros((3, 4)))


def test_prelus_slope_made_by_the_operator_starts_at_a_quarter():
    module = mx.mod.Module(sym.LeakyReLU(sym.var("data"), act_type="prelu", name="act"),
                           label_names=None)
    module.bind([("data", (2, 5))])
    module.init_params(mx.init.Uniform(0.01))
    np.testing.assert_array_equal(module.get_params()[0]["act_gamma"].asnumpy(), 0.25)


def test_parameter_names_keep_the_graphs_order_with_initializers_on_some():
    """Some of a block's parameter variables carry ``__init__`` (a bias), some not (a
    weight): the instruments list them in the order the graph reads them all the same."""
    from hybridlab.lab import graphs

    net = mx.gluon.nn.HybridSequential()
    net.add(mx.gluon.nn.Conv2D(4, 3, in_channels=2), mx.gluon.nn.Dense(3, in_units=16))
    names = graphs.parameter_names(net(sym.var("data")).to_graph())
    assert [name.split("_", 1)[1] for name in names] == ["weight", "bias"] * 2
