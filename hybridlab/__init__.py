"""hybridlab: a compact imperative/symbolic deep-learning engine on numpy, for teaching.

``import hybridlab as mx`` gives the MXNet-1.x-Gluon-compatible names. This module only
collects public names; every module it imports is light (numpy only).
"""

# Every module below is light (numpy only); viz loads its drawing libraries on first use.
# __init__ files re-export names, so ruff's F401 is off for them (pyproject.toml).
from hybridlab import (
    attribute,
    autograd,
    base,
    config,
    context,
    contrib,
    engine,
    errors,
    gluon,
    initializer,
    io,
    kvstore,
    lr_scheduler,
    metric,
    module,
    name,
    ndarray,
    onnx,
    operator,
    ops,
    optimizer,
    profiler,
    random,
    recordio,
    runtime,
    symbol,
    util,
    viz,
)
from hybridlab import initializer as init  # mx.init.Xavier()
from hybridlab import kvstore as kv  # mx.kv.create('device')
from hybridlab import module as mod  # mx.mod.Module
from hybridlab import module as model  # mx.model.save_checkpoint / load_checkpoint
from hybridlab import ndarray as nd  # mx.nd, `from hybridlab import nd`
from hybridlab import symbol as sym  # mx.sym, `from hybridlab import sym`
from hybridlab.attribute import AttrScope  # mx.AttrScope
from hybridlab.base import __version__  # tests/test_setup.py checks it against pyproject
from hybridlab.context import Context, cpu, current_context, gpu
from hybridlab.errors import MXNetError  # mx.MXNetError, as MXNet's top level
from hybridlab.util import np_shape

# MXNet 1.9 read ONNX through ``mx.contrib.onnx``; hybridlab's importer lives beside the
# exporter in ``hybridlab.onnx`` (above gluon: it builds SymbolBlocks), so the package root
# -- above every layer -- hands it to ``contrib`` (ARCHITECTURE.md, "Layers").
contrib.onnx = onnx  # type: ignore[attr-defined]


def _symbol_cached_op() -> type:
    from hybridlab.graph.cached_op import SymbolCachedOp  # (on first use: import time)
    return SymbolCachedOp


nd._LATE_NAMES["CachedOp"] = _symbol_cached_op  # mx.nd.CachedOp, MXNet's name for it
