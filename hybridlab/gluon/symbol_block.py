"""SymbolBlock: a block made from a saved graph instead of Python code.

What this module teaches
------------------------
``export()`` writes a hybridized block's graph (JSON) and its parameters; nothing of the
Python class is saved. :meth:`SymbolBlock.imports` is the other half: it loads the
graph (validated against the operator registry, never executed), turns every graph
input that is not data into a Parameter of the same name, and runs the graph through
the same CachedOp machinery as a hybridized block. Because there is no
``hybrid_forward``, a SymbolBlock is always "hybridized".

Invariants: parameter names are the graph's variable names (``dense0_weight``); keys
of an exported parameter file are ``arg:<name>`` and ``aux:<name>``; anything else in
the file is an error, so a file for another graph is not silently half-loaded.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from typing import Any

from hybridlab import autograd, model_files, ndarray, symbol
from hybridlab.errors import DeferredInitializationError
from hybridlab.gluon.block import HybridBlock, _Trace
from hybridlab.gluon.parameter import ParameterDict


class SymbolBlock(HybridBlock):
    """A block made from a Symbol graph: ``SymbolBlock(outputs, inputs, params=None)``.

    Every argument of the graph that is not an input becomes a Parameter with the same
    name (auxiliary states get ``grad_req='null'``). Those found in ``params`` are the
    very same objects, so the two blocks share values, updates and gradients; one not yet
    sized is sized from the graph on the first call. The graph is compiled on the first
    call, like a hybridized block; there is no Python ``hybrid_forward`` at all.
    """

    def __init__(self, outputs: Any, inputs: Any, params: ParameterDict | None = None) -> None:
        super().__init__(prefix="", params=None)
        self._params = ParameterDict("", params)  # get() finds the given Parameter objects
        self._outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
        graph = self._outputs[0] if len(self._outputs) == 1 else symbol.Group(self._outputs)
        inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        self._input_names = [i.name for i in inputs]
        _check_inputs(self._input_names, graph.list_inputs(), params, "the graph")
        aux, roles = set(graph.list_auxiliary_states()), _roles(graph)
        for name in graph.list_inputs():
            if name not in self._input_names:
                self.params.get(name, grad_req="null" if name in aux else "write",
                                differentiable=name not in aux,
                                init=_ROLE_INIT.get(roles.get(name, "")))
        # save_parameters keys: the graph's names less their common prefix (MXNet's), so
        # two SymbolBlocks cut from two instances of one network read each other's files
        names = list(self.params)
        cut = len(os.path.commonprefix(names)) if len(names) > 1 else 0
        self._reg_params = {name[cut:]: param for name, param in self.params.items()}
        self._graph, self._active = graph, True
        self._reset_cache()  # a SymbolBlock is always compiled: its one CachedOp
        # deviation from MXNet (README, "Compatibility"): its BatchNorm nodes do not move
        # their moving statistics while training; said once, on the first training call
        self._batchnorm_warning = any(
            n.op == "BatchNorm" and not n.attr_dict.get("use_global_stats")
            for n in graph.to_graph().nodes if n.kind == "call")

    def __call__(self, *args: Any) -> Any:
        if self._batchnorm_warning and autograd.is_training():
            self._batchnorm_warning = False
            warnings.warn("SymbolBlock: this graph's BatchNorm uses the batch's statistics "
                          "while training but does not move its moving_mean/moving_var (MXNet "
                          "would); train it as a gluon network, or use_global_stats=True",
                          stacklevel=2)
        return super().__call__(*args)

    @staticmethod
    def imports(symbol_file: str, input_names: Any, param_file: str | None = None,
                ctx: Any = None) -> SymbolBlock:
        """Load ``export()``'s files: validated JSON graph, pickle-free parameters."""
        names = [input_names] if isinstance(input_names, str) else list(input_names)
        graph = symbol.load(symbol_file)
        if param_file is not None:
            model_files.check_export_pair(symbol_file, param_file)
        saved: Any = {} if param_file is None else ndarray.load(param_file)
        stored = {key.partition(":")[2] for key in saved}
        _check_inputs(names, graph.list_inputs(), stored, symbol_file)
        block = SymbolBlock(graph, [symbol.var(n) for n in names])
        if param_file is not None:
            block._load_exported(param_file, saved)
        return block

    def _load_exported(self, param_file: str, saved: dict) -> None:
        declared = {n.name: dict(n.attrs).get("__shape__") for n in self._graph._variables()}
        for key, value in saved.items():
            kind, _, name = key.partition(":")
            if kind not in ("arg", "aux") or name not in self.params:
                raise ValueError(f"{param_file}: unexpected entry {key!r}; an exported "
                                 f"file has keys arg:<name> / aux:<name> of the graph")
            shape = declared.get(name)  # "(256, 0)": 0 is a size the graph leaves open
            if shape is not None:
                dims = tuple(int(d) for d in shape.strip().strip("()[]").replace(" ", "").split(",")
                             if d)
                if len(dims) != len(value.shape) or any(
                        d and d != v for d, v in zip(dims, value.shape)):
                    raise ValueError(f"{param_file}: {key!r} has shape {value.shape} but "
                                     f"the graph declares {dims} (0: any size); the files "
                                     f"come from different exports")
            self.params[name].set_data(value)
        missing = [name for name, param in self.params.items() if param._data is None]
        if missing:
            raise ValueError(f"{param_file} has no values for {missing}, which are neither "
                             f"inputs ({self._input_names}) nor saved parameters. Fix: load "
                             f"the .params file written by the same export(), or add them "
                             f"to input_names if they are data")

    def _trace(self, args: Any) -> _Trace:
        self._finish_deferred_init(*args)
        inputs = {node.name: node for node in self._graph.to_graph().inputs}
        data = [inputs[name] for name in self._input_names]
        return self._compile(self._outputs, data, [],  # several outputs: a list, as MXNet
                             [None] * len(self._outputs) if len(self._outputs) > 1 else None)

    def infer_shape(self, *args: Any) -> None:
        """Size deferred parameters (shared with a block not run yet) from the graph."""
        given = {name: arg._outputs[0].aval.shape if isinstance(arg, symbol.Symbol) else  # type: ignore[union-attr]  # (traced: known)
                 arg.shape for name, arg in zip(self._input_names, args)}
        arg_shapes, _, aux_shapes = self._graph.infer_shape_partial(**given)
        names = self._graph.list_arguments() + self._graph.list_auxiliary_states()
        for name, shape in zip(names, (arg_shapes or []) + (aux_shapes or [])):
            if name in self.params and shape:  # () is "not known" (MXNet's partial answer)
                self.params[name].shape = shape
        unknown = [p.name for p in self.params.values()
                   if p._deferred is not None and not p._shape_known()]
        if unknown:
            raise DeferredInitializationError(
                f"SymbolBlock: the shapes of {unknown} cannot be inferred from the graph. "
                f"Fix: run the block the graph came from once (net(x)) before calling this "
                f"one, or give those layers their input size (in_units=/in_channels=)")

    def _trace_call(self, *args: Any) -> Any:
        """Symbol inputs: substitute them for the graph's input variables (composition)."""
        from hybridlab.graph import ir, shapes
        if all(arg._outputs[0].aval is not None for arg in args):  # traced: shapes known
            self._finish_deferred_init(*args)
        given = {name: arg._outputs[0] for name, arg in zip(self._input_names, args)}

        def visit(node: Any, inputs: tuple) -> Any:
            if node.kind == "var" and node.name in given:
                return (given[node.name],)
            if node.kind == "var" and node.name in self.params:  # its shape, now known
                return self.params[node.name].var()._outputs
            fresh = ir.with_inputs(node, inputs)
            if fresh is not node and node.kind == "call" and all(
                    v.aval is not None for v in inputs):  # shapes for the layers after it
                fresh = dataclasses.replace(fresh, aval=shapes.infer_node(fresh))
            return fresh

        return symbol.Symbol(ir.rebuild(self._graph.to_graph(), visit).outputs)

    def hybridize(self, active: bool = True, **kwargs: Any) -> None:
        super().hybridize(True, **kwargs)  # a SymbolBlock has no imperative form


