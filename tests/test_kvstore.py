"""mx.kv's local and device stores, call by call, against what MXNet 1.9.1 does
(each expected value below was checked with real MXNet)."""

import numpy as np
import pytest

import hybridlab as mx
from hybridlab import engine, nd
from hybridlab.errors import MXNetError

CPU0, CPU1 = mx.cpu(0), mx.cpu(1)


def _values(arrays):
    return [a.asnumpy().tolist() for a in arrays]


@pytest.mark.parametrize("kind", ["local", "device", "local_allreduce_cpu",
                                  "local_allreduce_device"])
def test_push_sums_the_devices_values_and_replaces_the_stored_one(kind):
    kv = mx.kv.create(kind)
    assert (kv.type, kv.rank, kv.num_workers) == (kind, 0, 1)
    kv.init(3, nd.ones((2,)) * 2)
    kv.push(3, [nd.ones((2,)), nd.ones((2,), ctx=CPU1)])
    out = [nd.zeros((2,)), nd.zeros((2,), ctx=CPU1)]
    kv.pull(3, out=out)
    assert _values(out) == [[2.0, 2.0], [2.0, 2.0]]  # MXNet: the sum replaced the 2s
    assert [o.context for o in out] == [CPU0, CPU1]


@pytest.mark.parametrize("kind, home", [("local_allreduce_cpu", CPU0),
                                        ("local_allreduce_device", CPU1)])
def test_mxnets_other_local_names_keep_keys_where_the_name_says(kind, home):
    kv = mx.kv.create(kind)  # MXNet: any name without "dist" is a local store
    kv.init("w", nd.ones((2,), ctx=CPU1))
    out = nd.zeros((2,), ctx=CPU1)
    kv.pull("w", out=out)
    assert kv._store["w"].context == home and _values([out]) == [[1.0, 1.0]]
    compression = {"type": "2bit", "threshold": 0.5}
    if home == CPU0:  # not a device store: MXNet refuses compression
        with pytest.raises(MXNetError, match="local_allreduce_cpu"):
            kv.set_gradient_compression(compression)
    else:
        kv.set_gradient_compression(compression)


def test_with_an_optimizer_a_push_updates_the_stored_value_once():
    kv = mx.kv.create("local")
    kv.init(3, nd.ones((2,)) * 2)
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.1))
    kv.push(3, nd.ones((2,)))
    out = [nd.zeros((2,)), nd.zeros((2,), ctx=CPU1)]
    kv.pull(3, out=out)
    np.testing.assert_allclose(_values(out), [[1.9, 1.9], [1.9, 1.9]], rtol=1e-6)
    kv.push(3, [nd.ones((2,)), nd.ones((2,), ctx=CPU1)])  # the sum, 2, is one gradient
    kv.pull(3, out=out)
    np.testing.assert_allclose(_values(out), [[1.7, 1.7], [1.7, 1.7]], rtol=1e-6)


def test_pushpull_and_lists_of_keys():
    kv = mx.kv.create("device")
    kv.init("w", nd.ones((2,)))
    out = [nd.zeros((2,)), nd.zeros((2,), ctx=CPU1)]
    kv.pushpull("w", [nd.ones((2,)), nd.ones((2,), ctx=CPU1) * 3], out=out)
    assert _values(out) == [[4.0, 4.0], [4.0, 4.0]]  # MXNet: 1 + 3
    grads = [nd.ones((2,)), nd.ones((2,), ctx=CPU1)]
    kv.pushpull("w", grads)  # no out: the values are overwritten with the sum
    assert _values(grads) == [[2.0, 2.0], [2.0, 2.0]]
    kv.init(["a", "b"], [nd.ones((1,)), nd.ones((2,)) * 5])
    o1, o2 = nd.zeros((1,)), nd.zeros((2,))
    kv.pull(["a", "b"], out=[o1, o2])
    assert _values([o1, o2]) == [[1.0], [5.0, 5.0]]


def test_the_store_keeps_its_own_copy():
    kv = mx.kv.create("local")
    value = nd.ones((2,), ctx=CPU1)
    kv.init(0, value)
    value[:] = 7
    out = nd.zeros((2,))
    kv.pull(0, out=out)
    assert out.asnumpy().tolist() == [1.0, 1.0]
    assert kv._store[0].context is CPU0  # 'local': the store is on cpu(0)
    device = mx.kv.create("device")
    device.init(0, value)
    assert device._store[0].context is CPU1  # 'device': where the first value is


def test_the_steps_are_engine_ops_copies_then_sum_then_update():
    kv = mx.kv.create("device")
    grads = [nd.ones((2,)), nd.ones((2,), ctx=CPU1)]
    nd.waitall()
    with engine.engine_scope("NaiveEngine") as eng:
        kv.init(0, nd.zeros((2,)))
        kv.set_optimizer("sgd")
        eng.set_tracing(True)
        kv.pushpull(0, grads, out=grads)
        names = [record.name for record in eng.trace]
    assert names == ["_copyto", "add_n", "kv_update", "_copyto", "_copyto"]


