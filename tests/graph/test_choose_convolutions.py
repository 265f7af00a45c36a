"""Each convolution's algorithm chosen by measurement (NOTE [Convolution algorithms] in
graph/passes/choose_convolutions.py): every algorithm computes what im2col computes, and
the choice -- made here by a fake timer, so deterministic -- is what runs and is shown."""

from __future__ import annotations

import numpy as np
import pytest

import hybridlab as mx
from hybridlab import config, nd
from hybridlab.gluon import nn
from hybridlab.graph.autotune import AlgorithmChoice, AlgorithmTuner, Tuner
from hybridlab.graph.cached_op import CachedOp
from hybridlab.graph.passes import PassContext, derived_values, run_pipeline
from hybridlab.graph.passes.choose_convolutions import (
    candidates,
    choose_convolutions,
    tile_arithmetic,
)
from hybridlab.lab.passes import PassModel
from hybridlab.ops import OPS
from hybridlab.ops.conv_algorithms import winograd_filter

RNG = np.random.default_rng(0)


def convolve(x, w, b, **attrs):
    conv = OPS["Convolution"]
    return conv.kernel(x, w, *([] if b is None else [b]),
                       **conv.parse_attrs({**attrs, "num_filter": len(w),
                                           "no_bias": b is None}))


def close(got, want):
    """Equal to float32 rounding: another algorithm sums in another order."""
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6 * max(1.0, np.abs(want).max()))


@pytest.mark.parametrize("batch,channels,size,filters,pad,bias", [
    (1, 3, (5, 5), 2, (1, 1), True), (2, 4, (7, 6), 3, (0, 0), False),
    (3, 5, (8, 9), 4, (2, 1), True), (1, 64, (14, 14), 32, (1, 1), True),
    (2, 1, (3, 3), 1, (0, 0), True), (1, 2, (2, 2), 2, (1, 1), False)])
