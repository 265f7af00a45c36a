"""Symbol JSON: MXNet's layout, exact round trips, and validation that never runs code."""

import copy
import json
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hybridlab as mx
from hybridlab import errors, model_files, sym
from hybridlab.name import NameManager
from hybridlab.ops import registry

needs_fc = pytest.mark.skipif("FullyConnected" not in registry._BY_NAME,
                              reason="FullyConnected is not registered yet")

# A model file in MXNet's own layout, as `mx.sym.save` wrote it.
MXNET_FILE = {
    "nodes": [
        {"op": "null", "name": "data", "inputs": []},
        {"op": "null", "name": "fc1_weight", "attrs": {"__shape__": "(128, 4)"}, "inputs": []},
        {"op": "null", "name": "fc1_bias", "inputs": []},
        {"op": "FullyConnected", "name": "fc1", "attrs": {"num_hidden": "128"},
         "inputs": [[0, 0, 0], [1, 0, 0], [2, 0, 0]]},
        {"op": "relu", "name": "relu1", "inputs": [[3, 0, 0]]},
    ],
    "arg_nodes": [0, 1, 2],
    "node_row_ptr": [0, 1, 2, 3, 4, 5],
    "heads": [[4, 0, 0]],
    "attrs": {"mxnet_version": ["int", 10901]},
}


@pytest.fixture(autouse=True)
def fresh_names():
    with NameManager():
        yield


def _graphs():
    x, y = sym.var("data"), sym.var("y", shape=(2, 3), dtype="float16", __aux__=True)
    graphs = {
        "single": x,
        "chain": sym.relu(sym.relu(x) * 2 + 1),
        "broadcast": sym.broadcast_add(x, y, name="add1"),
        "attrs": sym.sum(x, axis=(0, 1), keepdims=True),
        "group": sym.Group([sym.relu(x), x * 0.5]),
        "shared": sym.relu(x) + sym.relu(x),
        "split": sym.split(x, num_outputs=3, axis=1)[2],
        "weird names": sym.relu(sym.var('na"me\n\\ {}'), name="__import__('os')"),
        "untyped attrs": sym.broadcast_add(x, sym.arange(0, 5)),
    }
    if "FullyConnected" in registry._BY_NAME:
        graphs["mlp"] = sym.FullyConnected(
            sym.relu(sym.FullyConnected(x, num_hidden=8, name="fc1")), num_hidden=2,
            no_bias=True, name="fc2")
    return graphs


@pytest.mark.parametrize("key", sorted(_graphs()))
def test_round_trip_is_exact(key):
    with NameManager():
        original = _graphs()[key]
    text = original.tojson()
    loaded = sym.load_json(text)
    assert loaded.tojson() == text
    assert loaded.list_arguments() == original.list_arguments()
    assert loaded.list_auxiliary_states() == original.list_auxiliary_states()
    assert loaded.list_outputs() == original.list_outputs()
    assert repr(loaded) == repr(original)


def test_layout_is_mxnet_with_string_attrs():
    out = sym.sum(sym.relu(sym.var("data")), axis=1, name="total")
    document = json.loads(out.tojson())
    assert document["nodes"] == [
        {"op": "null", "name": "data", "inputs": []},
        {"op": "relu", "name": "relu0", "inputs": [[0, 0, 0]]},
        {"op": "sum", "name": "total", "attrs": {"axis": "1"}, "inputs": [[1, 0, 0]]},
    ]
    assert document["arg_nodes"] == [0]
    assert document["node_row_ptr"] == [0, 1, 2, 3]
    assert document["heads"] == [[2, 0, 0]]
    assert document["attrs"]["mxnet_version"] == ["int", 10901]
    assert document["attrs"]["hybridlab_version"] == ["str", mx.__version__]


@needs_fc
def test_loads_a_file_written_by_mxnet_and_infers_its_shapes():
    loaded = sym.load_json(json.dumps(MXNET_FILE))
    assert repr(loaded) == "<Symbol relu1>"
    assert loaded.list_arguments() == ["data", "fc1_weight", "fc1_bias"]
    args, outs, _ = loaded.infer_shape(data=(2, 4), fc1_bias=(128,))
    assert args == [(2, 4), (128, 4), (128,)] and outs == [(2, 128)]


def test_untyped_attributes_come_back_as_numbers():
    loaded = sym.load_json(sym.arange(0, 5, name="r").tojson())
    assert loaded.to_graph().nodes[-1].attr_dict["stop"] == 5
    assert loaded.eval()[0].asnumpy().tolist() == [0, 1, 2, 3, 4]


