"""Model files written by an attacker: loading and running them never executes their text.

Every string in a model file (node names, attribute keys and values, variable
attributes) is hostile here. The graphs are *fusable chains* on purpose: the fused
group is where codegen once pasted a node's name into a comment, and a newline in
the name turned the rest of it into code. Each file is loaded and run three ways
(``Symbol.eval``, ``CachedOp`` with and without static_alloc and under
``autograd.record``, ``SymbolBlock.imports``); none may create the marker file, and
no generated source may contain any of the hostile text.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hybridlab import autograd, gluon, nd, sym
from hybridlab.errors import GraphError, ModelFileError
from hybridlab.graph import ir
from hybridlab.graph.cached_op import CachedOp
from hybridlab.graph.codegen import check_source


def _payloads(marker: Path) -> list[str]:
    code = f"__import__('os').system('touch {marker}')"
    return [
        f"r\n    {code}\n    #",  # ends the fused group's comment line
        f"x'; {code}; '",  # quotes
        f'x"""\n{code}\n"""',  # a triple-quoted string
        f"y)\n    {code}\n    (",  # closes a call
        f"\r    {code}  # carriage return",
        f"\u2028{code}",  # a Unicode line separator
    ]


def _chain_file(path: Path, names: list[str]) -> Path:
    """data -> relu -> tanh -> _mul_scalar -> sigmoid: one fusable chain, hostile names."""
    ops = [("relu", {}), ("tanh", {}), ("_mul_scalar", {"scalar": "2.0"}), ("sigmoid", {})]
    nodes = [{"op": "null", "name": "data", "inputs": []}]
    for i, ((op, attrs), name) in enumerate(zip(ops, names)):
        nodes.append({"op": op, "name": name, "attrs": attrs, "inputs": [[i, 0, 0]]})
    document = {"nodes": nodes, "arg_nodes": [0], "heads": [[len(nodes) - 1, 0, 0]]}
    path.write_text(json.dumps(document))
    return path


def _expected(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-2 * np.tanh(np.maximum(x, 0))))


def _assert_clean(sources: list[str], payloads: list[str], marker: Path) -> None:
    assert not marker.exists(), "a model file executed code"
    for source in sources:
        assert "'" not in source and '"' not in source  # codegen never writes a string
        for payload in payloads:
            assert payload not in source


@pytest.mark.parametrize("which", range(6))
def test_hostile_names_in_a_fusable_chain_never_run(tmp_path, which):
    marker = tmp_path / "PWNED"
    payloads = _payloads(marker)
    names = [f"n{i}" for i in range(4)]
    names[3] = payloads[which]  # the fused group's root: its name named the fused node
    names[which % 3] = payloads[(which + 1) % len(payloads)]
    path = _chain_file(tmp_path / "evil-symbol.json", names)
    x = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
    loaded = sym.load(str(path))
    np.testing.assert_allclose(loaded.eval(data=nd.array(x))[0].asnumpy(), _expected(x),
                               rtol=1e-6)
    sources = []
    for static_alloc in (False, True):
        op = CachedOp(loaded, static_alloc=static_alloc)
        np.testing.assert_allclose(op(nd.array(x)).asnumpy(), _expected(x), rtol=1e-6)
        data = nd.array(x)
        data.attach_grad()
        with autograd.record():
            out = op(data)
        out.backward()
        sources.append(op.code)
    assert "fused" in sources[0]  # the chain really went through the fusion pass
    block = gluon.SymbolBlock.imports(str(path), ["data"])
    np.testing.assert_allclose(block(nd.array(x)).asnumpy(), _expected(x), rtol=1e-6)
    _assert_clean(sources + [str(loaded.debug_str())], payloads, marker)


def test_hostile_attribute_values_and_keys_are_refused_before_anything_runs(tmp_path):
    marker = tmp_path / "PWNED"
    code = f"__import__('os').system('touch {marker}')"
    bad_attrs = [{"scalar": f"1.0\n{code}"}, {"scalar": f"1.0) or {code} or (1"},
                 {f"scalar=1.0, **{{}}){code}#": "1.0"}, {"scalar": "1e999999"}]
    for attrs in bad_attrs:
        document = {"nodes": [{"op": "null", "name": "data", "inputs": []},
                              {"op": "relu", "name": "r", "inputs": [[0, 0, 0]]},
                              {"op": "_mul_scalar", "name": "m", "attrs": attrs,
                               "inputs": [[1, 0, 0]]}],
                    "arg_nodes": [0], "heads": [[2, 0, 0]]}
        try:
            loaded = sym.load_json(json.dumps(document))
        except ModelFileError:
            continue  # refused with a clear error: fine
        out = loaded.eval(data=nd.ones((2, 3)))[0].asnumpy()  # it loaded: it must be harmless
        assert np.isfinite(out).all() or attrs.get("scalar") == "1e999999"
    assert not marker.exists()


def test_hostile_variable_attributes_stay_data(tmp_path):
    marker = tmp_path / "PWNED"
    code = f"__import__('os').system('touch {marker}')"
    document = {"nodes": [{"op": "null", "name": f"data\n{code}",
                           "attrs": {"__init__": code, "__lr_mult__": f"1\n{code}"},
                           "inputs": []},
                          {"op": "relu", "name": "r", "inputs": [[0, 0, 0]]},
                          {"op": "tanh", "name": "t", "inputs": [[1, 0, 0]]}],
                "arg_nodes": [0], "heads": [[2, 0, 0]]}
    loaded = sym.load_json(json.dumps(document))
    op = CachedOp(loaded, static_alloc=True)
    np.testing.assert_allclose(op(nd.ones((2, 2))).asnumpy(), np.tanh(1.0), rtol=1e-6)
    _assert_clean([op.code], [code], marker)


def test_the_printed_ir_keeps_one_line_per_node_whatever_the_names():
    names = ["a\nb", "c\rd", "e\u2028f", "g h", "'q'", ""]
    x = ir.var(names[0], ir.Aval((2,), np.dtype("float32")))
    value = x.out()
    for name in names[1:]:
        value = ir.call("relu", [value], name=name).out()
    graph = ir.Graph.from_outputs([value])
    printed = str(graph)
    assert len(printed.splitlines()) == len(graph.nodes) + 1
    assert printed.splitlines()[0] == "%0 = var 'a\\nb' : float32[2]"
    with pytest.raises(GraphError) as info:  # verification errors quote the names too
        ir.verify(ir.Graph(graph.nodes[::-1], graph.inputs, graph.outputs))
    assert "'c\\rd'" in str(info.value)


@pytest.mark.parametrize("source", [
    "def forward(x, *, rt):\n    return (x,)\nimport os\n",
    "def forward(x, *, rt):\n    y = __import__('os')\n    return (x,)\n",
    "def forward(x, *, rt):\n    y = x.tofile\n    return (x,)\n",
    "def forward(x, *, rt):\n    y = 'text'\n    return (x,)\n",
])
def test_the_source_check_refuses_anything_codegen_would_not_write(source):
    with pytest.raises(GraphError, match="does not allow"):
        check_source(source, {"x", "y", "rt"})
    check_source("def forward(x, *, rt):\n    y = x\n    return (y,)\n", {"x", "y", "rt"})
