"""hybridlab's files are MXNet's files: fixtures written and read by real MXNet 1.9.1.

The fixtures under ``tests/fixtures/mxnet/`` come from ``tools/mxnet_fixtures.py`` (see its
docstring); the expected values are plain numpy ``.npz`` files, read with ``np.load``, so
no expectation here goes through the reader under test.
"""

import json
import os

import numpy as np
import pytest
from _models import Residual

from hybridlab import errors, gluon, nd, sym
from hybridlab.gluon import nn

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "mxnet")
MXNET_DTYPES = ["float32", "float64", "float16", "uint8", "int8", "int32", "int64", "bool"]


def _fixture(*parts):
    return os.path.join(FIXTURES, *parts)


def _assert_identical(loaded, expected):
    """Same dtype and the very same values (bit for bit, NaNs included)."""
    assert loaded.dtype == expected.dtype
    assert loaded.shape == expected.shape
    assert loaded.tobytes() == expected.tobytes()


def test_the_fixtures_come_from_mxnet_1_9_1_and_cover_every_dtype_it_saves():
    with open(_fixture("versions.json")) as f:
        versions = json.load(f)
    assert versions["mxnet"] == "1.9.1" and versions["dtypes"] == MXNET_DTYPES


def test_nd_save_files_written_by_mxnet_load_with_identical_values_and_dtypes():
    expected = np.load(_fixture("arrays-expected.npz"))
    as_list = nd.load(_fixture("arrays-list.nd"))
    assert isinstance(as_list, list) and len(as_list) == len(MXNET_DTYPES)
    for array, dtype in zip(as_list, MXNET_DTYPES):
        _assert_identical(array.asnumpy(), expected[dtype])
    as_dict = nd.load(_fixture("arrays-dict.nd"))
    assert list(as_dict) == [f"w_{d}" for d in MXNET_DTYPES]
    for dtype in MXNET_DTYPES:
        _assert_identical(as_dict[f"w_{dtype}"].asnumpy(), expected[dtype])


def test_numpy_shape_mode_files_v3_magic_and_a_0d_array_load():
    loaded = nd.load(_fixture("arrays-np-shape.nd"))
    assert loaded["m"].asnumpy().tolist() == [[0, 1, 2], [3, 4, 5]]
    assert loaded["scalar"].shape == () and float(loaded["scalar"].asnumpy()) == 2.5


def test_loaded_arrays_sit_in_64_byte_aligned_buffers_not_views_of_the_file():
    for array in nd.load(_fixture("lenet", "model-0000.params")).values():
        values = array._data
        assert values.ctypes.data % 64 == 0 and values.flags.c_contiguous
        assert values.base is None or values.base.base is None  # own buffer, no file map


@pytest.mark.parametrize("model", ["mlp", "lenet", "convnet"])
def test_params_exported_by_mxnet_load_with_identical_values_and_dtypes(model):
    expected = np.load(_fixture(model, "params-expected.npz"))
    loaded = nd.load(_fixture(model, "model-0000.params"))
    assert sorted(loaded) == sorted(expected.files)
    assert any(key.startswith("aux:") for key in loaded) == (model == "convnet")
    for key in expected.files:
        _assert_identical(loaded[key].asnumpy(), expected[key])


@pytest.mark.parametrize("model", ["mlp", "lenet", "convnet"])
def test_models_exported_by_mxnet_import_and_compute_what_mxnet_computed(model):
    net = gluon.SymbolBlock.imports(_fixture(model, "model-symbol.json"), ["data"],
                                    _fixture(model, "model-0000.params"))
    io = np.load(_fixture(model, "io.npz"))
    np.testing.assert_allclose(net(nd.array(io["x"])).asnumpy(), io["y"], rtol=1e-5,
                               atol=1e-6)
    if model == "convnet":  # BatchNorm's moving statistics are auxiliary states
        symbol = net(sym.var("data"))
        assert symbol.list_auxiliary_states() == [
            "batchnorm0_running_mean", "batchnorm0_running_var",
            "residual0_batchnorm0_running_mean", "residual0_batchnorm0_running_var"]


def test_hidden_outputs_in_node_row_ptr_are_mxnets_and_nothing_else():
    """MXNet counts outputs it keeps for the backward (NOTE [Hidden outputs]); a count that
    is neither hybridlab's nor MXNet's is refused."""
    text = open(_fixture("lenet", "model-symbol.json")).read()
    document = json.loads(text)
    pooling = next(i for i, n in enumerate(document["nodes"]) if n["op"] == "Pooling")
    visible = document["node_row_ptr"][:]
    for k in range(pooling + 1, len(visible)):
        visible[k] -= 1  # as hybridlab counts: one output
    for row_ptr in (document["node_row_ptr"], visible):
        assert sym.load_json(json.dumps({**document, "node_row_ptr": row_ptr})) is not None
    wrong = document["node_row_ptr"][:]
    for k in range(pooling + 1, len(wrong)):
        wrong[k] += 1  # three outputs: neither
    with pytest.raises(errors.ModelFileError, match="node_row_ptr"):
        sym.load_json(json.dumps({**document, "node_row_ptr": wrong}))


