"""Several threads making a hybridized network's first call at once (NOTE [Thread-safe
interception] in gluon/_trace.py): right outputs, nothing left patched, and a thread that
is not tracing keeps the real print and nd.array meanwhile."""

import builtins
import contextlib
import io
import sys
import threading

import numpy as np
import pytest

from hybridlab import nd, ndarray
from hybridlab.gluon import nn

THREADS, TRIALS = 4, 200


class Net(nn.HybridBlock):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.hidden = nn.Dense(5)
            self.out = nn.Dense(2)

    def hybrid_forward(self, F, x):
        print("tracing")  # reported while tracing, in the tracing thread only
        return self.out(F.relu(self.hidden(x)))


@pytest.fixture
def tiny_switch_interval():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


@pytest.mark.filterwarnings("ignore:hybridization report")
def test_threads_tracing_one_network_at_once(tiny_switch_interval):
    real_print, real_array = builtins.print, ndarray.array
    inputs = [nd.array(np.random.default_rng(i).normal(size=(3, 4))) for i in range(THREADS)]
    for _ in range(TRIALS):
        net = Net()
        net.initialize()
        expected = [net(x).asnumpy() for x in inputs]  # imperative, before hybridize
        net.hybridize()
        results, errors = [None] * THREADS, []
        barrier = threading.Barrier(THREADS + 1)

        def call(i, net=net, results=results, errors=errors, barrier=barrier):
            barrier.wait()
            try:
                results[i] = net(inputs[i]).asnumpy()
            except Exception as err:  # collected: the test reports every thread's
                errors.append(err)

        def bystander(errors=errors, barrier=barrier):  # never traces
            barrier.wait()
            try:
                for _ in range(20):
                    assert nd.array([1.0, 2.0]).asnumpy().tolist() == [1.0, 2.0]
            except Exception as err:
                errors.append(err)

        threads = [threading.Thread(target=call, args=(i,)) for i in range(THREADS)]
        threads.append(threading.Thread(target=bystander))
        with contextlib.redirect_stdout(io.StringIO()):
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        assert errors == []
        for got, want in zip(results, expected):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        assert builtins.print is real_print and ndarray.array is real_array
    assert nd.array([3.0]).asnumpy().tolist() == [3.0]
