"""ONNX both ways, as MXNet 1.9 spelled it: ``mx.onnx.export_model`` (``export``) and
``mx.contrib.onnx.import_model`` / ``import_to_gluon`` / ``get_model_metadata``
(``importer``). The ``onnx`` package is an optional extra, imported inside functions only.
"""

from hybridlab.onnx.export import ONNX_OPS, OPSET, export_model
from hybridlab.onnx.importer import (
    CONSTANT_RULES,
    IMPORTERS,
    get_model_metadata,
    import_model,
    import_to_gluon,
)

__all__ = ["CONSTANT_RULES", "IMPORTERS", "ONNX_OPS", "OPSET", "export_model",
           "get_model_metadata", "import_model", "import_to_gluon"]
