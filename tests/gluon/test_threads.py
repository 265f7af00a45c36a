"""Two or more threads making a hybridized network's first call at once (issue: tracing
swapped print and nd.array module-wide, and name scopes were shared between threads)."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

from hybridlab import nd
from hybridlab.gluon import nn


class Printing(nn.HybridBlock):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.hidden, self.out = nn.Dense(8, activation="relu"), nn.Dense(2)

    def hybrid_forward(self, F, x):
        print("tracing")  # reported, and printed, in the tracing thread only
        return self.out(self.hidden(x))


@pytest.fixture
def tiny_switch_interval():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch as often as they can
    yield
    sys.setswitchinterval(old)


@pytest.mark.filterwarnings("ignore::UserWarning")  # the print report, once per trace
def test_threads_tracing_one_network_at_once_get_correct_results(tiny_switch_interval,
                                                                capsys):
    x = nd.array(np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32))
    for trial in range(200):
        net = Printing()
        net.initialize()
        expected = net(x).asnumpy()  # imperative: the reference
        net.hybridize()
        results, errors = [None] * 4, []

        def call(i, net=net, results=results, errors=errors):
            try:
                results[i] = net(x).asnumpy()
                nd.array([1.0, 2.0])  # made outside any trace: must always work
            except Exception as exc:
                errors.append(exc)

        threads = [threading.Thread(target=call, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors, f"trial {trial}: {errors[0]!r}"
        for result in results:
            np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-6)
    capsys.readouterr()
    # nothing left behind: nd.array works, a print outside a trace reports nothing
    assert nd.array([1.0, 2.0]).shape == (2,)
    report = net.hybridization_report()
    count = len(str(report).splitlines())
    print("not traced")
    assert len(str(net.hybridization_report()).splitlines()) == count


def test_nd_array_is_refused_only_in_the_tracing_thread():
    started, release = threading.Event(), threading.Event()
    outcome = {}

    class Waits(nn.HybridBlock):
        def hybrid_forward(self, F, x):
            started.set()
            release.wait(10)  # hold the trace open while another thread makes arrays
            return x * 2

    def other_thread():
        started.wait(10)
        outcome["array"] = nd.array([3.0]).asnumpy()
        release.set()

    net = Waits()
    net.hybridize()
    helper = threading.Thread(target=other_thread)
    helper.start()
    result = net(nd.ones((2,))).asnumpy()
    helper.join()
    assert outcome["array"].tolist() == [3.0] and result.tolist() == [2.0, 2.0]