def _check_inputs(names: list[str], variables: list[str], params: Any, where: str) -> None:
    """Every input name must be a variable of the graph; suggest the ones with no value."""
    unknown = [name for name in names if name not in variables]
    if unknown:
        free = [v for v in variables if params is None or v not in params]
        raise ValueError(f"input name(s) {unknown} are not variables of {where}. Its variables "
                         f"that are not parameters are {free}: pass those as input_names "
                         f"(hybridized blocks name their inputs data, or data0, data1, ...)")


# What a parameter starts as when no file gives it, by the operator input it feeds (as
# MXNet's initializers did): a BatchNorm of a fresh network must not divide by sqrt(< 0).
_ROLE_INIT = {"bias": "zeros", "gamma": "ones", "beta": "zeros", "moving_mean": "zeros",
              "moving_var": "ones"}


def _roles(graph: Any) -> dict[str, str]:
    """``{variable name: the operator input it feeds}`` (``bn_gamma`` -> ``gamma``)."""
    roles: dict[str, str] = {}
    for node in graph.to_graph().nodes:
        if node.kind == "call":
            names = node.opdef.input_names(node.attr_dict)
            roles.update((v.node.name, role) for v, role in zip(node.inputs, names)
                         if v.node.kind == "var" and not role.startswith("*"))
    return roles



