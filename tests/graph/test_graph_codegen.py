"""Generated Python: golden source, safe names, tracebacks into generated lines, static_alloc."""

from __future__ import annotations

import linecache
import traceback

import numpy as np
import pytest
from _helpers import aval, bias_relu_chain, check_golden, has_ops, seed_mlp
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridlab import sym
from hybridlab.errors import ShapeError
from hybridlab.graph import autodiff, ir, shapes
from hybridlab.graph.codegen import Namespace, compile_graph
from hybridlab.graph.evaluate import evaluate
from hybridlab.graph.passes import run_pipeline
from hybridlab.ops import registry
from hybridlab.ops.registry import Aval


def _args(graph: ir.Graph, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(n.aval[0].shape).astype(np.float32) for n in graph.inputs]


def test_generated_source_of_fused_chain_matches_golden():
    graph, _ = run_pipeline(bias_relu_chain())
    check_golden("code_bias_relu_chain", compile_graph(graph).source)
    unfused, _ = run_pipeline(bias_relu_chain(), disabled=("fuse_elementwise",))
    check_golden("code_bias_relu_chain_static", compile_graph(unfused, static_alloc=True).source)


def test_unfused_source_has_one_line_per_node_and_frees_dead_values():
    graph, _ = run_pipeline(bias_relu_chain(), disabled=("fuse_elementwise",))
    source = compile_graph(graph).source
    assert source.splitlines() == [  # add0 is fresh and dies at relu0: written in place
        "def forward(x, b, *, rt=()):",
        "    add0 = broadcast_add(x, b)",
        "    relu0 = relu_out(add0, out=add0); add0 = None",
        "    scale0 = _mul_scalar_out(relu0, out=relu0, scalar=2.0); relu0 = None",
        "    return (scale0,)",
    ]


@pytest.mark.skipif(not has_ops("FullyConnected"), reason="FullyConnected not registered yet")
def test_seed_mlp_code_matches_golden_and_computes_the_same():
    graph, _ = run_pipeline(seed_mlp(batch=4))
    program = compile_graph(graph, static_alloc=True)
    check_golden("code_seed_mlp", program.source)
    args = _args(graph)
    np.testing.assert_allclose(program(*args)[0], evaluate(seed_mlp(4), *args)[0], rtol=1e-5)


def test_namespace_sanitises_keywords_builtins_and_injection():
    names = Namespace()
    made = [names.create(s) for s in ["class", "print", "x; import os", "1st", "", "x_import_os",
                                      "np", "ok", "ok"]]
    assert made == ["class_1", "print_1", "x__import_os", "v_1st", "v", "x_import_os",
                    "np", "ok", "ok_1"]
    assert all(m.isidentifier() for m in made)


def test_hostile_names_and_string_attrs_never_reach_the_source():
    evil = "x = __import__('os')\n"
    x = ir.var(evil, aval(3))
    node = ir.call("relu", [x.out()], name="print(1)#")
    graph = ir.Graph.from_outputs([node.out()])
    source = compile_graph(graph).source
    assert "__import__('os')" not in source and "print(1)" not in source
    assert "def forward(x_____import____os___, *, rt=()):" in source
    np.testing.assert_array_equal(compile_graph(graph)(np.array([-1, 0, 2], np.float32))[0],
                                  [0, 0, 2])


def test_traceback_points_at_the_generated_line():
    x, y = ir.var("x", aval(3)), ir.var("y", aval(3))
    node = ir.call("broadcast_add", [x.out(), y.out()], name="boom")
    program = compile_graph(ir.Graph.from_outputs([node.out()]))
    with pytest.raises(ValueError) as info:  # shapes that cannot broadcast: the kernel fails
        program(np.ones(2, np.float32), np.ones(3, np.float32))
    frames = traceback.extract_tb(info.value.__traceback__)
    generated = [f for f in frames if f.filename == program.filename]
    assert generated and "boom = broadcast_add(x, y)" in generated[0].line
    assert linecache.getline(program.filename, 2).strip() == "boom = broadcast_add(x, y)"


