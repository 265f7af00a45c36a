"""Reading an ONNX file as safely as hybridlab reads its own: bounded, inert, beside itself.

What this module keeps true
---------------------------
``onnx/importer.py`` turns a model into a Symbol; this module hands it the model's parts
and holds the promises every hybridlab loader makes (DESIGN.md, "Safe files"):

* **Nothing runs.** The file is protobuf, parsed by ``onnx``; tensors are decoded as
  numbers, never unpickled; a string tensor is refused (hybridlab's arrays are numeric).
* **Memory is priced before it is spent.** :class:`Budget` adds up what an import will
  hold -- the file itself, every initializer and tensor attribute at its *declared* shape
  and type, every constant the importer folds at its computed shape -- and refuses, naming
  the tensor or node, before the total passes ``HYBRIDLAB_ONNX_MAX_BYTES``
  (``config.py``; default 1 GiB: the light models expand from a few KB to ~550 MiB, VGG-19
  the most). A tensor whose stored bytes do not match its declared shape is refused.
* **External data only beside the model.** A large model keeps tensors in other files
  (``location``, ``offset``, ``length``). They are read only from the model's own folder
  (no absolute path, no ``..``, no link leading out), only from regular files, and only
  the bytes the tensor declares. A ``ModelProto`` passed in memory has no folder: its
  external tensors are refused (pass the file's path instead), never resolved against
  the current directory.
* **Every failure is an** :class:`~hybridlab.errors.OnnxImportError` saying what and
  where; the importer adds the node.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from hybridlab import config
from hybridlab.errors import OnnxImportError
from hybridlab.ndarray_io import open_regular_file

MAX_NODES = 100_000  # nodes in one graph (the symbol JSON's limit too)
MAX_NDIM = 32  # MXNet's limit on dimensions
# The tensor types hybridlab's arrays hold (onnx.TensorProto.DataType numbers), as numpy.
DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32,
          7: np.int64, 9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32,
          13: np.uint64}


class Budget:
    """The bytes an import holds so far, and the limit it may not pass."""

    def __init__(self) -> None:
        self.limit: int = config.flag("ONNX_MAX_BYTES")
        self.used = 0

    def charge(self, nbytes: int, what: str) -> None:
        """Count ``nbytes`` more for ``what``; refuse (before they are allocated) when the
        total would pass the limit."""
        if self.used + nbytes > self.limit:
            raise OnnxImportError(
                f"{what} needs {nbytes:,} bytes, and the import would then hold "
                f"{self.used + nbytes:,}, more than HYBRIDLAB_ONNX_MAX_BYTES = "
                f"{self.limit:,}. Fix: if you trust this model's size, raise the limit "
                f"(hybridlab.config.Context(ONNX_MAX_BYTES=...) or the environment variable)")
        self.used += nbytes


def load_model(model_file: Any, budget: Budget) -> tuple[Any, str | None]:
    """``(ModelProto, the folder its external data may come from)``: a path is parsed
    (its size charged first), a ``ModelProto`` is taken as given (no folder)."""
    import onnx

    if hasattr(model_file, "graph"):
        return model_file, None
    path = os.fspath(model_file)
    with open_regular_file(path, OnnxImportError) as file:
        budget.charge(os.fstat(file.fileno()).st_size, f"{path}: the file")
        data = file.read()
    try:
        model = onnx.load_model_from_string(data)
    except Exception as err:
        raise OnnxImportError(f"{path}: not an ONNX model ({type(err).__name__}: "
                              f"{err})") from None
    return model, os.path.dirname(os.path.abspath(path))


def check_graph(model: Any) -> int:
    """The model's opset for the default domain, after checking it is one ONNX defines
    and the graph is of a size hybridlab reads."""
    import onnx

    if not model.HasField("graph"):
        raise OnnxImportError("the ONNX model has no graph")
    if len(model.graph.node) > MAX_NODES:
        raise OnnxImportError(f"the ONNX graph has {len(model.graph.node):,} nodes; "
                              f"hybridlab reads at most {MAX_NODES:,}")
    versions = [entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx")]
    if not versions:
        raise OnnxImportError("the ONNX model imports no opset of the default domain "
                              "(opset_import); a valid model names the one it was written for")
    newest = onnx.defs.onnx_opset_version()
    if not 1 <= versions[0] <= newest:
        raise OnnxImportError(f"opset {versions[0]} is not an ONNX opset: they run from 1 to "
                              f"{newest} (this onnx {onnx.__version__}); the file is damaged "
                              f"or from a newer ONNX")
    return versions[0]


def tensor_values(tensor: Any, folder: str | None, budget: Budget, what: str) -> np.ndarray:
    """A TensorProto's values, its declared size charged and checked before decoding."""
    from onnx import TensorProto, numpy_helper

    dtype = DTYPES.get(tensor.data_type)
    if dtype is None:
        name = TensorProto.DataType.Name(tensor.data_type) if tensor.data_type in \
            TensorProto.DataType.values() else f"number {tensor.data_type}"
        raise OnnxImportError(f"{what} has type {name}, which hybridlab's arrays cannot "
                              f"hold (numbers and bools only)")
    shape = tuple(tensor.dims)
    if len(shape) > MAX_NDIM or any(size < 0 for size in shape):
        raise OnnxImportError(f"{what} declares the shape {list(shape)[:40]}: sizes must be "
                              f">= 0 and at most {MAX_NDIM} of them")
    nbytes = math.prod(shape) * np.dtype(dtype).itemsize
    budget.charge(nbytes, what)
    if tensor.data_location == TensorProto.EXTERNAL:
        tensor = _with_external_data(tensor, folder, nbytes, what)
    elif tensor.HasField("raw_data") and len(tensor.raw_data) != nbytes:
        raise OnnxImportError(f"{what} holds {len(tensor.raw_data):,} bytes, but its shape "
                              f"{list(shape)} and type need {nbytes:,}; the file is damaged")
    values = numpy_helper.to_array(tensor)
    if values.shape != shape or values.dtype != dtype:
        raise OnnxImportError(f"{what} decodes to {values.dtype}{list(values.shape)}, not "
                              f"the declared {np.dtype(dtype)}{list(shape)}")
    return values


