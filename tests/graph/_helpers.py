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
    """Compare ``text`` with ``golden/<name>.txt`` (or rewrite it when regenerating)."""
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("HYBRIDLAB_REGEN_GOLDEN") == "1" or not path.exists():
        path.write_text(text + "\n")
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
                  unary: tuple[str, ...] = UNARY, binary: tuple[str, ...] = BINARY
                  ) -> tuple[ir.Graph, list[np.ndarray]]:
    """Random DAGs of elementwise, scalar, broadcast and reduce-back ops on 3 inputs."""
    inputs = [ir.var(f"in{i}", Aval(draw(st.sampled_from(SHAPES)), np.dtype(dtype)))
              for i in range(3)]
    constant = ir.const(np.asarray(draw(st.sampled_from([0.5, 2.0])), dtype)).out()
    values = [n.out() for n in inputs] + [constant]
    for step in range(draw(st.integers(1, 10))):
        pick = st.integers(0, len(values) - 1)
        choice = draw(st.integers(0, 3))
        if choice == 0:
            node = ir.call(draw(st.sampled_from(unary)), [values[draw(pick)]], name=f"u{step}")
        elif choice == 1:
            node = ir.call("_mul_scalar", [values[draw(pick)]], {"scalar": 1.5}, name=f"s{step}")
        elif choice == 2:  # sum back to an input's shape, when it was broadcast from it
            x, like = values[draw(pick)], inputs[draw(st.integers(0, 2))].out()
            if np.broadcast_shapes(x.aval.shape, like.aval.shape) != x.aval.shape:
                continue
            node = ir.call("sum_like", [x, like])
        else:
            node = ir.call(draw(st.sampled_from(binary)), [values[draw(pick)], values[draw(pick)]])
        values.append(node.out())
    outputs = [values[-1]] + draw(st.lists(st.sampled_from(values[3:]), max_size=2))
    rng = np.random.default_rng(draw(st.integers(0, 99)))
    arrays = [rng.standard_normal(n.aval[0].shape).astype(dtype) for n in inputs]
    return ir.Graph.from_outputs(outputs, inputs), arrays