def test_static_alloc_reuses_buffers_and_returns_fresh_outputs():
    graph, _ = run_pipeline(seed_mlp(batch=3))
    program = compile_graph(graph, static_alloc=True)
    assert "out=buf_fc0" in program.source and program.buffers
    first = program(*_args(graph, 1))[0]
    saved = first.copy()
    second = program(*_args(graph, 2))[0]
    np.testing.assert_array_equal(first, saved)  # the second call did not overwrite it
    assert not np.array_equal(first, second)


def test_static_shape_rejects_other_shapes_with_a_fix():
    graph, _ = run_pipeline(bias_relu_chain())
    program = compile_graph(graph, static_shape=True)
    with pytest.raises(ShapeError, match=r"compiled for \(4, 8\).*static_shape=False"):
        program(np.ones((2, 8), np.float32), np.ones(8, np.float32))


def test_attrs_that_are_not_plain_literals_go_through_the_constants_table():
    x = ir.var("x", aval(2, 3))
    node = ir.call("_mul_scalar", [x.out()], {"scalar": float("inf")}, name="big")
    program = compile_graph(ir.Graph.from_outputs([node.out()]))
    assert "inf" not in program.source.split("big = ")[1].split("(")[0]
    assert np.isinf(program(np.ones((2, 3), np.float32))[0]).all()


def _fancy_func(a: ir.Value, b: ir.Value, c: ir.Value, d: ir.Value) -> ir.Graph:
    """The seed's ``fancy_func``: e = add(a, b); f = add(c, d); g = add(e, f)."""
    e = ir.call("broadcast_add", [a, b], name="e").out()
    f = ir.call("broadcast_add", [c, d], name="f").out()
    return ir.Graph.from_outputs([ir.call("broadcast_add", [e, f], name="g").out()])


def test_seed_fancy_func_compiles_to_the_program_a_person_would_write():
    a, b, c, d = (ir.var(n, aval()) for n in "abcd")
    graph, _ = run_pipeline(_fancy_func(a.out(), b.out(), c.out(), d.out()),
                            disabled=("fuse_elementwise",))
    program = compile_graph(graph)
    check_golden("code_seed_fancy_func", program.source)
    args = [np.asarray(v, np.float32) for v in (1, 2, 3, 4)]
    assert program(*args)[0] == 10


def test_seed_fancy_func_of_constants_folds_to_print_10():
    """"The compiler could rewrite it as print((1 + 2) + (3 + 4)), or even print(10)"."""
    values = [ir.const(np.float32(v), name=f"c{v}").out() for v in (1, 2, 3, 4)]
    graph, records = run_pipeline(_fancy_func(*values))
    assert str(graph) == "%0 = const 10.0 : float32[]\nreturn %0"
    assert [len(r.changes) for r in records if r.name == "fold_constants"] == [3]
    assert compile_graph(graph).source.splitlines()[1] == "    return (g,)"


def test_multi_output_nodes_unpack_and_differentiate():
    """split = SliceChannel(x, 3); relu(split[0] * split[2]) and split[1] are the outputs."""
    x = ir.var("x", aval(4, 6))
    split = ir.call("SliceChannel", [x.out()], {"num_outputs": 3, "axis": 1}, name="split0")
    product = ir.call("broadcast_mul", [split.out(0), split.out(2)], name="m")
    graph = ir.Graph.from_outputs([ir.call("relu", [product.out()], name="r").out(),
                                   split.out(1)])
    assert "= SliceChannel(%0, num_outputs=3) : (float32[4,2], float32[4,2]," in str(graph)
    assert "broadcast_mul(%1, %1.2)" in str(graph) and str(graph).endswith("return %3, %1.1")
    joint = autodiff.gradient_graph(graph)
    args = _args(graph) + [np.ones((4, 2), np.float32)] * 2
    expected = evaluate(joint, *args)
    optimised, _ = run_pipeline(joint, verify=True)
    for static_alloc in (False, True):
        program = compile_graph(optimised, static_alloc=static_alloc)
        assert "split0, split0_1, split0_2 = SliceChannel(x" in program.source
        for got, want in zip(program(*args), expected):
            np.testing.assert_allclose(got, want)
    x_grad = expected[2]
    np.testing.assert_array_equal(x_grad[:, 2:4], 1.0)  # split[1] is an output itself


