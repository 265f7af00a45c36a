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


@pytest.mark.parametrize("kind", ["local", "device"])
def test_push_sums_the_devices_values_and_replaces_the_stored_one(kind):
    kv = mx.kv.create(kind)
    assert (kv.type, kv.rank, kv.num_workers) == (kind, 0, 1)
    kv.init(3, nd.ones((2,)) * 2)
    kv.push(3, [nd.ones((2,)), nd.ones((2,), ctx=CPU1)])
    out = [nd.zeros((2,)), nd.zeros((2,), ctx=CPU1)]
    kv.pull(3, out=out)
    assert _values(out) == [[2.0, 2.0], [2.0, 2.0]]  # MXNet: the sum replaced the 2s
    assert [o.context for o in out] == [CPU0, CPU1]


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
