"""The same gradient rules build a symbolic backward graph that agrees with the eager run.

``OpDef.grad`` is written once with ``F.*``; the eager table test checks it against
central differences with ``F = eager``. Here every row with a gradient is traced with
``F = sym`` into a joint forward+backward graph (``graph.autodiff.gradient_graph``),
evaluated, and compared with the eager gradients: a rule that used something a Symbol
cannot do (a shape, a numpy call) fails here.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_registry_table import ROWS, Row, _as_tuple, _inputs

from hybridlab import sym
from hybridlab.graph import autodiff
from hybridlab.graph.evaluate import evaluate
from hybridlab.ops import eager, get
from hybridlab.ops.eager import Tensor


@pytest.mark.parametrize("row", [r for r in ROWS if r.grad], ids=lambda row: row.id)
def test_symbolic_backward_graph_matches_eager_gradients(row: Row):
    op = get(row.op)
    arrays = _inputs(row, np.float64)
    inputs = [sym.var(f"in{i}", shape=a.shape, dtype=a.dtype) for i, a in enumerate(arrays)]
    joint = autodiff.gradient_graph(getattr(sym, row.op)(*inputs, **row.attrs).to_graph())
    outputs = _as_tuple(getattr(eager, row.op)(*arrays, **row.attrs))
    rng = np.random.default_rng(1)
    cotangents = [rng.normal(size=o.data.shape) for o in outputs]
    results = evaluate(joint, *arrays, *cotangents)
    expected = op.grad(eager, [Tensor(a) for a in arrays], list(outputs),
                       [Tensor(c) for c in cotangents], **op.parse_attrs(row.attrs))
    for which, grad in enumerate(expected):
        if grad is not None and which not in row.ints:
            got = np.asarray(results[len(outputs) + which])
            np.testing.assert_allclose(got, grad.data, rtol=1e-6, atol=1e-9)


# Composites have no gradient rule of their own: their gradient is the chain of the rules
# of the ops they call. Checked end to end: symbolic backward graph vs central differences.
COMPOSITE_CALLS = {
    "softmax": ([(3, 4)], lambda F, x: F.softmax(x)),
    "softmax-axis0": ([(3, 4)], lambda F, x: F.softmax(x, axis=0)),
    "log_softmax": ([(3, 4)], lambda F, x: F.log_softmax(x)),
    "softrelu": ([(3, 4)], lambda F, x: F.softrelu(x)),
    "softsign": ([(3, 4)], lambda F, x: F.softsign(x)),
    "Activation-sigmoid": ([(3, 4)], lambda F, x: F.Activation(x, act_type="sigmoid")),
    "stack": ([(2, 3), (2, 3)], lambda F, x, y: F.stack(x, y, axis=1)),
    "maximum": ([(2, 3), (3,)], lambda F, x, y: F.maximum(x, y)),
    "subtract-scalar": ([(2, 3)], lambda F, x: F.subtract(2.0, x)),
    "power-scalar": ([(2, 3)], lambda F, x: F.power(x, 3.0)),
    "Dropout-predicting": ([(2, 3)], lambda F, x: F.Dropout(x, p=0.5)),
}


def _forward(call, arrays):
    return call(eager, *arrays).asnumpy()


@pytest.mark.parametrize("key", list(COMPOSITE_CALLS))
def test_composite_gradient_matches_central_differences(key):
    shapes, call = COMPOSITE_CALLS[key]
    rng = np.random.default_rng(4)
    arrays = [rng.uniform(-2, 2, s) for s in shapes]
    inputs = [sym.var(f"in{i}", shape=s, dtype=np.float64) for i, s in enumerate(shapes)]
    joint = autodiff.gradient_graph(call(sym, *inputs).to_graph())
    cotangent = rng.normal(size=_forward(call, arrays).shape)
    grads = evaluate(joint, *arrays, cotangent)[1:]
    for which, array in enumerate(arrays):
        numeric = np.zeros_like(array)
        for index in np.ndindex(array.shape):
            plus, minus = [a.copy() for a in arrays], [a.copy() for a in arrays]
            plus[which][index] += 1e-6
            minus[which][index] -= 1e-6
            numeric[index] = ((_forward(call, plus) - _forward(call, minus)) * cotangent).sum()
        np.testing.assert_allclose(np.asarray(grads[which]), numeric / 2e-6, rtol=1e-4,
                                   atol=1e-6)