def test_mxnet_composites_in_a_file_are_expanded_with_their_own_code():
    text = json.dumps({"nodes": [
        {"op": "null", "name": "data", "inputs": []},
        {"op": "Activation", "name": "act1", "attrs": {"act_type": "relu"}, "inputs": [[0, 0]]},
        {"op": "softmax", "name": "prob", "attrs": {"axis": "-1"}, "inputs": [[1, 0]]}],
        "heads": [[2, 0]]})
    loaded = sym.load_json(text)
    assert repr(loaded) == "<Symbol prob>"
    assert "act1" in [n.name for n in loaded.to_graph().nodes]
    (result,) = loaded.eval(data=mx.nd.array([[1.0, -2.0, 3.0]]))
    relu = np.maximum([1.0, -2.0, 3.0], 0)
    np.testing.assert_allclose(result.asnumpy()[0], np.exp(relu) / np.exp(relu).sum(),
                               rtol=1e-6)
    resaved = loaded.tojson()
    assert sym.load_json(resaved).tojson() == resaved
    bad = text.replace("act_type", "act_typo")
    with pytest.raises(errors.ModelFileError, match=r"node 1 \('act1'\): Activation"):
        sym.load_json(bad)


def test_save_and_load_a_file(tmp_path):
    out = sym.relu(sym.var("data") * 3)
    path = str(tmp_path / "net-symbol.json")
    out.save(path)
    assert sym.load(path).tojson() == out.tojson()


def test_legacy_attr_key_and_mxnet_dtype_codes_are_understood():
    text = json.dumps({"nodes": [
        {"op": "null", "name": "x", "attr": {"__dtype__": "1", "__shape__": "(2,)"},
         "inputs": []},
        {"op": "sum", "name": "s", "attr": {"axis": "0"}, "inputs": [[0, 0]]}],
        "heads": [[1, 0]]})
    loaded = sym.load_json(text)
    assert loaded.infer_type()[0] == [mx.symbol.np.float64]
    assert loaded.infer_shape()[0] == [(2,)]


# ---------------------------------------------------------------------------------------
# Malformed and malicious files: a clear ModelFileError, and nothing executed
# ---------------------------------------------------------------------------------------

SENTINEL = "hybridlab_json_sentinel"
PAYLOAD = f"__import__('os').system('touch {SENTINEL}')"
RAN = []  # a payload that ran would have to touch this global or the sentinel file


def _mutated(change):
    document = copy.deepcopy(MXNET_FILE)
    document["nodes"][3] = {"op": "relu", "name": "fc1", "inputs": [[0, 0, 0]]}
    change(document)
    return json.dumps(document)


def _set(path, value):
    def change(document):
        target = document
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return change


