"""``mx.mod``: MXNet 1.x's symbolic training loop, ``Module`` and ``BucketingModule``.

What this module teaches
------------------------
Before Gluon, an MXNet user *declared* a network as a Symbol, then trained it with a
Module. The Module is the symbolic program's life cycle spelled out in steps:

1. ``bind(data_shapes, label_shapes)``: the shapes of one batch are fixed, every other
   shape is inferred from them, and the arrays are allocated -- an Executor holds the
   arguments, their gradients and the auxiliary states (``Symbol.simple_bind``);
2. ``init_params(initializer)``: weights get their first values (by name: biases and
   BatchNorm's beta start at zero, gamma at one; a variable's ``init`` attribute wins);
3. ``init_optimizer(optimizer)``: one optimizer state per weight (``mx.optimizer``);
4. per batch: ``forward(batch)``, ``backward()``, ``update()`` and ``update_metric``.

``fit`` runs the four steps for you; ``score`` and ``predict`` run forward only.
Everything happens on the arrays bound in step 1 -- the seeds' "symbolic programming":
the program is compiled once, then fed (the executor's compiled program,
hybridlab/graph/cached_op.py).

:class:`BucketingModule` trains on sequences of varying length: a symbol per *bucket
key* (a length), made by ``sym_gen(key)``, each bound once and all sharing one set of
parameters -- one compiled program per length, instead of padding every sequence to the
longest.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Iterable

import numpy as np

from hybridlab import context as _context
from hybridlab import initializer as _init
from hybridlab import io as _io
from hybridlab import metric as _metric
from hybridlab import model_files, symbol
from hybridlab import ndarray as nd
from hybridlab import optimizer as opt

_ZERO_SUFFIXES = ("bias", "beta", "moving_mean", "running_mean", "moving_avg")
_ONE_SUFFIXES = ("gamma", "moving_var", "running_var", "moving_inv_var")


def initial_value(initializer: Any, name: str, shape: tuple, dtype: Any,
                  attrs: dict[str, str]) -> Any:
    """A parameter's first value, chosen as MXNet's Module chooses it: the variable's own
    ``__init__`` attribute first, then by name (biases and betas 0; gammas and running
    variances 1), then ``initializer``."""
    if "__init__" in attrs:
        return _init.run(_init.create_from_config(attrs["__init__"]), name, shape, dtype)
    if name.endswith(_ZERO_SUFFIXES):
        return nd.zeros(shape, dtype=dtype)
    if name.endswith(_ONE_SUFFIXES):
        return nd.ones(shape, dtype=dtype)
    return _init.run(initializer, name, shape, dtype)


def _descs(shapes: Any) -> list[_io.DataDesc]:
    """``[('data', (10, 3))]`` or DataDescs as DataDescs."""
    return [s if isinstance(s, _io.DataDesc) else _io.DataDesc(*s) for s in shapes or []]


class BaseModule:
    """The training loop every module shares: ``fit``, ``score``, ``predict``."""

    def __init__(self, logger: Any = logging) -> None:
        self.logger = logger
        self.binded = self.for_training = self.inputs_need_grad = False
        self.params_initialized = self.optimizer_initialized = False

    # -- what each module defines (Module: one executor; BucketingModule: one per key) ----

    @property
    def symbol(self) -> Any:
        raise NotImplementedError

    @property
    def data_shapes(self) -> list[_io.DataDesc]:
        raise NotImplementedError

    def bind(self, data_shapes: Any, label_shapes: Any = None, for_training: bool = True,
             inputs_need_grad: bool = False, force_rebind: bool = False,
             shared_module: Any = None, grad_req: Any = "write") -> None:
        raise NotImplementedError

    def init_params(self, initializer: Any = None, arg_params: Any = None,
                    aux_params: Any = None, allow_missing: bool = False,
                    force_init: bool = False, allow_extra: bool = False) -> None:
        raise NotImplementedError

    def init_optimizer(self, kvstore: Any = "local", optimizer: Any = "sgd",
                       optimizer_params: Any = (("learning_rate", 0.01),),
                       force_init: bool = False) -> None:
        raise NotImplementedError

    def get_params(self) -> tuple[dict, dict]:
        raise NotImplementedError

    def set_params(self, arg_params: dict, aux_params: dict | None = None,
                   allow_missing: bool = False, force_init: bool = True,
                   allow_extra: bool = False) -> None:
        raise NotImplementedError

    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        raise NotImplementedError

    def backward(self, out_grads: Any = None) -> None:
        raise NotImplementedError

    def update(self) -> None:
        raise NotImplementedError

    def get_outputs(self, merge_multi_context: bool = True) -> list:
        raise NotImplementedError

    def update_metric(self, eval_metric: Any, labels: Any, pre_sliced: bool = False) -> None:
        raise NotImplementedError

    # -- the loops ---------------------------------------------------------------------

    def forward_backward(self, data_batch: _io.DataBatch) -> None:
        self.forward(data_batch, is_train=True)
        self.backward()

    def score(self, eval_data: Any, eval_metric: Any, num_batch: int | None = None,
              batch_end_callback: Any = None, score_end_callback: Any = None,
              reset: bool = True, epoch: int = 0, sparse_row_id_fn: Any = None) -> list:
        """The metric over ``eval_data`` (forward only): ``[(name, value)]``."""
        if not (self.binded and self.params_initialized):
            raise RuntimeError("score: bind() and init_params() first (or fit())")
        if reset:
            eval_data.reset()
        eval_metric = _metric.create(eval_metric)
        eval_metric.reset()
        for count, batch in enumerate(eval_data):
            if num_batch is not None and count == num_batch:
                break
            self.forward(batch, is_train=False)
            self.update_metric(eval_metric, batch.label)
            _call(batch_end_callback, epoch=epoch, nbatch=count, eval_metric=eval_metric)
        _call(score_end_callback, epoch=epoch, nbatch=0, eval_metric=eval_metric)
        return eval_metric.get_name_value()

    def iter_predict(self, eval_data: Any, num_batch: int | None = None,
                     reset: bool = True) -> Iterable:
        """``(outputs, batch number, batch)`` per batch, the padding cut off."""
        if reset:
            eval_data.reset()
        for count, batch in enumerate(eval_data):
            if num_batch is not None and count == num_batch:
                break
            self.forward(batch, is_train=False)
            keep = batch.data[0].shape[0] - (batch.pad or 0)
            yield [out[:keep] for out in self.get_outputs()], count, batch

    def predict(self, eval_data: Any, num_batch: int | None = None, merge_batches: bool = True,
                reset: bool = True, always_output_list: bool = False) -> Any:
        """The outputs over ``eval_data`` (or, for an array, over its batches)."""
        if isinstance(eval_data, (nd.NDArray, np.ndarray)):
            eval_data = _io.NDArrayIter(eval_data, batch_size=self._batch_size())
        outputs = [[o.copy() for o in outs] for outs, _, _ in
                   self.iter_predict(eval_data, num_batch, reset)]
        if not outputs or not merge_batches:
            return outputs
        merged = [nd.concat(*column, dim=0) for column in zip(*outputs)]
        return merged[0] if len(merged) == 1 and not always_output_list else merged

    def fit(self, train_data: Any, eval_data: Any = None, eval_metric: Any = "acc",
            epoch_end_callback: Any = None, batch_end_callback: Any = None,
            kvstore: Any = "local", optimizer: Any = "sgd",
            optimizer_params: Any = (("learning_rate", 0.01),), eval_end_callback: Any = None,
            eval_batch_end_callback: Any = None, initializer: Any = None,
            arg_params: Any = None, aux_params: Any = None, allow_missing: bool = False,
            force_rebind: bool = False, force_init: bool = False, begin_epoch: int = 0,
            num_epoch: int | None = None, validation_metric: Any = None, monitor: Any = None,
            sparse_row_id_fn: Any = None) -> None:
        """Train for ``num_epoch`` epochs: bind, initialise, then per batch forward,
        backward, update and the metric; ``eval_data`` is scored after each epoch."""
        if num_epoch is None:
            raise ValueError("fit: give num_epoch, the number of passes over train_data")
        self.bind(train_data.provide_data, train_data.provide_label, for_training=True,
                  force_rebind=force_rebind)
        self.init_params(initializer or _init.Uniform(0.01), arg_params, aux_params,
                         allow_missing, force_init)
        self.init_optimizer(kvstore, optimizer, optimizer_params)
        eval_metric = _metric.create(eval_metric)
        for epoch in range(begin_epoch, num_epoch):
            started = time.time()
            eval_metric.reset()
            for count, batch in enumerate(train_data):
                self.forward_backward(batch)
                self.update()
                self.update_metric(eval_metric, batch.label)
                _call(batch_end_callback, epoch=epoch, nbatch=count, eval_metric=eval_metric)
            for name, value in eval_metric.get_name_value():
                self.logger.info("Epoch[%d] Train-%s=%f", epoch, name, value)
            self.logger.info("Epoch[%d] Time cost=%.3f", epoch, time.time() - started)
            arg, aux = self.get_params()
            _call(epoch_end_callback, epoch, self.symbol, arg, aux, positional=True)
            if eval_data is not None:
                for name, value in self.score(eval_data, validation_metric or eval_metric,
                                              batch_end_callback=eval_batch_end_callback,
                                              score_end_callback=eval_end_callback,
                                              epoch=epoch):
                    self.logger.info("Epoch[%d] Validation-%s=%f", epoch, name, value)
            train_data.reset()

    def _batch_size(self) -> int:
        return int(self.data_shapes[0].shape[0])

    def save_params(self, fname: str) -> None:
        """The parameters with MXNet's ``arg:``/``aux:`` keys (``nd.save``'s format)."""
        arg, aux = self.get_params()
        nd.save(fname, {**{f"arg:{k}": v for k, v in arg.items()},
                        **{f"aux:{k}": v for k, v in aux.items()}})

    def load_params(self, fname: str) -> None:
        arg, aux = _split_params(nd.load(fname), fname)
        self.set_params(arg, aux)


def _call(callbacks: Any, *args: Any, positional: bool = False, **fields: Any) -> None:
    """Call a callback (or each of a list) with a ``BatchEndParam``-like record."""
    for callback in callbacks if isinstance(callbacks, (list, tuple)) else [callbacks]:
        if callback is None:
            continue
        if positional:
            callback(*args)
        else:
            callback(BatchEndParam(locals=None, **fields))


class BatchEndParam:
    """What a batch-end or score-end callback receives (MXNet's ``BatchEndParam``)."""

    def __init__(self, epoch: int, nbatch: int, eval_metric: Any, locals: Any) -> None:
        self.epoch, self.nbatch, self.eval_metric, self.locals = epoch, nbatch, eval_metric, \
            locals


def _split_params(saved: Any, where: str) -> tuple[dict, dict]:
    """A ``.params`` file's ``arg:``/``aux:`` arrays as two dicts by name."""
    if not isinstance(saved, dict):
        raise ValueError(f"{where}: not a parameter file (a list of unnamed arrays)")
    arg = {k[4:]: v for k, v in saved.items() if k.startswith("arg:")}
    aux = {k[4:]: v for k, v in saved.items() if k.startswith("aux:")}
    return arg, aux


def save_checkpoint(prefix: str, epoch: int, sym: Any, arg_params: dict,
                    aux_params: dict) -> None:
    """``prefix-symbol.json`` and ``prefix-%04d.params`` (MXNet's ``mx.model``)."""
    arrays = {**{f"arg:{k}": v for k, v in arg_params.items()},
              **{f"aux:{k}": v for k, v in aux_params.items()}}
    model_files.write_export_pair(f"{prefix}-symbol.json", sym.to_graph(),
                                  f"{prefix}-{epoch:04d}.params", arrays)


def load_checkpoint(prefix: str, epoch: int) -> tuple[Any, dict, dict]:
    """``(symbol, arg_params, aux_params)`` from :func:`save_checkpoint`'s files."""
    params = f"{prefix}-{epoch:04d}.params"
    arg, aux = _split_params(nd.load(params), params)
    return symbol.load(f"{prefix}-symbol.json"), arg, aux


class Module(BaseModule):
    """A Symbol bound to one device, with its parameters and optimizer."""

    def __init__(self, symbol: Any, data_names: Any = ("data",),
                 label_names: Any = ("softmax_label",), logger: Any = logging,
                 context: Any = None, work_load_list: Any = None,
                 fixed_param_names: Any = None, state_names: Any = None,
                 group2ctxs: Any = None, compression_params: Any = None) -> None:
        super().__init__(logger)
        contexts = context if isinstance(context, (list, tuple)) else [context]
        if len(contexts) > 1:
            raise ValueError(f"Module: one device per module here, got {contexts}; train on "
                             f"several devices with gluon.Trainer (kvstore)")
        self._context = contexts[0] or _context.current_context()
        self._symbol = symbol
        self._data_names = list(data_names or [])
        self._label_names = list(label_names or [])
        self._state_names = list(state_names or [])
        self._fixed_param_names = list(fixed_param_names or [])
        inputs = set(self._data_names + self._label_names + self._state_names)
        arguments = symbol.list_arguments()
        for name in self._data_names + self._state_names:
            if name not in arguments:
                raise ValueError(f"Module: data name {name!r} is not an input of the symbol, "
                                 f"whose arguments are {arguments}")
        self._label_names = [n for n in self._label_names if n in arguments]
        self._param_names = [n for n in arguments if n not in inputs]
        self._aux_names = symbol.list_auxiliary_states()
        self._exec: Any = None
        self._arg_params: dict[str, Any] | None = None
        self._aux_params: dict[str, Any] | None = None
        self._optimizer: Any = None
        self._updater: Any = None
        self._preload_opt_states: str | None = None

    @staticmethod
    def load(prefix: str, epoch: int, load_optimizer_states: bool = False,
             **kwargs: Any) -> Module:
        """A Module of a checkpoint: its symbol and parameters (and optimizer states)."""
        sym, arg, aux = load_checkpoint(prefix, epoch)
        module = Module(sym, **kwargs)
        module._arg_params, module._aux_params = arg, aux
        module.params_initialized = True
        if load_optimizer_states:
            module._preload_opt_states = f"{prefix}-{epoch:04d}.states"
        return module

    def save_checkpoint(self, prefix: str, epoch: int,
                        save_optimizer_states: bool = False) -> None:
        arg, aux = self.get_params()
        save_checkpoint(prefix, epoch, self._symbol, arg, aux)
        if save_optimizer_states:
            self.save_optimizer_states(f"{prefix}-{epoch:04d}.states")

    # -- names and shapes ----------------------------------------------------------------

    @property
    def symbol(self) -> Any:
        return self._symbol

    @property
    def data_names(self) -> list[str]:
        return self._data_names

    @property
    def label_names(self) -> list[str]:
        return self._label_names

    @property
    def output_names(self) -> list[str]:
        return self._symbol.list_outputs()

    @property
    def data_shapes(self) -> list[_io.DataDesc]:
        return self._data_shapes

    @property
    def label_shapes(self) -> list[_io.DataDesc]:
        return self._label_shapes

    @property
    def output_shapes(self) -> list[tuple[str, tuple]]:
        return [(n, o.shape) for n, o in zip(self.output_names, self._exec.outputs)]

    # -- binding --------------------------------------------------------------------------

    def bind(self, data_shapes: Any, label_shapes: Any = None, for_training: bool = True,
             inputs_need_grad: bool = False, force_rebind: bool = False,
             shared_module: Module | None = None, grad_req: Any = "write") -> None:
        """Allocate the arrays for batches of these shapes (an Executor)."""
        if self.binded and not force_rebind:
            self.logger.warning("Module already bound; bind(force_rebind=True) to bind again")
            return
        self._data_shapes, self._label_shapes = _descs(data_shapes), _descs(label_shapes)
        self.for_training, self.inputs_need_grad = for_training, inputs_need_grad
        self._exec = self._bind_executor(grad_req, shared_module)
        self.binded = True
        if self._arg_params is not None:  # (loaded, or bound again: keep the values)
            self._copy_params_in()

    def _grad_reqs(self, grad_req: Any) -> dict[str, str]:
        reqs = {}
        for name in self._symbol.list_arguments():
            if name in self._param_names and name not in self._fixed_param_names:
                reqs[name] = grad_req if self.for_training else "null"
            elif name in self._data_names:
                reqs[name] = grad_req if self.inputs_need_grad else "null"
            else:
                reqs[name] = "null"
        return reqs

    def _bind_executor(self, grad_req: Any, shared: Module | None) -> Any:
        shapes = {d.name: d.shape for d in self._data_shapes + self._label_shapes}
        types = {d.name: d.dtype for d in self._data_shapes + self._label_shapes}
        reqs = self._grad_reqs(grad_req)
        if shared is None or shared._exec is None:
            return self._symbol.simple_bind(self._context, grad_req=reqs, type_dict=types,
                                            **shapes)
        # a bucket's executor: its own data arrays, the shared module's parameters
        fresh = self._symbol.simple_bind(self._context, grad_req="null", type_dict=types,
                                         **shapes)
        owner = shared._exec
        args = {n: owner.arg_dict[n] if n in self._param_names else a
                for n, a in fresh.arg_dict.items()}
        grads = {n: g for n, g in owner.grad_dict.items() if n in self._param_names}
        return self._symbol.bind(self._context, args, grads, reqs,
                                 {n: owner.aux_dict.get(n, a) for n, a in fresh.aux_dict.items()})

    def reshape(self, data_shapes: Any, label_shapes: Any = None) -> None:
        """Bind again for other batch shapes, keeping the parameters."""
        arg, aux = self.get_params() if self.params_initialized else (None, None)
        self.binded = False
        self.bind(data_shapes, label_shapes, self.for_training, self.inputs_need_grad,
                  force_rebind=True)
        if arg is not None:
            self.set_params(arg, aux)

    # -- parameters -----------------------------------------------------------------------

    def init_params(self, initializer: Any = None, arg_params: dict | None = None,
                    aux_params: dict | None = None, allow_missing: bool = False,
                    force_init: bool = False, allow_extra: bool = False) -> None:
        """Give every parameter its first value (from ``arg_params``/``aux_params`` by
        name, else by :func:`initial_value`)."""
        if self.params_initialized and not force_init and arg_params is None:
            return
        if not self.binded:
            raise RuntimeError("init_params: call bind() first")
        initializer = _init.create(initializer) or _init.Uniform(0.01)
        attrs = self._symbol.attr_dict()
        bound = {**{n: self._exec.arg_dict[n] for n in self._param_names},
                 **self._exec.aux_dict}
        given = {**(self._arg_params or {}), **(self._aux_params or {})} if not force_init \
            and self.params_initialized else {}
        given.update({**(arg_params or {}), **(aux_params or {})})
        for name, array in bound.items():
            if name in given:
                value = given[name]
            elif (arg_params is not None or aux_params is not None) and not allow_missing:
                raise ValueError(f"init_params: no value for {name!r} in arg_params/"
                                 f"aux_params (allow_missing=True initialises it)")
            else:
                value = initial_value(initializer, name, array.shape, array.dtype,
                                      attrs.get(name, {}))
            array[:] = value if isinstance(value, nd.NDArray) else nd.array(value)
        self._remember_params()
        self.params_initialized = True

    def _remember_params(self) -> None:
        self._arg_params = {n: self._exec.arg_dict[n] for n in self._param_names}
        self._aux_params = dict(self._exec.aux_dict)

    def _copy_params_in(self) -> None:
        for name, value in {**(self._arg_params or {}), **(self._aux_params or {})}.items():
            target = self._exec.arg_dict.get(name, self._exec.aux_dict.get(name))
            if target is not None and target is not value:
                target[:] = value
        self._remember_params()

    def get_params(self) -> tuple[dict, dict]:
        """Copies of ``(arg_params, aux_params)``."""
        if not self.params_initialized:
            raise RuntimeError("get_params: call init_params() first")
        return ({n: a.copy() for n, a in self._arg_params.items()},  # type: ignore[union-attr]
                {n: a.copy() for n, a in self._aux_params.items()})  # type: ignore[union-attr]

    def set_params(self, arg_params: dict, aux_params: dict | None = None,
                   allow_missing: bool = False, force_init: bool = True,
                   allow_extra: bool = False) -> None:
        if not self.binded:
            self._arg_params, self._aux_params = dict(arg_params), dict(aux_params or {})
            self.params_initialized = True
            return
        known = set(self._param_names) | set(self._aux_names)
        extra = sorted((set(arg_params) | set(aux_params or {})) - known)
        if extra and not allow_extra:
            raise ValueError(f"set_params: {extra} are not parameters of this module "
                             f"(allow_extra=True skips them)")
        self.init_params(None, {k: v for k, v in arg_params.items() if k in known},
                         {k: v for k, v in (aux_params or {}).items() if k in known},
                         allow_missing=allow_missing, force_init=True)

    # -- the optimizer --------------------------------------------------------------------

    def init_optimizer(self, kvstore: Any = "local", optimizer: Any = "sgd",
                       optimizer_params: Any = (("learning_rate", 0.01),),
                       force_init: bool = False) -> None:
        """The optimizer, its gradients scaled by ``1 / batch size`` unless given."""
        if self.optimizer_initialized and not force_init:
            self.logger.warning("optimizer already initialized; ignoring init_optimizer")
            return
        if not (self.binded and self.params_initialized):
            raise RuntimeError("init_optimizer: bind() and init_params() first")
        index = {i: n for i, n in enumerate(self._param_names)}
        if isinstance(optimizer, str):
            params = dict(optimizer_params)
            params.setdefault("rescale_grad", 1.0 / self._batch_size())
            optimizer = opt.create(optimizer, sym=self._symbol, param_idx2name=index,
                                   **params)
        else:
            optimizer.idx2name = dict(index)
        self._optimizer, self._updater = optimizer, opt.Updater(optimizer)
        self.optimizer_initialized = True
        if self._preload_opt_states is not None:
            self.load_optimizer_states(self._preload_opt_states)
            self._preload_opt_states = None

    def borrow_optimizer(self, shared_module: Module) -> None:
        """Use another module's optimizer and states (bucketing)."""
        self._optimizer, self._updater = shared_module._optimizer, shared_module._updater
        self.optimizer_initialized = True

    def save_optimizer_states(self, fname: str) -> None:
        """The optimizer's states with ``nd.save`` (hybridlab never pickles): keys
        ``<index>:<state number>``, and ``__counts__``."""
        nd.waitall()
        arrays = {"__counts__": nd.array([self._optimizer.counts.get(i, 0) for i in range(
            len(self._param_names))], dtype="int64")}
        for key, state in self._updater.states.items():
            for i, array in enumerate(state if isinstance(state, tuple) else (state,)):
                if array is not None:
                    arrays[f"{key}:{i}"] = array
        nd.save(fname, arrays)

    def load_optimizer_states(self, fname: str) -> None:
        loaded = nd.load(fname)
        if not isinstance(loaded, dict) or "__counts__" not in loaded:
            raise ValueError(f"{fname}: not a file of save_optimizer_states")
        counts = [int(c) for c in loaded.pop("__counts__").asnumpy()]
        states: dict[int, list] = {}
        for key in sorted(loaded, key=lambda k: [int(p) for p in k.split(":")]):
            states.setdefault(int(key.split(":")[0]), []).append(loaded[key])
        self._updater.set_states({k: v[0] if len(v) == 1 else tuple(v)
                                  for k, v in states.items()},
                                 {i: n for i, n in enumerate(counts) if n})

    # -- one batch ------------------------------------------------------------------------

    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        """Copy the batch into the bound arrays and run the program (binding again when
        the batch has other shapes than the bound ones)."""
        if not (self.binded and self.params_initialized):
            raise RuntimeError("forward: bind() and init_params() first")
        shapes = [d.shape for d in data_batch.data]
        if shapes != [tuple(d.shape) for d in self._data_shapes]:
            labels = [(n, x.shape) for n, x in zip(self._label_names, data_batch.label or [])]
            self.reshape(list(zip(self._data_names, shapes)), labels or None)
        feed = dict(zip(self._data_names, data_batch.data))
        if self._label_names and data_batch.label:
            feed.update(zip(self._label_names, data_batch.label))
        for name, value in feed.items():
            target = self._exec.arg_dict[name]
            target[:] = value.astype(target.dtype) if isinstance(value, nd.NDArray) else value
        self._exec.forward(is_train=self.for_training if is_train is None else is_train)

    def backward(self, out_grads: Any = None) -> None:
        if not self.for_training:
            raise RuntimeError("backward: bound with for_training=False")
        self._exec.backward(out_grads)

    def update(self) -> None:
        """One optimizer step for every parameter, from the gradients of ``backward``."""
        if not self.optimizer_initialized:
            raise RuntimeError("update: call init_optimizer() first")
        for index, name in enumerate(self._param_names):
            grad = self._exec.grad_dict.get(name)
            if grad is not None:
                self._updater(index, grad, self._exec.arg_dict[name])

    def get_outputs(self, merge_multi_context: bool = True) -> list:
        return list(self._exec.outputs)

    def get_input_grads(self, merge_multi_context: bool = True) -> list:
        if not self.inputs_need_grad:
            raise RuntimeError("get_input_grads: bind with inputs_need_grad=True")
        return [self._exec.grad_dict[n] for n in self._data_names]

    def update_metric(self, eval_metric: Any, labels: Any, pre_sliced: bool = False) -> None:
        eval_metric.update_dict(dict(zip(self._label_names, labels or [])),
                                dict(zip(self.output_names, self._exec.outputs)))

    def install_monitor(self, mon: Any) -> None:
        mon.install(self._exec)


class BucketingModule(BaseModule):
    """One Module per bucket key (``sym_gen(key) -> (symbol, data_names, label_names)``),
    all sharing the parameters and the optimizer of the ``default_bucket_key``'s."""

    def __init__(self, sym_gen: Callable[[Any], tuple], default_bucket_key: Any = None,
                 logger: Any = logging, context: Any = None, work_load_list: Any = None,
                 fixed_param_names: Any = None, state_names: Any = None,
                 group2ctxs: Any = None, compression_params: Any = None) -> None:
        super().__init__(logger)
        if default_bucket_key is None:
            raise ValueError("BucketingModule: give default_bucket_key (the largest bucket)")
        self._sym_gen, self._default_bucket_key = sym_gen, default_bucket_key
        self._options = {"logger": logger, "context": context,
                         "fixed_param_names": fixed_param_names, "state_names": state_names}
        self._buckets: dict[Any, Module] = {}
        self._curr_module: Module | None = None
        self._curr_bucket_key: Any = None

    def _make(self, key: Any) -> Module:
        sym, data_names, label_names = self._sym_gen(key)
        return Module(sym, data_names, label_names, **self._options)

    @property
    def symbol(self) -> Any:
        return self._current().symbol

    def _current(self) -> Module:
        if self._curr_module is None:
            raise RuntimeError("BucketingModule: call bind() first")
        return self._curr_module

    @property
    def data_names(self) -> list[str]:
        return self._current().data_names

    @property
    def output_names(self) -> list[str]:
        return self._current().output_names

    @property
    def data_shapes(self) -> list[_io.DataDesc]:
        return self._current().data_shapes

    @property
    def label_shapes(self) -> list[_io.DataDesc]:
        return self._current().label_shapes

    def bind(self, data_shapes: Any, label_shapes: Any = None, for_training: bool = True,
             inputs_need_grad: bool = False, force_rebind: bool = False,
             shared_module: Any = None, grad_req: str = "write") -> None:
        if self.binded and not force_rebind:
            return
        module = self._make(self._default_bucket_key)
        module.bind(data_shapes, label_shapes, for_training, inputs_need_grad,
                    force_rebind=True, grad_req=grad_req)
        self._buckets = {self._default_bucket_key: module}
        self._curr_module, self._curr_bucket_key = module, self._default_bucket_key
        self.binded, self.for_training = True, for_training
        self.inputs_need_grad, self._grad_req = inputs_need_grad, grad_req

    def switch_bucket(self, bucket_key: Any, data_shapes: Any, label_shapes: Any = None) -> None:
        """Make ``bucket_key``'s module current, binding it (sharing parameters) if new."""
        if bucket_key not in self._buckets:
            module = self._make(bucket_key)
            module.bind(data_shapes, label_shapes, self.for_training, self.inputs_need_grad,
                        force_rebind=True, shared_module=self._buckets[self._default_bucket_key],
                        grad_req=self._grad_req)
            default = self._buckets[self._default_bucket_key]
            module._arg_params, module._aux_params = default._arg_params, default._aux_params
            module.params_initialized = self.params_initialized
            if self.optimizer_initialized:
                module.borrow_optimizer(default)
            self._buckets[bucket_key] = module
        self._curr_module, self._curr_bucket_key = self._buckets[bucket_key], bucket_key

    def init_params(self, initializer: Any = None, arg_params: Any = None,
                    aux_params: Any = None, allow_missing: bool = False,
                    force_init: bool = False, allow_extra: bool = False) -> None:
        default = self._buckets[self._default_bucket_key]
        default.init_params(initializer, arg_params, aux_params, allow_missing, force_init)
        self.params_initialized = True
        for module in self._buckets.values():
            module.params_initialized = True

    def init_optimizer(self, kvstore: Any = "local", optimizer: Any = "sgd",
                       optimizer_params: Any = (("learning_rate", 0.01),),
                       force_init: bool = False) -> None:
        default = self._buckets[self._default_bucket_key]
        default.init_optimizer(kvstore, optimizer, optimizer_params, force_init)
        for module in self._buckets.values():
            if module is not default:
                module.borrow_optimizer(default)
        self.optimizer_initialized = True

    def get_params(self) -> tuple[dict, dict]:
        return self._buckets[self._default_bucket_key].get_params()

    def set_params(self, arg_params: dict, aux_params: dict | None = None,
                   allow_missing: bool = False, force_init: bool = True,
                   allow_extra: bool = False) -> None:
        self._buckets[self._default_bucket_key].set_params(arg_params, aux_params,
                                                           allow_missing, force_init,
                                                           allow_extra)
        self.params_initialized = True

    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        key = getattr(data_batch, "bucket_key", None)
        if key is None:
            key = self._default_bucket_key
        self.switch_bucket(key, data_batch.provide_data or [
            (n, d.shape) for n, d in zip(self._current().data_names, data_batch.data)],
            data_batch.provide_label)
        self._current().forward(data_batch, is_train)

    def backward(self, out_grads: Any = None) -> None:
        self._current().backward(out_grads)

    def update(self) -> None:
        self._current().update()

    def get_outputs(self, merge_multi_context: bool = True) -> list:
        return self._current().get_outputs(merge_multi_context)

    def get_input_grads(self, merge_multi_context: bool = True) -> list:
        return self._current().get_input_grads(merge_multi_context)

    def update_metric(self, eval_metric: Any, labels: Any, pre_sliced: bool = False) -> None:
        self._current().update_metric(eval_metric, labels, pre_sliced)

    def save_checkpoint(self, prefix: str, epoch: int,
                        remove_amp_cast: bool = False) -> None:
        self._buckets[self._default_bucket_key].save_checkpoint(prefix, epoch)