def test_kernels_keep_readable_names_and_unused_outputs_are_dropped_at_once():
    x = ir.var("x", aval(4, 6))
    split = ir.call("SliceChannel", [x.out()], {"num_outputs": 3, "axis": 1}, name="parts")
    total = ir.call("sum", [split.out(1)], {"axis": 0}, name="total")
    source = compile_graph(ir.Graph.from_outputs([total.out()])).source
    assert "parts, parts_1, parts_2 = SliceChannel(x, " in source
    assert "; parts = None; parts_2 = None" in source  # never read: released at once
    assert "total = op_sum(parts_1, axis=0" in source  # not sum_1: sum is a builtin


def test_the_backward_program_is_named_backward_and_the_name_must_be_an_identifier():
    graph = bias_relu_chain()
    assert compile_graph(graph, name="backward").source.startswith("def backward(x, b, *, rt=()):")
    with pytest.raises(ValueError, match="must be a Python identifier"):
        compile_graph(graph, name="not valid")


def test_random_nodes_without_a_generator_draw_from_mx_random_seed():
    import hybridlab as mx

    node = ir.call("_random_normal", [], {"shape": (3,)}, name="noise")
    program = compile_graph(ir.Graph.from_outputs([node.out()], []))
    mx.random.seed(7)
    first = program()[0]
    mx.random.seed(7)
    np.testing.assert_array_equal(program()[0], first)  # seeded: reproducible
    assert not np.array_equal(program()[0], first)  # and the stream moves on


def test_concurrent_calls_of_a_static_program_each_get_an_arena():
    """Threads running one static program never share an arena (NOTE [One arena per
    concurrent call]); results stay right and arenas are only made when needed."""
    import threading

    graph, _ = run_pipeline(seed_mlp(batch=16))
    program = compile_graph(graph, static_alloc=True)
    reference = compile_graph(graph)
    failures = []

    def work(seed: int) -> None:
        args = _args(graph, seed)
        want = reference(*args)[0]
        for _ in range(30):
            if not np.allclose(program(*args)[0], want, rtol=1e-5):
                failures.append(seed)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    assert 1 <= len(program._free) <= 4  # one per call that ran at the same time


def test_an_output_viewing_the_arena_is_copied(monkeypatch):
    """The memory plan keeps outputs out of the arena, but an op whose plain kernel
    returns a view of its input (against the registry contract) would hand the caller
    arena memory; ``Program._own`` copies such an output, and only views are checked."""
    from hybridlab.ops import registry
    from hybridlab.ops.registry import Kind, OpDef

    def as_view(x):
        return x.reshape(x.shape)  # a view: breaks the "fresh array" contract on purpose

    bad = OpDef("_test_returns_view", as_view, lambda a: [a], None, Kind.ELEMENTWISE,
                kernel_out=lambda x, out: np.copyto(out, x) or out)
    monkeypatch.setitem(registry._BY_NAME, bad.name, bad)
    monkeypatch.setitem(registry.OPS, bad.name, bad)
    x = ir.var("x", aval(2, 3))
    placed = ir.call("negative", [x.out()], name="placed")
    graph = ir.Graph.from_outputs([ir.call(bad.name, [placed.out()]).out()], [x])
    planned, _ = run_pipeline(graph, disabled=("fuse_elementwise",))
    program = compile_graph(planned, static_alloc=True)
    assert program.views  # ``placed`` lives in the arena
    first = program(np.ones((2, 3), np.float32))[0]
    program(np.full((2, 3), 5.0, np.float32))  # overwrites the arena
    np.testing.assert_array_equal(first, -np.ones((2, 3)))
    single = program.single()  # the plain call's form guards the same way
    first = single(np.ones((2, 3), np.float32))[0]
    single(np.full((2, 3), 5.0, np.float32))
    np.testing.assert_array_equal(first, -np.ones((2, 3)))


