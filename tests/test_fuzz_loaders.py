"""Fuzzing the loaders: whatever the bytes, a documented error or a correct load.

A few hundred examples each in ``make test``; ``make fuzz`` runs the same tests with
``HYBRIDLAB_FUZZ_EXAMPLES=10000``. Every outcome must be :class:`ModelFileError` /
:class:`ArrayFileError` or a load that round-trips; the arrays a load makes never exceed
the file's size, and no load -- refused or not -- peaks above 4x the file's size + 64 MiB
(NOTE [Load memory], measured with tracemalloc, which sees numpy's buffers too). The
crafted worst cases at the end are what the loaders' pricing was calibrated on. ONNX
import is fuzzed the same way (structural and byte mutations of small models) under an
audit hook that fails on any code run, import, process or file opened outside the
model's folder; its only documented error is ``OnnxImportError``. The counts (examples,
loads, documented errors, the largest peak) are printed at the end of the run
(``tests/conftest.py``).
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import struct
import threading
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hybridlab import nd, sym
from hybridlab.errors import ArrayFileError, ModelFileError

EXAMPLES = int(os.environ.get("HYBRIDLAB_FUZZ_EXAMPLES", "0")) or 200
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
pytestmark = pytest.mark.fuzz
MIB = 2**20
TALLY: collections.Counter = collections.Counter()  # printed by conftest's summary hook
PEAK_RATIO = {"worst": 0.0}  # the largest (peak - 64 MiB) / size seen, for the summary


@contextlib.contextmanager
def bounded_memory(size: int, loader: str):
    """Fail if the block's peak allocation exceeds 4 x size + 64 MiB; count the outcome."""
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    try:
        yield
    except (ModelFileError, ArrayFileError):
        TALLY[f"{loader}: documented error"] += 1
        raise
    except Exception:
        TALLY[f"{loader}: UNDOCUMENTED exception"] += 1
        raise
    else:
        TALLY[f"{loader}: loaded"] += 1
    finally:
        peak = tracemalloc.get_traced_memory()[1] - base
        if started:
            tracemalloc.stop()
        TALLY[f"{loader}: examples"] += 1
        PEAK_RATIO["worst"] = max(PEAK_RATIO["worst"], (peak - 64 * MIB) / max(size, 1))
        if peak > 4 * size + 64 * MIB:
            TALLY[f"{loader}: OVER the memory bound"] += 1
            raise AssertionError(f"{loader} peaked at {peak} bytes for a {size}-byte file")


def _load_symbol(path) -> object:
    with bounded_memory(os.path.getsize(path), "sym.load"):
        return sym.load(str(path))


def _load_arrays(path) -> object:
    with bounded_memory(os.path.getsize(path), "nd.load"):
        return nd.load(str(path))


def _symbol_bytes() -> bytes:
    x = sym.var("x", shape=(2, 3))
    net = sym.FullyConnected(sym.relu(x), num_hidden=4, name="fc")
    return sym.Group([sym.softmax(net), sym.split(x, num_outputs=3, axis=1)[1]]
                     ).tojson().encode()


def _params_bytes(tmp_path) -> bytes:
    path = str(tmp_path / "seed.params")
    nd.save(path, {"arg:w": nd.ones((4, 3)), "aux:m": nd.array([1, 2], dtype="int64"),
                   "arg:b": nd.zeros((4,), dtype="float16")})
    with open(path, "rb") as file:
        return file.read()


_EDITS = st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255),
                            st.sampled_from(["set", "insert", "delete"])), min_size=1,
                  max_size=6)


def _edit(content: bytes, edits, cut: int | None) -> bytes:
    data = bytearray(content)
    for position, value, kind in edits:
        at = position % (len(data) + 1)
        if kind == "set" and data:
            data[at % len(data)] = value
        elif kind == "insert":
            data.insert(at, value)
        elif data:
            del data[at % len(data)]
    return bytes(data[:cut] if cut is not None else data)


@FUZZ
@given(_EDITS, st.one_of(st.none(), st.integers(0, 2000)))
def test_mutated_symbol_files_load_or_raise_model_file_error(tmp_path, edits, cut):
    path = tmp_path / "model-symbol.json"
    path.write_bytes(_edit(_symbol_bytes(), edits, cut))
    try:
        loaded = _load_symbol(path)
    except ModelFileError as err:
        assert str(path) in str(err)
        return
    assert sym.load_json(loaded.tojson()).tojson() == loaded.tojson()