def _same_layers_as_mxnet(model):
    net = nn.HybridSequential()
    if model == "mlp":
        net.add(nn.Dense(256, activation="relu"), nn.Dense(128, activation="relu"),
                nn.Dense(2))
    elif model == "lenet":
        net.add(nn.Conv2D(6, 5, activation="relu"), nn.MaxPool2D(2, 2),
                nn.Conv2D(16, 5, activation="relu"), nn.MaxPool2D(2, 2),
                nn.Dense(120, activation="relu"), nn.Dense(84, activation="relu"),
                nn.Dense(10))
    else:
        net.add(nn.Conv2D(8, 3, padding=1), nn.BatchNorm(), nn.LeakyReLU(0.1), Residual(8),
                nn.MaxPool2D(2), nn.AvgPool2D(2), nn.Flatten(), nn.Dropout(0.5),
                nn.Dense(10))
    return net


@pytest.mark.parametrize("model", ["mlp", "lenet", "convnet"])
@pytest.mark.parametrize("hybridize", [False, True])
def test_mxnet_save_parameters_files_load_into_the_same_layers(model, hybridize):
    """MXNet's save_parameters (structural keys, BatchNorm's running statistics too) loads
    with load_parameters, and the layers then compute what MXNet computed."""
    io = np.load(_fixture(model, "io.npz"))
    net = _same_layers_as_mxnet(model)
    net.initialize()
    net(nd.array(io["x"]))  # sizes the deferred parameters
    net.load_parameters(_fixture(model, "model.params"))
    if hybridize:
        net.hybridize()
    np.testing.assert_allclose(net(nd.array(io["x"])).asnumpy(), io["y"], rtol=1e-4,
                               atol=1e-5)


# --- the other direction: MXNet read what hybridlab wrote ---------------------------------
def test_mxnet_read_hybridlab_nd_save_files_with_identical_values_and_dtypes():
    written = np.load(_fixture("from_hybridlab", "arrays-written.npz"))
    read_list = np.load(_fixture("from_hybridlab", "mxnet-read-list.npz"))
    read_dict = np.load(_fixture("from_hybridlab", "mxnet-read-dict.npz"))
    assert written.files == MXNET_DTYPES
    for index, dtype in enumerate(MXNET_DTYPES):
        _assert_identical(read_list[str(index)], written[dtype])
        _assert_identical(read_dict[f"w_{dtype}"], written[dtype])


def test_hybridlab_writes_the_same_bytes_as_mxnet_for_the_same_arrays(tmp_path):
    for kind in ("list", "dict"):
        mxnet_file = _fixture(f"arrays-{kind}.nd")
        nd.save(str(tmp_path / kind), nd.load(mxnet_file))
        with open(mxnet_file, "rb") as f:
            assert (tmp_path / kind).read_bytes() == f.read()


def test_mxnet_ran_hybridlab_exports_and_saved_parameters_to_the_same_outputs():
    io = np.load(_fixture("from_hybridlab", "mlp-io.npz"))
    mxnet = np.load(_fixture("from_hybridlab", "mxnet-outputs.npz"))
    np.testing.assert_allclose(mxnet["imports"], io["y"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mxnet["load_parameters"], io["y"], rtol=1e-5, atol=1e-6)
    again = gluon.SymbolBlock.imports(_fixture("from_hybridlab", "mlp-symbol.json"), ["data"],
                                      _fixture("from_hybridlab", "mlp-0000.params"))
    np.testing.assert_allclose(again(nd.array(io["x"])).asnumpy(), io["y"], rtol=1e-5,
                               atol=1e-6)


def test_mxnet_ran_hybridlabs_layer_operators_to_the_same_outputs():
    """hybridlab's export of a convnet holds MXNet's operators whole (Activation,
    BatchNorm with its auxiliary states, Dropout, elemwise_add): MXNet 1.9.1 ran the file
    (tools/mxnet_fixtures.py mxnet-reads) and computed hybridlab's outputs."""
    with open(_fixture("from_hybridlab", "convnet-symbol.json")) as f:
        document = json.load(f)
    ops = {node["op"] for node in document["nodes"]}
    # the export-pair digest (NOTE [Export pair]) is in the file MXNet ran
    assert document["attrs"]["hybridlab_params_sha256"][0] == "str"
    assert {"Activation", "BatchNorm", "Dropout", "elemwise_add", "LeakyReLU"} <= ops
    assert not ops & {"relu", "broadcast_add", "_dropout_mask", "broadcast_mul"}
    io = np.load(_fixture("from_hybridlab", "convnet-io.npz"))
    mxnet = np.load(_fixture("from_hybridlab", "mxnet-convnet-outputs.npz"))
    np.testing.assert_allclose(mxnet["imports"], io["y"], rtol=1e-5, atol=1e-6)
    again = gluon.SymbolBlock.imports(_fixture("from_hybridlab", "convnet-symbol.json"),
                                      ["data"], _fixture("from_hybridlab", "convnet-0000.params"))
    np.testing.assert_allclose(again(nd.array(io["x"])).asnumpy(), io["y"], rtol=1e-5,
                               atol=1e-6)


def test_batchnorm_read_from_mxnet_uses_batch_statistics_while_training_and_has_a_gradient():
    from hybridlab import autograd

    rng = np.random.default_rng(0)
    x = nd.array(rng.normal(3.0, 2.0, size=(8, 2, 3, 3)).astype(np.float32))
    gamma, beta = nd.ones((2,)), nd.zeros((2,))
    mean, var = nd.zeros((2,)), nd.ones((2,))
    predicted = nd.BatchNorm(x, gamma, beta, mean, var, fix_gamma=False).asnumpy()
    np.testing.assert_allclose(predicted, x.asnumpy() / np.sqrt(1 + 1e-3), rtol=1e-5)
    with autograd.train_mode():
        trained = nd.BatchNorm(x, gamma, beta, mean, var, fix_gamma=False).asnumpy()
    per_channel = trained.transpose(1, 0, 2, 3).reshape(2, -1)
    np.testing.assert_allclose(per_channel.mean(axis=1), 0, atol=1e-5)  # the batch's own
    np.testing.assert_allclose(per_channel.std(axis=1), 1, atol=1e-3)
    # training, MXNet's operator also moves the moving statistics in place (momentum 0.9)
    batch = x.asnumpy().transpose(1, 0, 2, 3).reshape(2, -1)
    np.testing.assert_allclose(mean.asnumpy(), 0.1 * batch.mean(axis=1), rtol=1e-5)
    np.testing.assert_allclose(var.asnumpy(), 0.9 + 0.1 * batch.var(axis=1), rtol=1e-5)
    mean, var = nd.zeros((2,)), nd.ones((2,))
    # differentiated through its lowering: predicting, y = x / sqrt(1 + eps) per element;
    # training, the sum of a normalised channel is constant, so its gradient is zero
    x.attach_grad()
    with autograd.record(train_mode=False):
        y = nd.BatchNorm(x, gamma, beta, mean, var, fix_gamma=False)
    y.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), 1 / np.sqrt(1 + 1e-3), rtol=1e-5)
    with autograd.record():
        y = nd.BatchNorm(x, gamma, beta, mean, var, fix_gamma=False)
    y.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), 0, atol=1e-5)


