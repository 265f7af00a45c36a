"""export computes every value before it writes either file; a symbol file's __dtype__
that numpy's parser rejects is a ModelFileError. (Atomic writes themselves, a save killed
midway: tests/test_atomic_writes.py; checked parameter loads: main's tests.)"""

import json

import pytest

from hybridlab import nd
from hybridlab import symbol as sym
from hybridlab.errors import ModelFileError
from hybridlab.gluon import nn


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


@pytest.mark.parametrize("dtype", ["(1,2", "(None,)", "9" * 5000])
def test_a_dtype_string_numpy_cannot_parse_is_a_model_file_error(dtype):
    document = json.loads(sym.relu(sym.var("data")).tojson())
    document["nodes"][0]["attrs"] = {"__dtype__": dtype}
    with pytest.raises(ModelFileError, match="bad __shape__ or __dtype__"):
        sym.load_json(json.dumps(document))