MALFORMED = [
    ("not json", "{nodes: oops", "not valid JSON"),
    ("not an object", "[1, 2, 3]", "must hold a JSON object"),
    ("NaN constant", '{"nodes": [], "heads": [], "x": NaN}', "NaN is not allowed"),
    ("deep nesting", "[" * 100_000 + "]" * 100_000, "not valid JSON"),
    ("no nodes", json.dumps({"heads": [[0, 0, 0]]}), "missing list 'nodes'"),
    ("no heads", _mutated(lambda d: d.pop("heads")), "missing list 'heads'"),
    ("node not object", _mutated(_set(["nodes", 0], "data")), "node 0: each node must be"),
    ("name not string", _mutated(_set(["nodes", 0, "name"], 7)), "node 0: 'name' must be"),
    ("huge name", _mutated(_set(["nodes", 0, "name"], "x" * 10_000)), "'name' must be"),
    ("unknown op", _mutated(_set(["nodes", 4, "op"], "rleu")),
     r"node 4 \('relu1'\): unknown operator 'rleu'. Did you mean 'relu'"),
    ("code as op", _mutated(_set(["nodes", 4, "op"], PAYLOAD)), "unknown operator"),
    ("unknown attr", _mutated(_set(["nodes", 4, "attrs"], {"alpha": "1"})),
     r"node 4 \('relu1'\): relu: unknown attribute 'alpha'"),
    ("code as attr value", _mutated(lambda d: d["nodes"].append(
        {"op": "sum", "name": "s", "attrs": {"axis": PAYLOAD}, "inputs": [[4, 0, 0]]})),
     r"node 5 \('s'\): sum: attribute 'axis' must be of type axis"),
    ("non-string attr", _mutated(_set(["nodes", 4, "attrs"], {"x": 1})), "must be strings"),
    ("var attr without dunders", _mutated(_set(["nodes", 0, "attrs"], {"shape": "(1,)"})),
     "must be spelled __shape__"),
    ("code as shape", _mutated(_set(["nodes", 0, "attrs"], {"__shape__": PAYLOAD})),
     r"node 0 \('data'\): bad __shape__"),
    ("negative dim", _mutated(_set(["nodes", 0, "attrs"], {"__shape__": "(-2, 3)"})),
     "dims >= 0"),
    ("object dtype", _mutated(_set(["nodes", 0, "attrs"], {"__dtype__": "object"})),
     "not a numeric dtype"),
    ("duplicate name", _mutated(_set(["nodes", 2, "name"], "data")),
     r"node 2 \('data'\): duplicate name \(node 0"),
    ("forward reference", _mutated(_set(["nodes", 3, "inputs"], [[4, 0, 0]])),
     "forward reference, cycle or out of range"),
    ("self cycle", _mutated(_set(["nodes", 3, "inputs"], [[3, 0, 0]])), "cycle"),
    ("negative index", _mutated(_set(["nodes", 3, "inputs"], [[-1, 0, 0]])), "points to node -1"),
    ("huge index", _mutated(_set(["nodes", 3, "inputs"], [[10**30, 0, 0]])), "out of range"),
    ("float index", _mutated(_set(["nodes", 3, "inputs"], [[0.0, 0, 0]])), "must be"),
    ("bool index", _mutated(_set(["nodes", 3, "inputs"], [[True, 0, 0]])), "must be"),
    ("string index", _mutated(_set(["nodes", 3, "inputs"], [["0", 0, 0]])), "must be"),
    ("bad output index", _mutated(_set(["nodes", 3, "inputs"], [[0, 1, 0]])),
     "asks for output 1 of node 0"),
    ("too many inputs", _mutated(_set(["nodes", 3, "inputs"], [[0, 0, 0], [1, 0, 0]])),
     "takes inputs"),
    ("var with inputs", _mutated(_set(["nodes", 1, "inputs"], [[0, 0, 0]])), "has no inputs"),
    ("head out of range", _mutated(_set(["heads"], [[99, 0, 0]])), "heads.*points to node 99"),
    ("head not a list", _mutated(_set(["heads"], [7])), "heads.*must be"),
    ("no heads listed", _mutated(_set(["heads"], [])), "'heads' must list"),
    ("arg_nodes wrong", _mutated(_set(["arg_nodes"], [4])), "'arg_nodes' must list"),
    ("row_ptr wrong", _mutated(_set(["node_row_ptr"], [0, 1])), "'node_row_ptr'"),
]


@pytest.mark.parametrize("text, match", [case[1:] for case in MALFORMED],
                         ids=[case[0] for case in MALFORMED])
def test_malformed_files_are_refused_clearly_without_running_anything(
        text, match, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(errors.ModelFileError, match=match):
        sym.load_json(text)
    assert not os.path.exists(SENTINEL) and RAN == []


def test_too_many_nodes_and_too_large_files_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(model_files, "MAX_NODES", 3)
    with pytest.raises(errors.ModelFileError, match="needs 1..3 nodes"):
        sym.load_json(json.dumps(MXNET_FILE))
    path = tmp_path / "big.json"
    path.write_text(json.dumps(MXNET_FILE))
    monkeypatch.setattr(model_files, "MAX_JSON_BYTES", 10)
    with pytest.raises(errors.ModelFileError, match="larger than"):
        sym.load(str(path))


def test_code_in_names_is_kept_as_data(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = _mutated(_set(["nodes", 0, "name"], PAYLOAD + '"\n\'; RAN.append(1)'))
    loaded = sym.load_json(text)
    assert loaded.list_arguments()[0].startswith("__import__")
    assert loaded.tojson() == sym.load_json(loaded.tojson()).tojson()
    assert not os.path.exists(SENTINEL) and RAN == []


def test_model_file_error_is_a_value_error():
    assert issubclass(errors.ModelFileError, ValueError)


_LEAVES = ["a", "b"]


@st.composite
def programs(draw):
    """Random small programs over a few ops, as (kind, args) steps."""
    steps = draw(st.lists(st.tuples(st.sampled_from(["relu", "add", "mul3", "sum"]),
                                    st.integers(0, 10), st.integers(0, 10)),
                          min_size=1, max_size=8))
    return steps


@settings(max_examples=30, deadline=None)
@given(programs())
def test_random_programs_round_trip(steps):
    with NameManager():
        values = [sym.var(name) for name in _LEAVES]
        for kind, i, j in steps:
            first, second = values[i % len(values)], values[j % len(values)]
            if kind == "relu":
                values.append(sym.relu(first))
            elif kind == "add":
                values.append(first + second)
            elif kind == "mul3":
                values.append(first * 3)
            else:
                values.append(sym.sum(first, axis=0, keepdims=True))
        group = sym.Group(values[len(_LEAVES):])
    text = group.tojson()
    assert sym.load_json(text).tojson() == text


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**20), 10**20) | st.floats(allow_nan=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=10)