def test_the_plain_call_of_a_static_program_borrows_an_arena_per_call():
    """``Program.single`` (a CachedOp's plain call): the generated function itself without
    an arena; with one, an instance taken from the pool and given back, so nested or
    concurrent calls never share an arena and one call leaves one instance."""
    graph, _ = run_pipeline(seed_mlp(batch=4))
    plain = compile_graph(graph)
    assert plain.single() is plain.function
    program = compile_graph(graph, static_alloc=True)
    assert program.buffers[0].ctypes.data % 64 == 0  # the arena starts a cache line
    single, args = program.single(), _args(graph, 0)
    want = plain(*args)[0]
    first = single(*args)
    assert len(first) == 1 and len(program._free) == 1
    np.testing.assert_allclose(first[0], want, rtol=1e-5)
    taken = program._free.pop()  # an instance busy elsewhere: the call makes another
    np.testing.assert_allclose(single(*_args(graph, 1))[0], plain(*_args(graph, 1))[0],
                               rtol=1e-5)
    assert len(program._free) == 1 and program._free[0] is not taken
    np.testing.assert_allclose(first[0], want, rtol=1e-5)  # not overwritten by the next call


def _two_layers(data: Aval, hidden: int, no_bias: bool, weight_dtype: str) -> ir.Graph:
    """FullyConnected -> relu -> FullyConnected: with static_alloc the first product is an
    intermediate, so it goes into the arena (``out=``); the second is the output."""
    x, inputs = ir.var("x", data), []
    value, fan_in = x.out(), int(np.prod(data.shape[1:]))
    for i in range(2):
        names = ("w", "b") if i == 0 else ("w2", "b2")
        w = ir.var(names[0], Aval((hidden, fan_in), np.dtype(weight_dtype)))
        b = ir.var(names[1], Aval((hidden,), np.dtype(weight_dtype)))
        inputs += [w] if no_bias else [w, b]
        fc = ir.call("FullyConnected", [value, w.out()] + ([] if no_bias else [b.out()]),
                     {"num_hidden": hidden, "no_bias": no_bias}, name=f"fc{i}")
        value, fan_in = fc.out(), hidden
        if i == 0:
            value = ir.call("relu", [value], name="act").out()
    return ir.Graph.from_outputs([value], [x, *inputs])


def _fill(graph: ir.Graph, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(n.aval[0].shape) * 4).astype(n.aval[0].dtype)
            for n in graph.inputs]


@pytest.mark.skipif(not has_ops("FullyConnected"), reason="FullyConnected not registered yet")
@settings(max_examples=40, deadline=None)
@given(batch=st.integers(1, 4), units=st.integers(1, 5), hidden=st.integers(1, 5),
       dtype=st.sampled_from(["float32", "float64", "int32"]), static=st.booleans(),
       seed=st.integers(0, 2**16))
def test_specialised_fully_connected_gives_the_bits_of_the_general_kernel(
        batch, units, hidden, dtype, static, seed):
    """NOTE [Specialised kernels]: 2-D data, a bias, one dtype -> FullyConnected_2d(_out),
    whose result is the general kernel's (ir.evaluate runs those), bit for bit."""
    graph = _two_layers(Aval((batch, units), np.dtype(dtype)), hidden, False, dtype)
    program = compile_graph(run_pipeline(graph)[0], static_alloc=static)
    first = "FullyConnected_2d_out(x, w, b, out=" if static else "FullyConnected_2d(x, w, b)"
    assert first in program.source and "flatten=" not in program.source
    args = _fill(graph, seed)
    (result,), (expected,) = program(*args), evaluate(graph, *args)
    assert result.dtype == expected.dtype
    np.testing.assert_array_equal(result, expected)
    fc, layer = registry.get("FullyConnected").kernel, args[:3]
    attrs = {"num_hidden": hidden, "no_bias": False, "flatten": True}
    special = fc.specialise([Aval(a.shape, a.dtype) for a in layer], False, **attrs)
    np.testing.assert_array_equal(special(*layer), fc(*layer, **attrs))


