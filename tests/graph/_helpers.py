"""Graph builders and the golden-file helper shared by the graph compiler tests.

Golden files live in ``tests/graph/golden/``. To regenerate them after an intended change
of the printed IR or of the generated code, run::

    HYBRIDLAB_REGEN_GOLDEN=1 python3 -m pytest -q tests/graph -p no:cacheprovider

and review the diff (``git diff tests/graph/golden``) before committing it.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from hypothesis import strategies as st

from hybridlab.graph import ir
from hybridlab.ops import Aval, registry

GOLDEN = Path(__file__).parent / "golden"
F32 = np.dtype("float32")


def check_golden(name: str, text: str) -> None:
    """Compare ``text`` with ``golden/<name>.txt``; rewrite it only when regenerating
    (a missing golden file fails: it is never recreated silently)."""
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("HYBRIDLAB_REGEN_GOLDEN") == "1":
        path.write_text(text + "\n")
    assert path.exists(), f"{path} is missing; regenerate it as _helpers.py explains"
    assert text + "\n" == path.read_text(), f"{name} differs from {path}; see _helpers.py"


def aval(*shape: int) -> Aval:
    return Aval(tuple(shape), F32)


def has_ops(*names: str) -> bool:
    return all(n in registry._BY_NAME for n in names)


def seed_mlp(batch: int = 1) -> ir.Graph:
    """The seeds' MLP: 512 -> 256 relu -> 128 relu -> 2, built node by node."""
    data = ir.var("data", aval(batch, 512))
    params, value = [data], data.out()
    for i, (width, fan_in) in enumerate([(256, 512), (128, 256), (2, 128)]):
        weight = ir.var(f"fc{i}_weight", aval(width, fan_in))
        bias = ir.var(f"fc{i}_bias", aval(width))
        params += [weight, bias]
        node = ir.call("FullyConnected", [value, weight.out(), bias.out()],
                       {"num_hidden": width}, name=f"fc{i}")
        value = node.out()
        if i < 2:
            value = ir.call("relu", [value], name=f"relu{i}").out()
    return ir.Graph.from_outputs([value], params)


def bias_relu_chain() -> ir.Graph:
    """x(4,8) + b(8) -> relu -> *2: one fusable chain after an opaque-free start."""
    x, b = ir.var("x", aval(4, 8)), ir.var("b", aval(8))
    added = ir.call("broadcast_add", [x.out(), b.out()], name="add0")
    relu = ir.call("relu", [added.out()], name="relu0")
    scaled = ir.call("_mul_scalar", [relu.out()], {"scalar": 2.0}, name="scale0")
    return ir.Graph.from_outputs([scaled.out()])


SHAPES = [(3, 4), (4,), (1, 4), (3, 1)]
BINARY = ("broadcast_add", "broadcast_mul", "broadcast_sub", "broadcast_maximum")
UNARY = ("relu", "tanh", "negative", "abs")


@st.composite
def random_graphs(draw: st.DrawFn, dtype: str = "float32",
                  unary: tuple[str, ...] = UNARY, binary: tuple[str, ...] = BINARY,
                  structural: bool = False) -> tuple[ir.Graph, list[np.ndarray]]:
    """Random DAGs of elementwise, scalar, broadcast and reduce-back ops on 3 inputs;
    with ``structural``, also reshape, transpose, dot, split, concat and sum nodes.
    ``dtype="any"`` draws float32, float16 or int32."""
    if dtype == "any":
        dtype = draw(st.sampled_from(["float32", "float16", "int32"]))
    inputs = [ir.var(f"in{i}", Aval(draw(st.sampled_from(SHAPES)), np.dtype(dtype)))
              for i in range(3)]
    constant = ir.const(np.asarray(draw(st.sampled_from([0.5, 2.0])), dtype)).out()
    values = [n.out() for n in inputs] + [constant]
    for step in range(draw(st.integers(1, 10))):
        choice = draw(st.integers(0, 4 if structural else 3))
        values += _random_node(draw, choice, values, inputs, step, unary, binary)
    outputs = [values[-1]] + draw(st.lists(st.sampled_from(values[3:]), max_size=2))
    rng = np.random.default_rng(draw(st.integers(0, 99)))
    scale = 3 if np.dtype(dtype).kind == "i" else 1  # integers: more than -1, 0 and 1
    arrays = [(rng.standard_normal(n.aval[0].shape) * scale).astype(dtype) for n in inputs]
    return ir.Graph.from_outputs(outputs, inputs), arrays