@FUZZ
@given(_EDITS, st.one_of(st.none(), st.integers(0, 400)))
def test_mutated_params_files_load_or_raise_array_file_error(tmp_path, edits, cut):
    content = _edit(_params_bytes(tmp_path), edits, cut)
    path = tmp_path / "fuzzed.params"
    path.write_bytes(content)
    try:
        loaded = _load_arrays(path)
    except ArrayFileError as err:
        assert "fuzzed.params" in str(err)
        return
    arrays = list(loaded.values()) if isinstance(loaded, dict) else loaded
    assert sum(a.size * a.dtype.itemsize for a in arrays) <= len(content)
    for array in arrays:
        np.asarray(array.asnumpy())  # every array is readable


@FUZZ
@given(st.binary(max_size=512))
def test_random_bytes_are_refused_by_both_loaders(tmp_path, content):
    for name, load, error in (("r-symbol.json", _load_symbol, ModelFileError),
                              ("r.params", _load_arrays, ArrayFileError)):
        path = tmp_path / name
        path.write_bytes(content)
        try:
            load(path)
        except error:
            pass


# --- the worst cases for memory: each would peak far above the bound if parsed naively ----
def _chain(count: int, op: str = "relu", attrs: dict | None = None) -> str:
    nodes = [{"op": "null", "name": "x", "inputs": []}] + [
        {"op": op, "name": f"r{i}", "inputs": [[i, 0, 0]], **({"attrs": attrs} if attrs else {})}
        for i in range(count)]
    return json.dumps({"nodes": nodes, "arg_nodes": [0], "heads": [[count, 0, 0]]})


WORST_JSON = {
    "empty lists": lambda: "[" + ",".join(["[]"] * 2_000_000) + "]",
    "empty objects": lambda: "[" + ",".join(["{}"] * 2_000_000) + "]",
    "empty strings": lambda: "[" + ",".join(['""'] * 2_000_000) + "]",
    "integers": lambda: "[" + ",".join(["1000"] * 2_000_000) + "]",
    "escapes": lambda: '{"nodes": ["' + "a\\n" * 3_000_000 + '"]}',
    "astral text": lambda: '{"nodes": ["' + "\U0001F600" * 3_000_000 + '"]}',
    "30 000 relu nodes": lambda: _chain(30_000),
    "60 000 relu nodes": lambda: _chain(60_000),
    "30 000 softrelu (composite) nodes": lambda: _chain(30_000, "softrelu"),
    "15 000 LeakyReLU nodes": lambda: _chain(15_000, "LeakyReLU",
                                             {"act_type": "leaky", "slope": "0.1"}),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(WORST_JSON))
def test_symbol_files_built_to_exhaust_memory_stay_within_the_bound(tmp_path, case):
    path = tmp_path / "worst-symbol.json"
    path.write_text(WORST_JSON[case](), encoding="utf-8")
    with contextlib.suppress(ModelFileError):
        _load_symbol(path)  # refused or loaded: the bound holds either way


@pytest.mark.slow
def test_the_most_arrays_a_params_file_may_hold_stay_within_the_bound(tmp_path):
    from hybridlab import ndarray_io

    count = ndarray_io.MAX_ARRAYS
    entry = struct.pack("<Iiiqiii", ndarray_io.ARRAY_MAGIC_V2, 0, 1, 0, 1, 0, 0)  # shape (0,)
    names = b"".join(struct.pack("<Q", 6) + f"{i:06d}".encode() for i in range(count))
    path = tmp_path / "many.params"
    path.write_bytes(struct.pack("<QQQ", ndarray_io.LIST_MAGIC, 0, count) + entry * count
                     + struct.pack("<Q", count) + names)
    assert len(_load_arrays(path)) == count


# --- ONNX import: mutated models read no code, raise only OnnxImportError, stay bounded ---
# The limit is lowered to ONNX_LIMIT for the fuzzing, so a mutation that asks for more is
# refused by the budget (onnx/files.py) rather than allocated; an import peaks below
# 3 x what it holds (its NDArrays, the SymbolBlock's copies) + 4 x the file + 64 MiB.
ONNX_LIMIT = 16 * MIB
FORBIDDEN_EVENTS = ("exec", "compile", "subprocess.Popen", "os.system", "os.exec",
                    "os.posix_spawn", "os.spawn", "os.fork", "ctypes.dlopen",
                    "pickle.find_class", "marshal.loads", "import")
AUDIT = {"active": False, "folder": "", "seen": [], "thread": None}


def _watched(thread: threading.Thread) -> bool:
    return thread.ident == AUDIT["thread"] or thread.name.startswith("hybridlab-worker-")


def _audit(event: str, args: tuple) -> None:
    """Record what an ONNX import must never do: run code, import a module, start a
    process, or open a file outside the model's own folder. Only the importing thread and
    hybridlab's engine workers are watched: the hook is process-wide, and other threads of
    the test session (a Dask cluster's monitor reads /proc) are not the import's doing."""
    if not AUDIT["active"] or not _watched(threading.current_thread()):
        return
    if event in FORBIDDEN_EVENTS:
        AUDIT["seen"].append((event, str(args)[:200]))
    elif event == "open" and isinstance(args[0], str) and (
            not os.path.abspath(args[0]).startswith(AUDIT["folder"])):
        AUDIT["seen"].append((event, args[0]))