@pytest.mark.parametrize("op, in_shapes, attrs", [
    ("Convolution", [(2, 4, 7, 7), (6, 2, 3, 3), (6,)],
     {"kernel": (3, 3), "num_filter": 6, "num_group": 2, "pad": (1, 1), "stride": (2, 2)}),
    ("Pooling", [(1, 3, 9, 8)], {"kernel": (3, 2), "stride": (2, 2), "pool_type": "max"}),
    ("Pooling", [(2, 3, 5, 5)], {"global_pool": True, "pool_type": "avg"}),
])
def test_sized_kernels_give_the_bits_of_the_general_kernel(op, in_shapes, attrs):
    """NOTE [Specialised kernels]: an allocating kernel sized at compile time
    (``Convolution_sized``) computes what the general one does, without its ``infer``."""
    opdef = registry.get(op)
    parsed = opdef.parse_attrs(attrs)
    arrays = [np.random.default_rng(i).normal(size=s).astype(np.float32)
              for i, s in enumerate(in_shapes)]
    special = opdef.kernel.specialise([Aval(a.shape, a.dtype) for a in arrays], False, **parsed)
    np.testing.assert_array_equal(special(*arrays), opdef.kernel(*arrays, **parsed))
    into = opdef.kernel.specialise([Aval(a.shape, a.dtype) for a in arrays], True, **parsed)
    buffer = np.empty_like(special(*arrays))  # a planned buffer: kernel_out, attributes bound
    assert into(*arrays, out=buffer) is buffer
    np.testing.assert_array_equal(buffer, opdef.kernel(*arrays, **parsed))
    graph = getattr(sym, op)(*[sym.var(f"x{i}") for i in range(len(in_shapes))],
                                     **attrs).to_graph()
    graph = shapes.infer_graph(graph, [Aval(a.shape, a.dtype) for a in arrays])
    program = compile_graph(run_pipeline(graph)[0])
    assert f"{op}_sized(x0" in program.source
    np.testing.assert_array_equal(program(*arrays)[0], evaluate(graph, *arrays)[0])


@pytest.mark.skipif(not has_ops("FullyConnected"), reason="FullyConnected not registered yet")
@pytest.mark.parametrize("data, weight_dtype, no_bias", [
    (Aval((2, 3, 4), np.dtype("float32")), "float32", False),  # flatten has work to do
    (Aval((2, 12), np.dtype("int32")), "float32", False),  # int32 . float32 promotes
    (Aval((2, 12), np.dtype("float32")), "float32", True),  # no bias
])
def test_fully_connected_keeps_the_general_kernel_when_the_case_is_not_plain(
        data, weight_dtype, no_bias):
    graph = _two_layers(data, 3, no_bias, weight_dtype)
    program = compile_graph(run_pipeline(graph)[0])
    call = "FullyConnected(x, w, flatten=True, no_bias=True," if no_bias else \
        "FullyConnected(x, w, b, flatten=True, no_bias=False,"
    assert call in program.source
    args = _fill(graph, 0)
    np.testing.assert_array_equal(program(*args)[0], evaluate(graph, *args)[0])


def test_a_programs_linecache_entry_lives_as_long_as_the_program():
    import gc

    graph, _ = run_pipeline(bias_relu_chain())
    kept = compile_graph(graph)
    names = []
    for _ in range(50):
        names.append(compile_graph(graph).filename)  # compiled and dropped at once
    gc.collect()
    assert not [n for n in names if n in linecache.cache]
    assert linecache.getline(kept.filename, 1).strip()  # the live one stays readable
    filename = kept.filename
    del kept
    gc.collect()
    assert filename not in linecache.cache