def test_winograd_computes_what_im2col_computes(batch, channels, size, filters, pad, bias):
    x = RNG.standard_normal((batch, channels, *size)).astype(np.float32)
    w = RNG.standard_normal((filters, channels, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(filters).astype(np.float32) if bias else None
    op = OPS["_conv_winograd"]
    attrs = op.parse_attrs({"kernel": (3, 3), "pad": pad, "num_filter": filters,
                            "no_bias": not bias})
    got = op.kernel(x, winograd_filter(w), *([] if b is None else [b]), **attrs)
    close(got, convolve(x, w, b, kernel=(3, 3), pad=pad))


@pytest.mark.parametrize("kernel,stride,pad,dilate", [
    ((3, 3), (1, 1), (1, 1), (1, 1)), ((3, 3), (2, 2), (1, 1), (1, 1)),
    ((5, 3), (2, 1), (2, 0), (1, 2)), ((1, 1), (1, 1), (0, 0), (1, 1))])
def test_the_direct_depthwise_form_computes_what_im2col_computes(kernel, stride, pad, dilate):
    x = RNG.standard_normal((2, 6, 11, 10)).astype(np.float32)
    w = RNG.standard_normal((6, 1, *kernel)).astype(np.float32)
    b = RNG.standard_normal(6).astype(np.float32)
    geometry = {"kernel": kernel, "stride": stride, "pad": pad, "dilate": dilate}
    op = OPS["_conv_depthwise"]
    got = op.kernel(x, w, b, **op.parse_attrs({**geometry, "num_filter": 6, "num_group": 6}))
    close(got, convolve(x, w, b, num_group=6, **geometry))


class FakeTimer:
    """Seconds per call by algorithm name; it runs each candidate, and counts the calls."""

    def __init__(self, seconds):
        self.seconds, self.calls = seconds, []

    def __call__(self, name, run, arrays, calls):
        self.calls.append(name)
        run(arrays)
        return self.seconds[name]


class Net(nn.HybridBlock):
    """A 3x3 convolution folded with its BatchNorm, a depthwise one, a 1x1 one."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.conv = nn.Conv2D(8, 3, padding=1, in_channels=4)
        self.norm = nn.BatchNorm(in_channels=8)
        self.depthwise = nn.Conv2D(8, 3, padding=1, groups=8, in_channels=8)
        self.last = nn.Conv2D(2, 1, in_channels=8)

    def hybrid_forward(self, F, x):
        return self.last(F.relu(self.depthwise(self.norm(self.conv(x)))))


def tuned(seconds):
    mx.random.seed(0)
    net = Net()
    net.initialize()
    for name, param in net.collect_params().items():  # statistics that fold to something
        if "running" in name or "gamma" in name or "beta" in name:
            param.set_data(nd.random.uniform(0.5, 1.5, shape=param.shape))
    x = nd.random.normal(shape=(2, 4, 9, 7))
    expected = net(x).asnumpy()
    net.hybridize(autotune=True)
    timer = FakeTimer(seconds)
    net._cached_op.tuner = Tuner(measure=timer)
    return net, x, expected, timer


def test_the_fastest_algorithm_measured_is_what_runs_and_what_the_report_says():
    net, x, expected, timer = tuned({"im2col": 3e-3, "winograd": 1e-3, "depthwise": 2e-3})
    close(net(x).asnumpy(), expected)
    close(net(x).asnumpy(), expected)
    code = net._cached_op.code
    assert code.count("_conv_winograd") == 1 and code.count("_conv_depthwise") == 1
    chosen = {name: c.chosen for name, c in net._cached_op.convolutions().items()}
    assert sorted(chosen.values()) == ["depthwise", "winograd"]  # the 1x1 has no rival
    report = str(net.hybridization_report())
    assert report.count("[convolution]") == 2
    assert "winograd (measured here: 1.00 ms a call, im2col 3.00 ms)" in report
    # the folded weight was read transformed: the folded copy itself is no input any more
    inputs = [n.name for n in net._cached_op.last_program.graph.inputs]
    assert any(name.endswith("_weight__folded__winograd") for name in inputs)
    assert not any(name.endswith("_weight__folded") for name in inputs)


def test_im2col_stays_unless_another_is_clearly_faster():
    net, x, expected, _ = tuned({"im2col": 1e-3, "winograd": 0.97e-3, "depthwise": 2e-3})
    close(net(x).asnumpy(), expected)
    assert "_conv_winograd" not in net._cached_op.code
    assert {c.chosen for c in net._cached_op.convolutions().values()} == {"im2col"}


@pytest.mark.parametrize("asked", [{"cudnn_tune": "off"}, {"cudnn_off": True},
                                   {"cudnn_tune": "fastest"}])
def test_cudnn_tune_off_and_cudnn_off_keep_im2col_unmeasured(asked):
    data = mx.sym.var("data")
    layer = mx.sym.Convolution(data, kernel=(3, 3), pad=(1, 1), num_filter=4, **asked)
    op = CachedOp(layer, autotune=True)
    timer = FakeTimer({"im2col": 3e-3, "winograd": 1e-3})
    op.tuner = Tuner(measure=timer)
    x = nd.random.normal(shape=(1, 3, 6, 6))
    arrays = [x, nd.random.normal(shape=(4, 3, 3, 3)), nd.random.normal(shape=(4,))]
    close(op(*arrays).asnumpy(), convolve(*(a.asnumpy() for a in arrays), kernel=(3, 3),
                                          pad=(1, 1)))
    measured = asked == {"cudnn_tune": "fastest"}
    assert ("_conv_winograd" in op.code) == measured and bool(timer.calls) == measured


def test_a_choice_is_measured_once_per_signature():
    AlgorithmTuner.remembered.clear()
    timer = FakeTimer({"im2col": 3e-3, "winograd": 1e-3})
    tuner = AlgorithmTuner(Tuner(measure=timer))
    data, weight = mx.sym.var("data", shape=(1, 4, 6, 6)), mx.sym.var("w", shape=(4, 4, 3, 3))
    twice = mx.sym.Convolution(mx.sym.Convolution(data, weight, kernel=(3, 3), pad=(1, 1),
                                                  num_filter=4, no_bias=True, name="a"),
                               weight, kernel=(3, 3), pad=(1, 1), num_filter=4,
                               no_bias=True, name="b")
    graph, _ = run_pipeline(twice.to_graph(), passes=[choose_convolutions],
                            context=PassContext(convolutions=tuner))
    first = len(timer.calls)
    run_pipeline(twice.to_graph(), passes=[choose_convolutions],
                 context=PassContext(convolutions=AlgorithmTuner(Tuner(measure=timer))))
    assert first > 0 and len(timer.calls) == first  # b, and the second program: remembered
    assert set(tuner.chosen) == {"a", "b"}
    # one transformed weight for the weight both layers share, derived from it
    transformed = [n for n in graph.inputs if n.name == "w__winograd"]
    assert len(transformed) == 1
    values = {"data": RNG.standard_normal((1, 4, 6, 6)).astype(np.float32),
              "w": RNG.standard_normal((4, 4, 3, 3)).astype(np.float32)}
    made = dict(zip([n.name for n in graph.inputs], derived_values(graph, values)))
    np.testing.assert_array_equal(made["w__winograd"], winograd_filter(values["w"]))


def test_training_and_autotune_off_keep_convolution():
    net, x, _, timer = tuned({"im2col": 3e-3, "winograd": 1e-3, "depthwise": 2e-3})
    with mx.autograd.record():
        net(x)
    assert "_conv_winograd" not in net._cached_op.code and timer.calls == []
    with config.Context(AUTOTUNE=0):
        graph = Net()
        graph.initialize()
        graph.hybridize()
        graph(x)
        assert "_conv_" not in graph._cached_op.code
    assert candidates(next(n for n in graph._cached_op.last_program.graph.nodes
                           if n.op == "Convolution")) == ("im2col", "winograd")


def test_the_pass_explorer_shows_the_choice_and_one_tile_worked_through():
    net, x, _, _ = tuned({"im2col": 3e-3, "winograd": 1e-3, "depthwise": 2e-3})
    net(x)
    model = PassModel(net)
    index = model.stage_index("choose_convolutions")
    summary = model.summary(index)
    assert "winograd (measured here" in summary and "depthwise (measured here" in summary
    assert "16 products U * V for 4 outputs" in summary
    g = np.arange(9.0).reshape(3, 3)
    text = tile_arithmetic({"w": g.reshape(1, 1, 3, 3)}, 0)
    d = np.arange(16.0).reshape(4, 4)
    direct = [[float(np.sum(d[r:r + 3, c:c + 3] * g)) for c in (0, 1)] for r in (0, 1)]
    assert f"Y = A^T (U * V) A = {direct}" in text  # the 16 products give the direct sums
    assert tile_arithmetic({}, 0) is None


def test_an_algorithm_choice_reads_as_the_times_measured():
    choice = AlgorithmChoice("winograd", {"im2col": 2e-3, "winograd": 1e-3})
    assert str(choice) == "winograd (measured here: 1.00 ms a call, im2col 2.00 ms)"
    op = CachedOp(mx.sym.relu(mx.sym.var("x")))
    assert op.convolutions() == {}


@pytest.mark.parametrize("batch,groups,kernel,stride,pad,bias", [
    (1, 3, (1, 1), (1, 1), (0, 0), True), (2, 3, (1, 1), (1, 1), (0, 0), False),
    (3, 2, (3, 3), (2, 2), (1, 1), True), (2, 4, (3, 2), (1, 1), (0, 1), True)])
def test_a_grouped_convolution_is_each_groups_convolution_side_by_side(
        batch, groups, kernel, stride, pad, bias):
    """NOTE [Groups]: the forward is one stacked product; group i's filters see only group
    i's channels, so it equals ungrouped convolutions of the slices, concatenated."""
    channels, filters = 2 * groups, 3 * groups
    x = RNG.standard_normal((batch, channels, 7, 6)).astype(np.float32)
    w = RNG.standard_normal((filters, 2, *kernel)).astype(np.float32)
    b = RNG.standard_normal(filters).astype(np.float32) if bias else None
    geometry = {"kernel": kernel, "stride": stride, "pad": pad}
    want = np.concatenate([convolve(x[:, 2 * i:2 * i + 2], w[3 * i:3 * i + 3],
                                    None if b is None else b[3 * i:3 * i + 3], **geometry)
                           for i in range(groups)], axis=1)
    close(convolve(x, w, b, num_group=groups, **geometry), want)