def _onnx_seeds(onnx) -> dict[str, bytes]:
    """Small models using every kind of rule: layers, folded constants, external data."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def tensor(name, shape):
        return numpy_helper.from_array(rng.normal(size=shape).astype(np.float32), name)

    conv = helper.make_graph([
        helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1] * 4),
        helper.make_node("BatchNormalization", ["c", "g", "beta", "m", "v"], ["n"]),
        helper.make_node("Relu", ["n"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "fc", "fcb"], ["z"], transB=1),
        helper.make_node("Softmax", ["z"], ["y"], axis=1)], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        [tensor("w", (4, 2, 3, 3)), tensor("b", (4,)), tensor("g", (4,)), tensor("beta", (4,)),
         tensor("m", (4,)), numpy_helper.from_array(np.ones(4, np.float32), "v"),
         tensor("fc", (3, 16)), tensor("fcb", (3,))])
    folded = helper.make_graph([
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["batch"], axis=0),
        helper.make_node("Unsqueeze", ["batch", "axes"], ["b1"]),
        helper.make_node("Concat", ["b1", "minus"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["flat"]),
        helper.make_node("ConstantOfShape", ["wshape"], ["w"],
                         value=numpy_helper.from_array(np.array([0.5], np.float32))),
        helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(
            np.array([2.0], np.float32))),
        helper.make_node("Mul", ["w", "k"], ["w2"]),
        helper.make_node("Cast", ["w2"], ["w3"], to=TensorProto.FLOAT),
        helper.make_node("Transpose", ["w3"], ["wt"], perm=[1, 0]),
        helper.make_node("MatMul", ["flat", "wt"], ["h"]),
        helper.make_node("Add", ["h", "ext"], ["y"])], "folded",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])],
        [numpy_helper.from_array(np.array(0, np.int64), "zero"),
         numpy_helper.from_array(np.array([0], np.int64), "axes"),
         numpy_helper.from_array(np.array([-1], np.int64), "minus"),
         numpy_helper.from_array(np.array([5, 6], np.int64), "wshape"), tensor("ext", (5,))])
    onnx.external_data_helper.set_external_data(folded.initializer[-1], "ext.bin", 0, 20)
    folded.initializer[-1].ClearField("raw_data")
    opsets = [helper.make_opsetid("", 13)]
    return {name: helper.make_model(graph, opset_imports=opsets).SerializeToString()
            for name, graph in (("conv", conv), ("folded", folded))}


_ONNX_FIELDS = st.sampled_from(["op_type", "attribute", "dims", "data_type", "raw_data",
                                "opset", "location", "input", "output"])
_NUMBERS = st.one_of(st.integers(-3, 8), st.sampled_from([0, -1, 2**31, 2**40, 2**62, -2**63]))
_ONNX_EDITS = st.lists(st.tuples(_ONNX_FIELDS, st.integers(0, 10**6), _NUMBERS), max_size=4)
_OPS = ["Relu", "Conv", "Reshape", "ConstantOfShape", "Gather", "Concat", "Gemm", "MaxPool",
        "Softmax", "Unsqueeze", "Squeeze", "Clip", "Transpose", "Add", "Hardmax", "Loop",
        "Flatten", "AveragePool", "BatchNormalization", "Constant", "Cast", "Shape"]


def _mutate(model, field: str, at: int, number: int) -> None:
    """One structural edit: a node's operator, an attribute, an initializer's declared
    shape, type or bytes, the opset, an external location, a node's inputs or outputs."""
    graph, nodes = model.graph, model.graph.node
    node, tensor = nodes[at % len(nodes)], graph.initializer[at % len(graph.initializer)]
    if field == "op_type":
        node.op_type = _OPS[number % len(_OPS)]
    elif field == "attribute" and node.attribute:
        attribute = node.attribute[at % len(node.attribute)]
        if attribute.ints:
            attribute.ints[number % len(attribute.ints)] = number
        else:
            attribute.i = number
    elif field == "dims":
        tensor.dims.append(number) if not tensor.dims else tensor.dims.__setitem__(
            at % len(tensor.dims), number)
    elif field == "data_type":
        tensor.data_type = number % 20
    elif field == "raw_data":
        tensor.raw_data = tensor.raw_data[:max(number, 0)]
    elif field == "opset":
        model.opset_import[0].version = number
    elif field == "location":
        tensor.data_location = 1
        for key, value in (("location", ["../x.bin", "/etc/passwd", "ext.bin", "", "."]
                            [number % 5]), ("length", str(number))):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
    elif field in ("input", "output"):
        names = node.input if field == "input" else node.output
        if names:
            names[number % len(names)] = ["x", "w", "", "y", "missing"][at % 5]