def test_loaded_parameters_are_checked_against_the_network_and_the_graph(tmp_path):
    net = nn.Dense(3, in_units=4, prefix="fc_")
    net.initialize()
    path = str(tmp_path / "fc.params")
    nd.save(path, {"weight": nd.ones((3, 4), dtype="float64"), "bias": nd.ones((3,))})
    with pytest.raises(ValueError, match="'weight' is stored as float64 but the parameter "
                                         "is float32; .*cast_dtype=True"):
        net.load_parameters(path)
    net.load_parameters(path, cast_dtype=True)
    assert net.weight.data().dtype == np.float32
    nd.save(path, {"weight": nd.ones((3, 5)), "bias": nd.ones((3,))})
    with pytest.raises(ValueError, match=r"shape \(3, 5\) but the parameter has \(3, 4\)"):
        net.load_parameters(path)
    # an exported graph declares its parameters' shapes: a running_var of another shape
    folder = _fixture("convnet", "")
    saved = nd.load(os.path.join(folder, "model-0000.params"))
    saved["aux:batchnorm0_running_var"] = nd.ones((5,))
    broken = str(tmp_path / "broken.params")
    nd.save(broken, saved)
    block = gluon.SymbolBlock.imports(os.path.join(folder, "model-symbol.json"), ["data"],
                                      broken)  # MXNet declares BatchNorm's shapes as (0,)
    with pytest.raises(errors.ShapeError, match=r"moving_var has shape \(5,\), but the data"):
        block(nd.array(np.load(_fixture("convnet", "io.npz"))["x"]))
    declared = str(tmp_path / "declared.params")  # a declared dimension is checked at once
    saved = nd.load(os.path.join(folder, "model-0000.params"))
    saved["arg:conv2_bias"] = nd.ones((5,))
    nd.save(declared, saved)
    with pytest.raises(ValueError, match=r"'arg:conv2_bias' has shape \(5,\) but the graph "
                                         r"declares \(8,\)"):
        gluon.SymbolBlock.imports(os.path.join(folder, "model-symbol.json"), ["data"], declared)


def test_an_imported_batchnorm_trained_says_once_that_its_statistics_stay(tmp_path):
    """The one documented deviation (README, Compatibility): MXNet would move them."""
    import warnings

    from hybridlab import autograd

    net = nn.HybridSequential()
    net.add(nn.Dense(3, in_units=4), nn.BatchNorm())
    net.initialize()
    net.hybridize()
    x = nd.ones((2, 4))
    net(x)
    net.export(str(tmp_path / "bn"))
    loaded = gluon.SymbolBlock.imports(str(tmp_path / "bn-symbol.json"), ["data"],
                                       str(tmp_path / "bn-0000.params"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded(x)  # predicting: nothing to say
        with autograd.record():
            loaded(x)
            loaded(x)
    assert [str(w.message)[:44] for w in caught] == [
        "SymbolBlock: this graph's BatchNorm uses the"]