def test_mxnet_errors_for_keys_not_inited_or_inited_twice():
    kv = mx.kv.create("local")
    with pytest.raises(MXNetError, match="key zz has not been inited"):
        kv.push("zz", nd.ones((2,)))
    with pytest.raises(MXNetError, match="key 3 has not been inited"):
        kv.pull(3, out=nd.zeros((2,)))
    kv.init(3, nd.ones((2,)))
    with pytest.raises(MXNetError, match="duplicate init of key 3"):
        kv.init(3, nd.ones((2,)))
    with pytest.raises(ValueError, match="holds shape"):
        kv.push(3, nd.ones((3,)))
    with pytest.raises(ValueError, match="give out="):
        kv.pull(3)
    with pytest.raises(ValueError, match="unknown kvstore type 'foo'"):
        mx.kv.create("foo")
    with pytest.raises(TypeError, match="int or a str"):
        kv.init(1.5, nd.ones((1,)))
    with pytest.raises(TypeError, match="NDArrays"):
        kv.push(3, np.ones(2))


def test_dist_types_outside_a_dask_worker_say_where_they_run():
    pytest.importorskip("distributed")
    with pytest.raises(MXNetError, match="run_workers"):
        mx.kv.create("dist_sync")


# ------------------------------------------------------------- 2-bit gradient compression
def _reference_2bit(grad, residual, threshold):
    """MXNet's quantize_2bit, element by element as its kernel does it (float32): add the
    gradient to the residual; send +threshold, -threshold or 0; keep the rest."""
    sent = np.zeros_like(grad)
    residual = residual.copy()
    t = np.float32(threshold)
    for i in range(grad.size):
        residual.flat[i] += grad.flat[i]
        if residual.flat[i] >= t:
            sent.flat[i], residual.flat[i] = t, residual.flat[i] - t
        elif residual.flat[i] <= -t:
            sent.flat[i], residual.flat[i] = -t, residual.flat[i] + t
    return sent, residual


@pytest.mark.parametrize("threshold", [0.5, 0.2])
def test_2bit_compression_sends_thresholded_residuals_and_keeps_the_rest(threshold):
    """Four pushes from two devices: each pull is the sum of the devices' thresholded
    residuals, computed by the numpy reference above (error feedback carries the rest)."""
    rng = np.random.default_rng(7)
    kv = mx.kv.create("device")
    kv.set_gradient_compression({"type": "2bit", "threshold": threshold})
    kv.init("w", nd.zeros((3, 5)))
    residuals = [np.zeros((3, 5), np.float32) for _ in range(2)]
    sent_any = False
    for _ in range(4):
        grads = [rng.normal(scale=0.4, size=(3, 5)).astype(np.float32) for _ in range(2)]
        kv.push("w", [nd.array(grads[0]), nd.array(grads[1], ctx=CPU1)])
        out = nd.zeros((3, 5), ctx=CPU1)
        kv.pull("w", out=out)
        expected = np.zeros((3, 5), np.float32)
        for device, grad in enumerate(grads):
            sent, residuals[device] = _reference_2bit(grad, residuals[device], threshold)
            expected += sent
        np.testing.assert_array_equal(out.asnumpy(), expected)
        sent_any |= bool(np.abs(expected).max() > 0)
        assert set(np.unique(np.abs(expected))) <= {0.0, np.float32(threshold),
                                                    np.float32(2 * threshold)}
    assert sent_any  # (a threshold too high to send anything would prove nothing)


def test_2bit_compression_in_the_trainer_updates_with_the_thresholded_gradients():
    """Trainer(compression_params=...) on two devices: one SGD step moves the weight by
    the learning rate times the sum of the devices' thresholded gradients."""
    param = mx.gluon.Parameter("w", shape=(6,))
    param.initialize(mx.init.Zero(), ctx=[CPU0, CPU1])
    trainer = mx.gluon.Trainer([param], "sgd", {"learning_rate": 0.5},
                               compression_params={"type": "2bit", "threshold": 0.25})
    grads = [np.array([0.3, -0.3, 0.1, -0.1, 0.26, 1.0], np.float32),
             np.array([0.3, 0.0, 0.2, -0.2, -0.26, -1.0], np.float32)]
    for grad, target in zip(grads, param.list_grad()):
        target[:] = nd.array(grad, ctx=target.context)
    trainer.step(1)
    sent = sum(_reference_2bit(g, np.zeros(6, np.float32), 0.25)[0] for g in grads)
    for weight in param.list_data():
        np.testing.assert_allclose(weight.asnumpy(), -0.5 * sent, rtol=1e-6)
    assert sent.tolist() != sum(grads).tolist()  # compression changed the step


def test_gradient_compression_errors_say_what_mxnet_accepts():
    with pytest.raises(MXNetError, match="not supported for this type of kvstore"):
        mx.kv.create("local").set_gradient_compression({"type": "2bit"})
    kv = mx.kv.create("device")
    with pytest.raises(ValueError, match="'2bit' compression with a 'threshold'"):
        kv.set_gradient_compression({"type": "1bit"})
    with pytest.raises(ValueError, match="'treshold'"):
        kv.set_gradient_compression({"type": "2bit", "treshold": 0.5})
    with pytest.raises(ValueError, match="greater than 0"):
        kv.set_gradient_compression({"type": "2bit", "threshold": 0})
    with pytest.raises(ValueError, match="e.g. {'type': '2bit'"):
        kv.set_gradient_compression("2bit")
    with pytest.raises(TypeError, match="compression_params is a dict"):
        mx.gluon.Trainer([], "sgd", compression_params="2bit")
    kv.set_gradient_compression({"type": "2bit"})  # MXNet's default threshold
    assert kv._threshold == 0.5
