"""The same graph on Dask (hybridlab.dask): equal results, clear errors, a clean cluster."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hybridlab as mx
from hybridlab import autograd, nd
from hybridlab import dask as hdask
from hybridlab.errors import DaskGraphError
from hybridlab.gluon import nn
from hybridlab.graph import ir

ROOT = Path(__file__).resolve().parent.parent

UNARY = ("relu", "sigmoid", "tanh", "negative", "square")
BINARY = ("broadcast_add", "broadcast_mul", "broadcast_sub", "broadcast_maximum")


@st.composite
def random_graphs(draw):
    """A random DAG of unary and binary operators over two (4, 3) inputs."""
    values = [mx.sym.var("a"), mx.sym.var("b")]
    for _ in range(draw(st.integers(1, 10))):
        if draw(st.booleans()):
            op, args = draw(st.sampled_from(UNARY)), [draw(st.sampled_from(values))]
        else:
            op = draw(st.sampled_from(BINARY))
            args = [draw(st.sampled_from(values)), draw(st.sampled_from(values))]
        values.append(getattr(mx.sym, op)(*args))
    outputs = draw(st.lists(st.sampled_from(values[2:]), min_size=1, max_size=2))
    return mx.sym.Group(outputs) if len(outputs) > 1 else outputs[0]


@settings(max_examples=40, deadline=None)
@given(random_graphs(), st.integers(0, 2**16))
def test_random_graphs_give_the_engines_results(symbol, seed):
    rng = np.random.default_rng(seed)
    a, b = (nd.array(rng.normal(size=(4, 3)).astype(np.float32)) for _ in range(2))
    feed = {name: value for name, value in (("a", a), ("b", b))
            if name in symbol.list_arguments()}
    expected = symbol.eval(**feed)
    got = hdask.compute(symbol, feed)
    assert len(got) == len(expected)
    for mine, theirs in zip(got, expected):
        assert mine.dtype == theirs.dtype
        np.testing.assert_allclose(mine.asnumpy(), theirs.asnumpy(), rtol=1e-6)


def dropout_net():
    net = nn.HybridSequential()
    net.add(nn.Dense(16, activation="relu"), nn.Dropout(0.5), nn.Dense(4))
    net.initialize()
    return net


@pytest.mark.parametrize("training", [False, True])
def test_a_block_with_dropout_gives_the_hybridized_result_for_the_same_seed(training):
    mx.random.seed(1)
    net, x = dropout_net(), nd.random.normal(shape=(5, 8))
    net.hybridize()
    net(x).wait_to_read()  # the deferred initialisation draws from the stream: done first
    mx.random.seed(7)
    with autograd.train_mode() if training else autograd.predict_mode():
        hybridized = net(x).asnumpy()
    mx.random.seed(7)
    (dasked,) = hdask.compute(net, {"data": x}, training=training)
    np.testing.assert_allclose(dasked.asnumpy(), hybridized, rtol=1e-6)
    if training:  # and Dropout really dropped something: a different seed differs
        mx.random.seed(8)
        (other,) = hdask.compute(net, {"data": x}, training=True)
        assert not np.allclose(other.asnumpy(), hybridized)


def test_an_operator_with_several_outputs_feeds_each_consumer_its_own():
    x = mx.sym.var("x")
    parts = mx.sym.split(x, num_outputs=3, axis=1)
    out = mx.sym.Group([parts[2] * 2, parts[0] + parts[1]])
    data = nd.array(np.arange(12, dtype=np.float32).reshape(2, 6))
    expected = out.eval(x=data)
    got = hdask.compute(out, {"x": data})
    for mine, theirs in zip(got, expected):
        np.testing.assert_array_equal(mine.asnumpy(), theirs.asnumpy())
    graph = hdask.to_dask(out, {"x": data})
    assert sorted(set(graph.ops.values())) == ["SliceChannel", "_mul_scalar", "elemwise_add"]


def test_clear_errors_name_the_node():
    x, y = mx.sym.var("x"), mx.sym.var("y")
    out = mx.sym.relu(x) + y
    with pytest.raises(DaskGraphError, match=r"input 'y' \(node %\d\) is not bound"):
        hdask.to_dask(out, {"x": np.ones((2, 2), np.float32)})
    with pytest.raises(DaskGraphError, match=r"\['z'\] are not inputs"):
        hdask.to_dask(out, {"x": np.ones(2), "y": np.ones(2), "z": np.ones(2)})
    with pytest.raises(DaskGraphError, match="do not fit the graph"):
        hdask.to_dask(mx.sym.dot(x, y), {"x": np.ones((2, 3)), "y": np.ones((2, 3))})
    with pytest.raises(DaskGraphError, match="a Symbol, a graph IR or a HybridBlock"):
        hdask.to_dask(42)
    graph = mx.sym.relu(x).to_graph()
    var = graph.inputs[0]
    stray = ir.Node("call", "no_such_op", (var.out(),), name="mystery")
    broken = ir.Graph([var, stray], [var], [stray.out()])
    with pytest.raises(DaskGraphError, match=r"node %1 \(mystery\) calls 'no_such_op'"):
        hdask.to_dask(broken, {"x": np.ones(2)})


def test_stream_records_keep_the_operator_tasks_one_row_per_worker_thread():
    stream = [
        {"key": "var-0", "worker": "tcp://w1", "thread": 5,
         "startstops": ({"action": "compute", "start": 1.0, "stop": 1.1},)},
        {"key": "relu-1", "worker": "tcp://w1", "thread": 5,
         "startstops": ({"action": "transfer", "start": 1.1, "stop": 1.2},
                        {"action": "compute", "start": 1.2, "stop": 1.5})},
        {"key": "dot-2", "worker": "tcp://w2", "thread": 9,
         "startstops": ({"action": "compute", "start": 1.3, "stop": 2.0},)},
    ]
    records, rows = hdask.stream_records(stream, {"relu-1": "relu", "dot-2": "dot"})
    assert [(r.name, r.worker, r.start, r.end) for r in records] == [
        ("relu", 0, 1.2, 1.5), ("dot", 1, 1.3, 2.0)]
    assert rows == {0: "dask worker 0", 1: "dask worker 1"}
    everything, _ = hdask.stream_records(stream)
    assert [r.name for r in everything] == ["var", "relu", "dot"]


def test_a_local_cluster_computes_the_graph_and_closes_cleanly():
    from distributed import Client, get_task_stream

    mx.random.seed(3)
    net, x = dropout_net(), nd.random.normal(shape=(4, 8))
    expected = net(x).asnumpy()
    with hdask.local_cluster(2) as cluster, Client(cluster) as client:
        with get_task_stream(client) as stream:
            (got,) = hdask.compute(net, {"data": x}, client=client)
        graph = hdask.to_dask(net, {"data": x})
        records, rows = hdask.stream_records(stream.data, graph.ops)
    np.testing.assert_allclose(got.asnumpy(), expected, rtol=1e-6)
    assert sorted(r.name for r in records) == sorted(graph.ops.values())
    assert set(rows.values()) <= {"dask worker 0", "dask worker 1"}
    assert client.status == "closed" and cluster.status.name == "closed"


_OFFLINE_PROBE = """
from distributed import Client
from hybridlab import nd, sym, dask as hdask


def main():  # (process workers re-import this file: the guard below is required)
    net = sym.relu(sym.var("x")) * 2
    for processes in (False, True):
        with hdask.local_cluster(2, processes=processes) as cluster, Client(cluster) as client:
            (got,) = hdask.compute(net, {"x": nd.array([-1.0, 3.0])}, client=client)
        assert got.asnumpy().tolist() == [0.0, 6.0], got
    print("computed")


if __name__ == "__main__":
    main()
"""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare (util-linux)")
def test_local_clusters_run_offline_without_looking_outward(tmp_path):
    # a network namespace with only a loopback interface: a machine with no network
    probe = tmp_path / "probe.py"
    probe.write_text(_OFFLINE_PROBE)
    command = ["unshare", "-rn", "sh", "-c", f"ip link set lo up 2>/dev/null; "
               f"exec {sys.executable} {probe}"]
    if subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode != 0:
        pytest.skip("unshare -rn is not permitted here")
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert done.returncode == 0 and "computed" in done.stdout, done.stderr[-3000:]
    assert "8.8.8.8" not in done.stderr and "suitable IP address" not in done.stderr, (
        done.stderr[-3000:])
