"""Saves that fail keep the old files (export computes every value before writing either
file); loaders check what they load: parameter shapes and dtypes (cast_dtype), saved
shapes against the graph, dtype strings numpy cannot parse.
(Atomic writes themselves, and a save killed midway: tests/test_atomic_writes.py.)"""

import json

import numpy as np
import pytest

from hybridlab import nd
from hybridlab import symbol as sym
from hybridlab.errors import ModelFileError
from hybridlab.gluon import SymbolBlock, nn


def _net():
    net = nn.HybridSequential()
    net.add(nn.Dense(4), nn.BatchNorm())
    net.initialize()
    net.hybridize()
    net(nd.ones((2, 3)))
    return net


def test_export_writes_neither_file_when_a_value_fails(tmp_path, monkeypatch):
    """A second, different network exported over the first: one of its values fails, so
    both files must still be the first network's (not its graph beside old weights)."""
    prefix = str(tmp_path / "m")
    _net().export(prefix)
    before = {p: open(p, "rb").read() for p in (prefix + "-symbol.json",
                                                prefix + "-0000.params")}
    other = nn.HybridSequential()
    other.add(nn.Dense(7))
    other.initialize()
    other.hybridize()
    other(nd.ones((2, 3)))
    param = next(iter(other.collect_params().values()))

    def failing_data(*args):
        raise RuntimeError("the value's op failed")

    monkeypatch.setattr(type(param), "data", failing_data)
    with pytest.raises(RuntimeError, match="op failed"):
        other.export(prefix)
    for path, content in before.items():
        assert open(path, "rb").read() == content


# --- checked loading ----------------------------------------------------------------------
def test_load_parameters_refuses_a_dtype_change_unless_cast_dtype(tmp_path):
    net = nn.Dense(2, in_units=3)
    net.initialize()
    fname = str(tmp_path / "p.params")
    nd.save(fname, {"weight": nd.array(np.full((2, 3), 1e300), dtype="float64"),
                    "bias": nd.zeros((2,))})
    with pytest.raises(ValueError, match="'weight' is float64 but parameter .* float32.*"
                                         "cast_dtype=True"):
        net.load_parameters(fname)
    nd.save(fname, {"weight": nd.array(np.ones((2, 3)), dtype="int8"),
                    "bias": nd.zeros((2,))})
    net.load_parameters(fname, cast_dtype=True)
    assert net.weight.data().dtype == np.float32
    assert net.weight.data().asnumpy().tolist() == [[1.0] * 3] * 2


def test_load_parameters_refuses_a_wrong_shape_naming_the_entry(tmp_path):
    net = nn.Dense(2, in_units=3)
    net.initialize()
    fname = str(tmp_path / "p.params")
    nd.save(fname, {"weight": nd.ones((3, 2)), "bias": nd.zeros((2,))})
    with pytest.raises(ValueError, match=r"p.params: entry 'weight': .* shape \(3, 2\) "
                                         r"does not match the declared \(2, 3\)"):
        net.load_parameters(fname)


def test_imports_checks_saved_shapes_against_the_graph(tmp_path):
    net, prefix = _net(), str(tmp_path / "m")
    net.export(prefix)
    saved = nd.load(prefix + "-0000.params")
    key = next(k for k in saved if k.endswith("running_var"))
    saved[key] = nd.ones((5,))
    nd.save(prefix + "-0000.params", saved)
    with pytest.raises(ValueError, match="m-0000.params: the saved parameter shapes do not "
                                         "fit the graph.*running_var"):
        SymbolBlock.imports(prefix + "-symbol.json", ["data"], prefix + "-0000.params")


@pytest.mark.parametrize("dtype", ["(1,2", "(None,)", "9" * 5000])
def test_a_dtype_string_numpy_cannot_parse_is_a_model_file_error(dtype):
    document = json.loads(sym.relu(sym.var("data")).tojson())
    document["nodes"][0]["attrs"] = {"__dtype__": dtype}
    with pytest.raises(ModelFileError, match="bad __shape__ or __dtype__"):
        sym.load_json(json.dumps(document))