def _paths(value, prefix=()):
    """Every (path) inside a JSON document, so a mutation can hit any of them."""
    yield prefix
    children = value.items() if isinstance(value, dict) else enumerate(value) \
        if isinstance(value, list) else ()
    for key, child in children:
        yield from _paths(child, prefix + (key,))


@pytest.mark.slow
@settings(max_examples=120, deadline=None)
@given(st.data(), st.sampled_from([None, (2, 3)]))
def test_any_mutation_either_loads_or_raises_model_file_error(data, shape):
    """Fuzz: replace one random part of a valid file by random JSON."""
    x = sym.var("x", shape=shape)
    document = json.loads(sym.Group([sym.relu(sym.sum(x, axis=1) * 2),
                                     sym.split(x, num_outputs=1, axis=0)]).tojson())
    path = data.draw(st.sampled_from(list(_paths(document))[1:]))
    replacement = data.draw(_JSON_VALUES)
    _set(list(path), replacement)(document)
    try:
        loaded = sym.load_json(json.dumps(document))
    except errors.ModelFileError:
        return
    assert sym.load_json(loaded.tojson()).tojson() == loaded.tojson()


def test_duplicate_names_fail_at_tojson_and_bind_not_at_load():
    """Two nodes named alike would save a file load_json refuses, and binding by name
    would feed both variables from one array; MXNet said "duplicated argument name"."""
    same_vars = sym.relu(sym.var("a"), name="r1") + sym.relu(sym.var("a"), name="r2")
    with pytest.raises(ValueError, match=r"tojson: duplicated argument name 'a' \(two var"):
        same_vars.tojson()
    with pytest.raises(ValueError, match=r"bind: duplicated argument name 'a'.*distinct name"):
        same_vars.eval(a=mx.nd.ones(2))
    same_ops = sym.relu(sym.var("a"), name="r") + sym.relu(sym.var("b"), name="r")
    with pytest.raises(ValueError, match=r"duplicated node name 'r' \(two call nodes"):
        same_ops.tojson()
    np.testing.assert_array_equal(  # running is fine: only names that bind must be unique
        same_ops.eval(a=mx.nd.ones(2), b=mx.nd.ones(2))[0].asnumpy(), [2, 2])
    distinct = sym.relu(sym.var("a"), name="r1") + sym.relu(sym.var("b"), name="r2")
    assert sym.load_json(distinct.tojson()).tojson() == distinct.tojson()


def test_files_mxnet_accepts_load_unset_geometry_and_dropout_p_1(tmp_path):
    import numpy as np

    from hybridlab import autograd, nd, sym

    nodes = [{"op": "null", "name": "data", "inputs": []},
             {"op": "null", "name": "w", "inputs": []},
             {"op": "Convolution", "name": "conv", "inputs": [[0, 0, 0], [1, 0, 0]],
              "attrs": {"kernel": "(1, 1)", "num_filter": "1", "no_bias": "True",
                        "stride": "()", "dilate": "()", "pad": "()"}},
             {"op": "Dropout", "name": "drop", "inputs": [[2, 0, 0]], "attrs": {"p": "1"}}]
    path = tmp_path / "m-symbol.json"
    path.write_text(json.dumps({"nodes": nodes, "arg_nodes": [0, 1], "heads": [[3, 0, 0]]}))
    net = sym.load(str(path))
    x, w = np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2), np.ones((1, 2, 1, 1), np.float32)
    (out,) = net.eval(data=nd.array(x), w=nd.array(w))
    np.testing.assert_array_equal(out.asnumpy(), x.sum(axis=1, keepdims=True))  # stride 1
    with autograd.train_mode():
        dropped = nd.Dropout(nd.array(x), p=1)
    # all dropped, and scaled by 1 / (1 - p) = inf: NaN, as MXNet's 0 * inf
    assert dropped.shape == x.shape and np.isnan(dropped.asnumpy()).all()
