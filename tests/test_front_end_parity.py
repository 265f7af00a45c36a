"""One registry rule gives NDArray and Symbol the same operator functions and methods."""

import numpy as np

from hybridlab import nd, sym
from hybridlab.ndarray import NDArray
from hybridlab.ops import registry
from hybridlab.symbol import Symbol


def _spellings(with_data_input: bool) -> set[str]:
    """The operators of hybridlab.ops (``_fused`` is still registered later, by the fusion
    pass, so no front end has it: open work of issue 13)."""
    names = {s for op in registry.OPS.values()
             if op.infer.__module__.startswith("hybridlab.ops")
             if not with_data_input or callable(op.inputs) or op.inputs
             for s in (op.name, *op.aliases) if "." not in s}
    return names | {s for c in registry.COMPOSITES.values() for s in (c.name, *c.aliases)
                    if "." not in s}


def test_nd_and_sym_have_the_same_operator_functions():
    names = _spellings(with_data_input=False)
    assert sorted(n for n in names if not callable(getattr(nd, n, None))) == []
    assert sorted(n for n in names if not callable(getattr(sym, n, None))) == []


def test_ndarray_and_symbol_have_the_same_operator_methods():
    methods = {n for n in _spellings(with_data_input=True) if n[:1].islower()}
    assert len(methods) > 90
    assert sorted(n for n in methods if not hasattr(NDArray, n)) == []
    assert sorted(n for n in methods if not hasattr(Symbol, n)) == []


def test_a_method_that_used_to_exist_only_when_traced_works_imperatively():
    x, w = nd.array([[1.0, 2.0]]), nd.array([[3.0], [4.0]])
    assert x.dot(w).asnumpy().tolist() == [[11.0]]  # once only sym.Symbol.dot existed
    np.testing.assert_array_equal(x.broadcast_add(x).asnumpy(), [[2.0, 4.0]])
    traced = sym.var("x").dot(sym.var("w"))
    assert traced.eval(x=x, w=w)[0].asnumpy().tolist() == [[11.0]]


def test_the_fused_operator_is_registered_with_the_operators_not_by_the_pass():
    """``_fused`` is an operator like the others (ops/fused.py, imported by hybridlab.ops),
    so it exists in both namespaces whatever was imported; the pass only rewrites graphs."""
    from hybridlab import nd, sym
    from hybridlab.graph.passes import fuse_elementwise
    from hybridlab.ops import OPS

    opdef = OPS["_fused"]
    assert opdef.kernel.__module__ == opdef.infer.__module__ == "hybridlab.ops.fused"
    assert callable(nd._fused) and callable(sym._fused)
    assert not any(isinstance(value, type(opdef)) for value in vars(fuse_elementwise).values())
