"""The Executor: a bound graph, run forward and backward (MXNet's ``Symbol.bind``).

What this module teaches
------------------------
``sym.bind(ctx, args)`` pairs a graph with the arrays it will run on: the arguments, the
auxiliary states, and (for training) arrays to receive gradients. ``forward`` runs the
graph as one compiled :class:`~hybridlab.graph.cached_op.CachedOp` -- the same compiler a
hybridized Gluon block uses -- and ``backward`` runs its compiled gradient. This is the
symbolic half of MXNet 1.x as its users trained with it (``mx.mod.Module`` binds one per
batch shape), and ``Symbol`` builds the graph an Executor runs.

The Executor works on a :class:`~hybridlab.graph.ir.Graph` and sits below ``symbol``:
where MXNet hands a Symbol back (``get_optimized_symbol``) it asks the installed front end
(``graph.frontend``), as the compiler's gradient rules do. Names (``list_arguments``
order, auxiliary states, output names) are MXNet's, from :mod:`hybridlab.model_files`.
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from hybridlab import autograd, config, errors, model_files, ndarray
from hybridlab.graph import frontend, ir, shapes
from hybridlab.graph.ir import Graph, Value


class Executor:
    """A bound symbol: its arrays, and ``forward`` / ``backward`` over them (MXNet's API).

    ``forward`` runs one compiled :class:`~hybridlab.graph.cached_op.CachedOp`; with
    ``is_train=True`` it runs under ``autograd.record()``, so the CachedOp records one tape
    node whose backward is the compiled backward graph, and ``backward`` is just
    ``autograd.backward`` on the outputs. ``outputs`` holds one array per output from the
    moment of ``bind`` (zeros until the first ``forward``), as MXNet's executor does.
    ``grad_req`` is one string, a list in ``list_arguments`` order, or a dict by name;
    with ``'add'`` the gradient accumulates onto what the ``args_grad`` arrays held.
    """

    def __init__(self, graph: Graph, args: Any, args_grad: Any, grad_req: Any,
                 aux_states: Any, ctx: Any = None) -> None:
        from hybridlab.graph.cached_op import CachedOp
        model_files.check_unique_names(graph.inputs, "bind")
        self._cse = config.eliminate_common_expr()
        disabled = () if self._cse else ("eliminate_common_subexpressions",)
        self._graph, self._ctx = graph, ctx
        self._names = model_files.names(graph)
        self._program = CachedOp(graph, disabled_passes=disabled)
        names = self._names.arguments
        self.arg_dict = _array_dict(names, args, "args")
        self.aux_dict = _array_dict(self._names.auxiliary, aux_states, "aux_states")
        self._grad_req = grad_reqs(names, grad_req)
        given = _array_dict(names, args_grad, "args_grad", partial=True) if args_grad else {}
        for name in names:  # a caller's array accumulates itself (see backward)
            if self._grad_req[name] != "null":
                self.arg_dict[name].attach_grad("write" if name in given
                                                else self._grad_req[name])
        self.grad_dict = {n: given.get(n, self.arg_dict[n].grad) for n in names
                          if self._grad_req[n] != "null"}
        _refuse_missing_gradients(graph, {**self.arg_dict, **self.aux_dict},
                                  set(self.grad_dict))
        self.outputs: list[Any] = self._blank_outputs()

    def _blank_outputs(self) -> list[Any]:
        feed = {**self.arg_dict, **self.aux_dict}
        known = shapes.infer_partial(self._graph, {k: v.shape for k, v in feed.items()},
                                     {k: np.dtype(v.dtype) for k, v in feed.items()})
        avals = [known.aval(v) for v in self._graph.outputs]
        if not all(known.complete(v) for v in self._graph.outputs):
            return [None] * len(avals)
        return [ndarray.from_numpy(np.zeros(a.shape, a.dtype)) for a in avals]  # type: ignore[union-attr]

    def debug_str(self) -> str:
        """The bound program and its memory, in MXNet's form: the compiled graph (one
        forward, and with gradients the backward joined to it), its memory plan, and
        ``Total N MB allocated``: the plan's peak less the gradient arrays, which bind
        made outside the program (MXNet's count leaves them out too)."""
        from hybridlab.graph import autodiff
        from hybridlab.graph.passes import PassContext, run_pipeline
        feed = {**self.arg_dict, **self.aux_dict}
        graph = shapes.infer_graph(self._graph, {n: a._aval for n, a in feed.items()})
        if self.grad_dict:
            graph = autodiff.gradient_graph(graph)
        compiled, _ = run_pipeline(graph, self._program.disabled,
                                   context=PassContext(training=bool(self.grad_dict)))
        plan = compiled.meta["memory"]
        grads = builtins.sum(g.size * np.dtype(g.dtype).itemsize
                             for g in self.grad_dict.values())
        total = builtins.max(plan.planned - grads, 0)
        return (f"{ir.format_graph(compiled)}\n{plan}\nof which {grads >> 20} MB are the bound "
                f"gradient arrays\nTotal {total >> 20} MB allocated")

    def get_optimized_symbol(self) -> Any:
        """The bound graph after common-subexpression elimination (unless bound with
        ``MXNET_ELIMINATE_COMMON_EXPR=0``), as a Symbol. An output that is the same value
        as an earlier output gets a ``_copy`` of its own, as MXNet's executor keeps its
        outputs apart."""
        from hybridlab.graph.passes import PREDICTION, eliminate_common_subexpressions
        graph = self._graph
        if self._cse:
            graph = eliminate_common_subexpressions(graph, PREDICTION).graph
        outputs: list[Value] = []
        for value in graph.outputs:
            repeated = any(v.node is value.node and v.index == value.index for v in outputs)
            outputs.append(ir.call("_copy", [value], name=f"{value.node.name}_copy").out()
                           if repeated else value)
        return frontend.current().symbol(outputs)

    @property
    def arg_arrays(self) -> list[Any]:
        return [self.arg_dict[n] for n in self._names.arguments]

    @property
    def grad_arrays(self) -> list[Any]:
        return [self.grad_dict.get(n) for n in self._names.arguments]

    @property
    def aux_arrays(self) -> list[Any]:
        return [self.aux_dict[n] for n in self._names.auxiliary]

    @property
    def output_dict(self) -> dict[str, Any]:
        return dict(zip(self._names.outputs, self.outputs))

    def copy_params_from(self, arg_params: dict[str, Any], aux_params: dict[str, Any] | None = None,
                         allow_extra_params: bool = False) -> None:
        """Copy arrays by name into the bound arguments and auxiliary states."""
        for given, bound in ((arg_params, self.arg_dict), (aux_params or {}, self.aux_dict)):
            for name, value in given.items():
                if name in bound:
                    _to_ndarray(value).copyto(bound[name])
                elif not allow_extra_params:
                    raise ValueError(f"copy_params_from: {name!r} is not bound here; "
                                     f"pass allow_extra_params=True to skip it")

    def forward(self, is_train: bool = False, **kwargs: Any) -> list[Any]:
        """Copy arguments given by name into the bound arrays, run once, return ``outputs``."""
        for key, value in kwargs.items():
            if key not in self.arg_dict:
                raise ValueError(f"forward: {key!r} is not an argument "
                                 f"{self._names.arguments}")
            _to_ndarray(value).copyto(self.arg_dict[key])
        feed = {**self.arg_dict, **self.aux_dict}
        # recorded whenever there are gradients to give: MXNet's executor can run backward
        # after forward(is_train=False) too (dropout off, the same gradient rules)
        recorded = is_train or bool(self.grad_dict)
        scope = autograd.record(train_mode=is_train) if recorded else autograd.predict_mode()
        with scope:
            results = self._program(*[feed[n] for n in self._names.inputs])
        self._results = list(results) if isinstance(results, (list, tuple)) else [results]
        self._recorded = recorded
        # as MXNet's executor: the arrays of ``outputs`` are written in place (code may hold
        # them from before the forward); the fresh results stay the heads of backward
        self.outputs = [result if held is None or held.shape != result.shape
                        or held.dtype != result.dtype else result.copyto(held)
                        for held, result in zip(self.outputs, self._results)]
        monitor, monitor_all = getattr(self, "_monitor", (None, False))
        if monitor is not None:
            seen = [*feed.items()] if monitor_all else []
            for name, array in seen + list(zip(self._names.outputs, self.outputs)):
                monitor(name, array)
        return self.outputs

    def reshape(self, partial_shaping: bool = False, allow_up_sizing: bool = False,
                **new_shapes: Any) -> Executor:
        """The same graph bound to arguments of new shapes (MXNet's ``Executor.reshape``):
        arrays whose shape is unchanged (the weights) are shared; a smaller array is the
        first rows of the old one (a view: writes reach it), and so are the outputs; a
        larger one is new, and only with ``allow_up_sizing=True``."""
        feed = {**self.arg_dict, **self.aux_dict}
        given = {k: tuple(v.shape) for k, v in feed.items() if k not in new_shapes}
        given.update({k: tuple(v) for k, v in new_shapes.items()})
        known = shapes.infer_partial(self._graph, given,
                                     {k: np.dtype(v.dtype) for k, v in feed.items()})
        sized = {v.node.name: known.aval(v).shape for v in  # type: ignore[union-attr]
                 (n.out() for n in self._graph.inputs)}

        def resized(name: str, array: Any) -> Any:
            return _resized(array, sized[name], name, allow_up_sizing)
        args = {n: resized(n, a) for n, a in self.arg_dict.items()}
        grads = {n: resized(n, g) for n, g in self.grad_dict.items()
                 if g is not self.arg_dict[n].grad}
        aux = {n: resized(n, a) for n, a in self.aux_dict.items()}
        new = Executor(self._graph, args, grads, self._grad_req, aux, self._ctx)
        new.outputs = [_rows_of(old, fresh) for old, fresh in zip(self.outputs, new.outputs)]
        return new

    def set_monitor_callback(self, callback: Any, monitor_all: bool = False) -> None:
        """Call ``callback(name, array)`` after each ``forward`` for every output (and, with
        ``monitor_all``, every input first). The graph runs as one compiled program, so
        its internal values are not kept to be shown (MXNet's monitor also saw those)."""
        self._monitor = (callback, monitor_all)

    def backward(self, out_grads: Any = None, is_train: bool = True) -> None:
        """Gradients of the outputs (weighted by ``out_grads``, taken in each output's
        dtype as MXNet does: a float gradient into an int32 output is truncated) into
        ``grad_dict``."""
        if not getattr(self, "_recorded", False):
            raise RuntimeError("backward() needs forward() first, bound with gradients "
                               "(args_grad, or simple_bind with a grad_req other than 'null')")
        if not self.grad_dict:  # every grad_req 'null': nothing to compute (as MXNet)
            return
        # an output of an operator with no gradient (argmax, topk's indices) passes none,
        # whatever its head gradient says, so MXNet never reads it: neither is it checked
        zero = [v.node.kind == "call" and v.node.opdef.grad is None
                and not v.node.opdef.grad_missing for v in self._graph.outputs]
        heads = None if out_grads is None else [
            None if dead else _to_ndarray(g).astype(out.dtype, copy=False) for g, out, dead in
            zip(out_grads if isinstance(out_grads, (list, tuple)) else [out_grads],
                self._results, zero)]
        autograd.backward(self._results, heads)
        for name, target in self.grad_dict.items():
            fresh = self.arg_dict[name].grad
            if target is fresh:
                continue
            if self._grad_req[name] == "add":  # onto what the array holds now (MXNet code
                target += fresh  # writes grad_dict['x'][:] = ... between bind and backward)
            else:
                fresh.copyto(target)


def _refuse_missing_gradients(graph: Graph, arrays: dict[str, Any], wanted: set[str]) -> None:
    """At bind, as MXNet: a gradient that would have to go through an operator with none
    (``OpDef.grad_missing``) is refused now, not at the first backward. The gradient
    graph is built once here for that (``BlockGrad`` cuts a path, as in MXNet)."""
    from hybridlab.graph import autodiff
    if not wanted:
        return
    graph = shapes.infer_graph(graph, {n: a._aval for n, a in arrays.items()})
    try:
        autodiff.gradient_graph(graph)
    except errors.GraphError as err:
        raise errors.MissingGradientError(
            f"bind: gradients of {sorted(wanted)} were asked for, but {err}. Bind those "
            f"arguments with grad_req='null', or cut the path with BlockGrad") from None


def grad_reqs(names: list[str], grad_req: Any) -> dict[str, str]:
    """One grad_req per argument from a string, a list (argument order) or a dict."""
    if isinstance(grad_req, str):
        reqs = dict.fromkeys(names, grad_req)
    elif isinstance(grad_req, dict):
        reqs = {n: grad_req.get(n, "null") for n in names}
    else:
        reqs = dict(zip(names, grad_req))
    for name, req in reqs.items():
        if req not in ("write", "add", "null", "inplace"):
            raise ValueError(f"bind: grad_req for {name!r} is {req!r}; use 'write', 'add' "
                             f"or 'null'")
    return {n: "write" if r == "inplace" else r for n, r in reqs.items()}


def _array_dict(names: list[str], given: Any, what: str, partial: bool = False
                ) -> dict[str, Any]:
    if given is None:
        given = {}
    if not isinstance(given, dict):
        given = dict(zip(names, given))
    given = {k: v for k, v in given.items() if v is not None}  # MXNet skips {'b': None}
    missing = [n for n in names if n not in given]  # (and ignores names not in the graph)
    if missing and not partial:
        unknown = sorted(set(given) - set(names))
        raise ValueError(f"bind: {what} must give every one of {names}; missing {missing}"
                         + (f" (given but not in the graph: {unknown})" if unknown else ""))
    return {n: _to_ndarray(given[n]) for n in names if n in given}


def _resized(array: Any, shape: tuple[int, ...], name: str, allow_up_sizing: bool) -> Any:
    """``array`` for ``shape``: itself, its first rows (a view), or a new array."""
    if tuple(array.shape) == tuple(shape):
        return array
    if int(np.prod(shape)) > array.size and not allow_up_sizing:
        raise ValueError(f"reshape: {name!r} grows from {array.shape} to {shape}; a larger "
                         f"array cannot share the old one's memory. Fix: "
                         f"reshape(allow_up_sizing=True, ...)")
    return _rows_of(array, ndarray.zeros(shape, dtype=array.dtype))


def _rows_of(old: Any, fresh: Any) -> Any:
    """``old``'s first rows when ``fresh`` is that (MXNet shares the memory), else
    ``fresh``."""
    if old is None or fresh is None or tuple(fresh.shape[1:]) != tuple(old.shape[1:]) or \
            fresh.shape[0] > old.shape[0]:
        return fresh
    return old[0:fresh.shape[0]]


def _to_ndarray(value: Any) -> Any:
    return value if isinstance(value, ndarray.NDArray) else ndarray.array(value)