def _random_node(draw: st.DrawFn, choice: int, values: list, inputs: list, step: int,
                 unary: tuple[str, ...], binary: tuple[str, ...]) -> list[ir.Value]:
    """One new node's outputs; none when the drawn inputs' shapes do not fit the op."""
    from hybridlab.errors import ShapeError

    pick = st.integers(0, len(values) - 1)
    try:
        if choice == 4:
            return _structural_node(draw, values, pick, step)
        if choice == 0:
            node = ir.call(draw(st.sampled_from(unary)), [values[draw(pick)]], name=f"u{step}")
        elif choice == 1:
            node = ir.call("_mul_scalar", [values[draw(pick)]], {"scalar": 1.5}, name=f"s{step}")
        elif choice == 2:  # sum back to an input's shape, when it was broadcast from it
            x, like = values[draw(pick)], inputs[draw(st.integers(0, 2))].out()
            if np.broadcast_shapes(x.aval.shape, like.aval.shape) != x.aval.shape:
                return []
            if x.aval.dtype.kind == "i":  # sum_like's kernel gives int64 (ops/broadcast.py)
                return []
            node = ir.call("sum_like", [x, like])
        else:
            node = ir.call(draw(st.sampled_from(binary)), [values[draw(pick)], values[draw(pick)]])
    except (ShapeError, ValueError):  # ShapeError is a ValueError; numpy's broadcast too
        return []
    return [node.out()]


STRUCTURAL = {  # op -> attributes; a draw that does not fit the shapes is skipped
    "Reshape": {"shape": (-1,)}, "Flatten": {}, "transpose": {}, "sum": {"axis": 0},
    "SliceChannel": {"num_outputs": 2, "axis": -1}, "expand_dims": {"axis": 0},
}


def _structural_node(draw: st.DrawFn, values: list, pick: st.SearchStrategy,
                     step: int) -> list[ir.Value]:
    """One shape-changing node (or two-input dot / Concat), as its output Values."""
    kind = draw(st.sampled_from([*STRUCTURAL, "dot", "Concat"]))
    if kind == "dot":
        node = ir.call("dot", [values[draw(pick)], values[draw(pick)]],
                       {"transpose_b": True}, name=f"dot{step}")
    elif kind == "Concat":
        node = ir.call("Concat", [values[draw(pick)], values[draw(pick)]],
                       {"dim": 0, "num_args": 2}, name=f"cat{step}")
    else:
        value = values[draw(pick)]
        if value.aval.shape == ():  # Flatten of a 0-d value raises IndexError (ops/shape.py)
            return []
        node = ir.call(kind, [value], STRUCTURAL[kind], name=f"s{step}")
    return [node.out(i) for i in range(node.num_outputs)]


def replay_imperatively(graph: ir.Graph, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Run ``graph`` op by op through ``nd`` (the engine, as user code would): the
    imperative oracle for compiled programs."""
    from hybridlab import nd

    env = {id(n): [nd.array(a, dtype=a.dtype)] for n, a in zip(graph.inputs, arrays)}
    for node in graph.nodes:
        if node.kind == "const":
            env[id(node)] = [nd.array(node.value, dtype=node.value.dtype)]
        elif node.kind == "call":
            args = [env[id(v.node)][v.index] for v in node.inputs]
            result = getattr(nd, node.op)(*args, **node.attr_dict)
            env[id(node)] = list(result) if isinstance(result, (list, tuple)) else [result]
    return [env[id(v.node)][v.index].asnumpy() for v in graph.outputs]