def _with_external_data(tensor: Any, folder: str | None, nbytes: int, what: str) -> Any:
    """A copy of ``tensor`` holding its external bytes, read from beside the model."""
    entries = {entry.key: entry.value for entry in tensor.external_data}
    if folder is None:
        raise OnnxImportError(f"{what} keeps its data in the file {entries.get('location')!r} "
                              f"beside the model, and a model passed in memory has no "
                              f"folder; pass the .onnx file's path instead")
    path = _beside(folder, entries.get("location", ""), what)
    try:
        offset, length = int(entries.get("offset", 0)), int(entries.get("length", nbytes))
    except ValueError:
        raise OnnxImportError(f"{what}: its external offset and length must be whole "
                              f"numbers, got {entries}") from None
    if length != nbytes or offset < 0:
        raise OnnxImportError(f"{what}: its external data is {length:,} bytes at offset "
                              f"{offset:,}; its shape and type need {nbytes:,}")
    with open_regular_file(path, OnnxImportError) as file:
        if offset + length > os.fstat(file.fileno()).st_size:
            raise OnnxImportError(f"{what}: {path} is shorter than its offset + length "
                                  f"({offset + length:,} bytes)")
        file.seek(offset)
        data = file.read(length)
    copy = type(tensor)()
    copy.CopyFrom(tensor)
    copy.data_location, copy.raw_data = 0, data
    del copy.external_data[:]
    return copy


def _beside(folder: str, location: str, what: str) -> str:
    """The external file ``location`` names, which must lie inside ``folder``."""
    parts = location.replace("\\", "/").split("/")
    if not location or os.path.isabs(location) or ".." in parts or "\x00" in location:
        raise OnnxImportError(f"{what}: its external data location {location!r} is not a "
                              f"file name beside the model (no absolute path, no '..')")
    real_folder = os.path.realpath(folder)
    path = os.path.realpath(os.path.join(real_folder, *parts))
    if os.path.commonpath([real_folder, path]) != real_folder:
        raise OnnxImportError(f"{what}: its external data {location!r} leads out of the "
                              f"model's folder {folder} (through a link)")
    return path