def _import_onnx(onnx, folder, content: bytes) -> None:
    from hybridlab.config import Context
    from hybridlab.errors import OnnxImportError

    path = folder / "fuzzed.onnx"
    path.write_bytes(content)
    AUDIT.update(active=True, folder=str(folder), seen=[], thread=threading.get_ident())
    try:
        with Context(ONNX_MAX_BYTES=ONNX_LIMIT), _onnx_memory(len(content)):
            mx_onnx.import_to_gluon(str(path))
    except OnnxImportError:
        pass
    finally:
        AUDIT["active"] = False
    assert AUDIT["seen"] == [], AUDIT["seen"]


@contextlib.contextmanager
def _onnx_memory(size: int):
    from hybridlab.errors import OnnxImportError

    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    try:
        yield
    except OnnxImportError:
        TALLY["onnx import: documented error"] += 1
        raise
    except Exception:
        TALLY["onnx import: UNDOCUMENTED exception"] += 1
        raise
    else:
        TALLY["onnx import: loaded"] += 1
    finally:
        peak = tracemalloc.get_traced_memory()[1] - base
        if started:
            tracemalloc.stop()
        TALLY["onnx import: examples"] += 1
        if peak > 3 * ONNX_LIMIT + 4 * size + 64 * MIB:
            TALLY["onnx import: OVER the memory bound"] += 1
            raise AssertionError(f"an ONNX import peaked at {peak} bytes")


mx_onnx = None  # hybridlab.onnx, set by the fixture (onnx is an optional extra)


@pytest.fixture(scope="module")
def onnx_seeds(tmp_path_factory):
    global mx_onnx
    onnx = pytest.importorskip("onnx")
    import sys

    from hybridlab import onnx as hybridlab_onnx

    mx_onnx = hybridlab_onnx
    seeds = _onnx_seeds(onnx)
    warm = tmp_path_factory.mktemp("warm")
    (warm / "ext.bin").write_bytes(np.ones(5, np.float32).tobytes())
    for content in seeds.values():  # every lazy import done before the audit starts
        (warm / "fuzzed.onnx").write_bytes(content)
        mx_onnx.import_to_gluon(str(warm / "fuzzed.onnx"))
    if _audit not in getattr(sys, "_hybridlab_audit_hooks", ()):
        sys.addaudithook(_audit)
        sys._hybridlab_audit_hooks = (_audit,)
    return onnx, seeds


def _example_folder(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    (folder / "ext.bin").write_bytes(np.ones(5, np.float32).tobytes())
    return folder


ONNX_TIMEOUT = pytest.mark.timeout(max(300, EXAMPLES // 5))  # ~40 ms an import when loaded


@ONNX_TIMEOUT
@FUZZ
@given(st.sampled_from(["conv", "folded"]), _ONNX_EDITS)
def test_structurally_mutated_onnx_models_import_or_raise_onnx_import_error(
        tmp_path, onnx_seeds, seed, edits):
    onnx, seeds = onnx_seeds
    model = onnx.load_model_from_string(seeds[seed])
    for field, at, number in edits:
        _mutate(model, field, at, number)
    _import_onnx(onnx, _example_folder(tmp_path), model.SerializeToString())


@ONNX_TIMEOUT
@FUZZ
@given(st.sampled_from(["conv", "folded"]), _EDITS, st.one_of(st.none(), st.integers(0, 3000)))
def test_byte_mutated_onnx_files_import_or_raise_onnx_import_error(tmp_path, onnx_seeds, seed,
                                                                    edits, cut):
    onnx, seeds = onnx_seeds
    _import_onnx(onnx, _example_folder(tmp_path), _edit(seeds[seed], edits, cut))


def test_the_onnx_audit_sees_code_run_and_files_opened_elsewhere(tmp_path):
    import sys

    if _audit not in getattr(sys, "_hybridlab_audit_hooks", ()):
        sys.addaudithook(_audit)
        sys._hybridlab_audit_hooks = (_audit,)
    AUDIT.update(active=True, folder=str(tmp_path), seen=[], thread=threading.get_ident())
    try:
        exec("1 + 1")
        open(__file__, "rb").close()
        (tmp_path / "inside").write_bytes(b"")
        elsewhere = threading.Thread(target=lambda: open(__file__, "rb").close(),
                                     name="not-the-import")
        elsewhere.start()
        elsewhere.join()
    finally:
        AUDIT["active"] = False
    assert [event for event, _ in AUDIT["seen"]] == ["compile", "exec", "open"]
