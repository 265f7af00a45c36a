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


def test_export_errors_name_export_not_nd_save(tmp_path):
    """One error vocabulary for MXNet's files: a parameter export cannot store is reported
    as export's, whatever helper writes it (it used to say "nd.save:")."""
    import pytest

    from hybridlab import model_files, nd, sym

    graph = sym.FullyConnected(sym.var("data"), num_hidden=2, name="fc").to_graph()
    arrays = {"arg:fc_weight": nd.zeros((2, 3), dtype="uint16")}  # no dtype flag in MXNet
    with pytest.raises(TypeError, match=r"^export: entry 'arg:fc_weight' has dtype uint16"):
        model_files.write_export_pair(str(tmp_path / "m-symbol.json"), graph,
                                      str(tmp_path / "m-0000.params"), arrays)
    assert list(tmp_path.iterdir()) == []  # nothing written, no temporary left
