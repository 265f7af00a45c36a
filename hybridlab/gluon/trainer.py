"""The Trainer: apply an optimizer to a set of Parameters after ``backward()``.

What this module teaches
------------------------
After ``loss.backward()`` every parameter holds a gradient of the *summed* loss.
``trainer.step(batch_size)`` rescales it by ``1/batch_size`` (so the learning rate
does not depend on the batch size) and updates each parameter in place.

A step is pushed to the engine as **one operation** that reads every gradient and writes
every weight and optimizer state (MXNet's fused ``sgd_mom_update``/``adam_update``,
applied to the whole group of parameters at once as its ``multi_sgd_update`` does): it
is ordered after the backward pass that wrote the gradients and before any later forward
pass that reads a weight, without the Python waiting. One push per step, not one per
parameter: a push costs microseconds of bookkeeping, a small network's update less.
The new weights go into a fresh aligned buffer that the weight's NDArray then holds (NOTE
[Immutable buffers] in ndarray.py: ``w.detach()`` may share the old one, which must
keep its values); the optimizer states are the Trainer's own and change in place.

The update rules themselves (SGD, Adam) live in hybridlab/optimizer.py.

Several devices (NOTE [One copy per device] in parameter.py): each device's copy of a
Parameter got the gradient of its own slice of the batch. ``step`` first makes them
agree through a key-value store (hybridlab/kvstore/), as MXNet's Trainer does:

* ``kvstore='device'`` (the default) or ``'local'``, with ``update_on_kvstore`` (the
  default for a store): push every device's gradient (summed in the store), the store
  applies the optimizer once per Parameter, and every device pulls the new weights;
* ``update_on_kvstore=False``: the store only sums (``pushpull`` of the gradients),
  then each device applies the optimizer to its own copy (same gradient, same result);
* ``kvstore=None``: no store; each device updates with its own gradient (the copies
  drift apart -- MXNet's behaviour too);
* ``'dist_sync'``/``'dist_async'`` (or a store made by ``mx.kv.create``): the same on
  Dask workers; the batch size given to ``step`` is the *global* one (all workers'), since
  the store sums every worker's gradient.
With one device and a local store type there is nothing to agree on: no store is made.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, NamedTuple

import numpy as np

from hybridlab import engine
from hybridlab import kvstore as _kv
from hybridlab import optimizer as opt
from hybridlab.errors import UpdateOnKVStoreError
from hybridlab.gluon.parameter import Parameter, ParameterDict


def _check_number(what: str, value: Any) -> Any:
    return opt.check_number(f"Trainer: {what}", value)



class Trainer:
    """``Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1, 'momentum': 0.9})``."""

    def __init__(self, params: ParameterDict | list | dict, optimizer: str | opt.Optimizer,
                 optimizer_params: dict | None = None, kvstore: Any = "device",
                 compression_params: Any = None, update_on_kvstore: bool | None = None
                 ) -> None:
        given = dict(optimizer_params or {})
        self._scheduler = given.pop("lr_scheduler", None)
        if self._scheduler is not None and not callable(self._scheduler):
            raise TypeError(f"Trainer: lr_scheduler must be an mx.lr_scheduler object, got "
                            f"{self._scheduler!r}")
        self._optimizer = opt.create(optimizer, **given)
        self._hyper = self._optimizer.hyper  # (shared: set_learning_rate changes both)
        self._scale = self._hyper.get("rescale_grad", 1.0)  # step divides it by batch_size
        values = params.values() if isinstance(params, (ParameterDict, dict)) else params
        self._params: list[Parameter] = [p for p in values if p.grad_req != "null"]
        self._optimizer.param_dict = dict(enumerate(self._params))  # (MXNet's: index -> param)
        for param in self._params:  # a value set from outside resets the store (set_data)
            param._trainer = weakref.ref(self)
        self._states: dict[Any, list[np.ndarray]] = {}
        self._updaters: dict[Any, opt.Updater] = {}  # per device, for MXNet's per-weight path
        self._steps = 0
        if kvstore is not None and not isinstance(kvstore, (str, _kv.KVStore)):
            raise TypeError(f"Trainer: kvstore must be a type name ('device', 'local', "
                            f"'dist_sync', ...), a store from mx.kv.create or None, got "
                            f"{kvstore!r}")
        if compression_params is not None and not isinstance(compression_params, dict):
            raise TypeError(f"Trainer: compression_params is a dict such as {{'type': '2bit', "
                            f"'threshold': 0.5}}, got {compression_params!r}")
        self._compression = compression_params  # set on the store, when there is one
        self._kv_config = (kvstore, update_on_kvstore)
        self._kvstore: Any = None
        self._update_on_kvstore = False
        self._sent: dict[str, float] = {}  # the rates the store's optimizer has, by name
        self._kv_initialized = False

    @property
    def learning_rate(self) -> float:
        """The rate of the next step (the scheduler's, when one was given)."""
        if self._scheduler is not None:
            return self._scheduler(self._steps)
        return self._hyper["learning_rate"]

    def set_learning_rate(self, lr: float) -> None:
        if self._scheduler is not None:
            raise UserWarning("Trainer: an lr_scheduler sets the learning rate; change the "
                              "scheduler instead of calling set_learning_rate")
        self._hyper["learning_rate"] = _check_number("learning_rate", lr)
        if self._kvstore is not None and self._update_on_kvstore:
            self._to_store("learning_rate", lr)

    def _to_store(self, name: str, value: float) -> None:
        """Give the store's optimizer a new rate (only when it changed: a dist store's is
        on the server, and each change is a message)."""
        if self._sent.get(name) != value:
            self._kvstore._set_hyper(name, value)
            self._sent[name] = value

    def step(self, batch_size: int, ignore_stale_grad: bool = False) -> None:
        """One update of every parameter, with gradients scaled by ``1/batch_size``. Each
        parameter's learning rate and weight decay are multiplied by its
        ``lr_mult``/``wd_mult`` (on a store that updates, by the store's optimizer, which
        reads them through its ``param_dict``)."""
        if _check_number("step(batch_size)", batch_size) <= 0:
            raise ValueError(f"step(batch_size): the number of samples the gradients were "
                             f"summed over must be positive, got {batch_size!r}")
        rescale = self._scale / batch_size
        if not self._kv_initialized:
            self._init_kvstore(rescale)
        self._steps += 1
        store = self._kvstore
        if store is not None and self._update_on_kvstore:  # a new batch size or a rate of
            self._to_store("rescale_grad", rescale)  # the scheduler's goes to the store's
            if self._scheduler is not None:  # optimizer (a dist store's: on the server)
                self._to_store("learning_rate", self._scheduler(self._steps))
            keys = list(range(len(self._params)))  # all keys in one call: one round trip
            store.pushpull(keys, [p.list_grad() for p in self._params],
                           out=[p.list_data() for p in self._params])
            return
        if store is not None:
            store.pushpull(list(range(len(self._params))), [p.list_grad() for p in self._params])
        self._update_each_device(rescale)

    def _update_each_device(self, rescale: float) -> None:
        """The optimizer on every device's copies: one engine op per device, reading its
        gradients and writing its weights (MXNet's ``multi_sgd_update``) -- or, for an
        optimizer without a numpy rule (or one that overrides ``update``), MXNet's way:
        an Updater per device calling ``update`` for each weight."""
        if self._optimizer.fused_rule() is None:
            self._update_each_weight(rescale)
            return
        hyper = {**self._hyper, "rescale": rescale, "t": self._steps}
        if self._scheduler is not None:
            hyper["learning_rate"] = self._scheduler(self._steps)
        name = self._optimizer.name
        mults = [(param.lr_mult, param.wd_mult) for param in self._params]
        for device in self._params[0].list_ctx() if self._params else []:
            weights = [param.data(device) for param in self._params]
            grads = [param.grad(device) for param in self._params]
            states = [self._state((param.name, device), weight)
                      for param, weight in zip(self._params, weights)]
            kernel = _bind(name, weights, grads, states, mults, dict(hyper))
            engine.current().push(kernel, reads=[grad._var for grad in grads],
                                  writes=[weight._var for weight in weights],
                                  name=f"multi_{name}_update", device=device)

    def _update_each_weight(self, rescale: float) -> None:
        optimizer = self._optimizer
        optimizer.rescale_grad = rescale
        if self._scheduler is not None:
            optimizer.lr = self._scheduler(self._steps)
        for n, device in enumerate(self._params[0].list_ctx() if self._params else []):
            updater = self._updaters.setdefault(device, opt.Updater(optimizer))
            optimizer._set_current_context(n)
            for index, param in enumerate(self._params):
                updater(index, param.grad(device), param.data(device))
        optimizer._set_current_context(0)

    def _init_kvstore(self, rescale: float) -> None:
        """MXNet's choice of store (``_create_kvstore``): none for one device and a local
        type; else the store, the optimizer on it unless ``update_on_kvstore=False``, and
        every Parameter's first copy as its key's value (pulled back, so a dist store's
        workers all start from rank 0's weights)."""
        config, update = self._kv_config
        devices = self._params[0].list_ctx() if self._params else []
        kind = config if isinstance(config, str) else getattr(config, "type", "")
        if update is False and kind == "dist_async":
            raise ValueError("Trainer: dist_async applies every push on the store, so it "
                             "needs update_on_kvstore=True (or None)")
        store: Any = config
        if isinstance(config, str):
            store = None if len(devices) <= 1 and "dist" not in config else _kv.create(config)
        self._kv_initialized = True
        if store is None:
            return
        distributed = store.type.startswith("dist")
        if self._compression:  # MXNet's: only when there is a store (two devices, dist)
            store.set_gradient_compression(self._compression)
        self._kvstore, self._update_on_kvstore = store, True if update is None else update
        self._sent = {}  # (the first step gives the store's optimizer its rates)
        if self._update_on_kvstore and not distributed:
            # the Trainer's own optimizer: its param_dict holds the Parameters, so a later
            # x.lr_mult = 2 counts, as in MXNet (its rescale_grad set at the first step)
            store.set_optimizer(self._optimizer)
        elif self._update_on_kvstore:  # a copy goes to the server: each key's multipliers
            self._sent = {"rescale_grad": rescale, "learning_rate": self._hyper["learning_rate"]}
            chosen = opt.create(self._optimizer.name, **{**self._hyper, "rescale_grad": rescale})
            chosen.param_dict = {i: _Mults(p.lr_mult, p.wd_mult)
                                 for i, p in enumerate(self._params)}
            store.set_optimizer(chosen)
        for index, param in enumerate(self._params):
            store.init(index, param.list_data()[0])
            if distributed:
                store.pull(index, out=param.list_data())

    def _reset_kvstore(self) -> None:
        """A Parameter got a value from outside (``set_data``, a loaded file) while a store
        updates it: the store's copy is stale, so the store (and the optimizer's state on
        it) is dropped and made again from the new values at the next step, as in MXNet."""
        if self._kvstore is None or not self._update_on_kvstore:
            return
        if self._kvstore.type.startswith("dist"):
            raise RuntimeError("Trainer: a dist store cannot be reset; load the parameters "
                               "before the first step")
        self._kvstore, self._kv_initialized, self._sent = None, False, {}
        engine.current().wait_all()  # (a pending update would make its state again)
        self._optimizer.states, self._optimizer.counts = {}, {}

    def _refuse_on_kvstore(self, what: str) -> None:
        if self._kvstore is not None and self._update_on_kvstore:
            raise UpdateOnKVStoreError(
                f"Trainer.{what}: the store updates the parameters (update_on_kvstore), so "
                f"there is nothing to {what.split('(')[0]} here; call step(batch_size), or "
                f"make the Trainer with update_on_kvstore=False")

    def _state(self, key: Any, weight: Any) -> list[np.ndarray]:
        """The optimizer's arrays for ``key`` (a Parameter on a device), made at its first
        step (SGD keeps a momentum, Adam two moments)."""
        if key not in self._states:
            self._states[key] = [np.zeros(weight.shape, weight.dtype)
                                 for _ in range(opt._STATE_COUNT[self._optimizer.name])]
        return self._states[key]

    def zero_grad(self) -> None:
        for param in self._params:
            param.zero_grad()

    def allreduce_grads(self) -> None:
        """Sum each gradient over the devices (``step`` = ``allreduce_grads`` + ``update``,
        with ``update_on_kvstore=False``)."""
        if not self._kv_initialized:
            self._init_kvstore(self._scale)
        self._refuse_on_kvstore("allreduce_grads()")
        if self._kvstore is not None:
            self._kvstore.pushpull(list(range(len(self._params))),
                                   [p.list_grad() for p in self._params])

    def update(self, batch_size: int, ignore_stale_grad: bool = False) -> None:
        """The update alone, on every device's copy (after :meth:`allreduce_grads`)."""
        if _check_number("step(batch_size)", batch_size) <= 0:
            raise ValueError(f"update(batch_size): the number of samples the gradients "
                             f"were summed over must be positive, got {batch_size!r}")
        self._refuse_on_kvstore("update()")
        self._steps += 1
        self._update_each_device(self._scale / batch_size)

    def save_states(self, fname: str) -> None:
        """Save the optimizer's state (momenta, Adam's moments, the step counts) with
        ``nd.save`` -- not MXNet's pickle: hybridlab never unpickles a file. Keys are
        ``name|device index:state index``, and ``name|kv:state index`` for the state of a
        store that updates (the Trainer's optimizer, applied by the store)."""
        from hybridlab import ndarray
        ndarray.waitall()  # the states change inside the engine's update ops
        arrays = {"__steps__": ndarray.array([self._steps], dtype="int64"),
                  "__kv_counts__": ndarray.array([self._optimizer.counts.get(i, 0) for i in
                                                  range(len(self._params))], dtype="int64")}
        index = {p.name: p.list_ctx() for p in self._params}
        for (name, device), states in self._states.items():
            where = index[name].index(device)
            arrays.update({f"{name}|{where}:{i}": ndarray.array(a)
                           for i, a in enumerate(states)})
        for key, states in self._optimizer.states.items():
            arrays.update({f"{self._params[key].name}|kv:{i}": ndarray.array(a)
                           for i, a in enumerate(states)})
        ndarray.save(fname, arrays)

    def load_states(self, fname: str) -> None:
        """Restore what :meth:`save_states` wrote (the same parameters and devices)."""
        from hybridlab import ndarray
        loaded = ndarray.load(fname)
        if not isinstance(loaded, dict) or "__steps__" not in loaded:
            raise ValueError(f"{fname}: not a file of Trainer.save_states")
        ndarray.waitall()
        index = {p.name: p.list_ctx() for p in self._params}
        position = {p.name: i for i, p in enumerate(self._params)}
        self._steps = int(loaded.pop("__steps__").asscalar())
        counts = loaded.pop("__kv_counts__", None)
        self._states = {}
        on_store: dict[int, list] = {}
        for key in sorted(loaded, key=lambda k: int(k.rsplit(":", 1)[1])):
            name, where = key.rsplit(":", 1)[0].rsplit("|", 1)
            if name not in index:
                raise ValueError(f"{fname}: state of {name!r}, which this Trainer does not "
                                 f"update; load the states into the Trainer that saved them")
            if where == "kv":
                on_store.setdefault(position[name], []).append(loaded[key])
            else:
                device = index[name][int(where)]
                self._states.setdefault((name, device), []).append(loaded[key].asnumpy())
        known = [] if counts is None else counts.asnumpy().tolist()
        opt.Updater(self._optimizer).set_states(
            on_store, {i: int(n) for i, n in enumerate(known) if n})


class _Mults(NamedTuple):
    """A Parameter's rate multipliers, as sent to a dist store's server."""

    lr_mult: float
    wd_mult: float


def _bind(optimizer: str, weights: list, grads: list, states: list, mults: list,
          hyper: dict) -> Callable:
    """The engine op: each weight's next buffer from its gradient's."""
    update = opt.RULES[optimizer]
    lr, wd = hyper.pop("learning_rate"), hyper.pop("wd")

    def kernel() -> None:
        for weight, grad, state, (lr_mult, wd_mult) in zip(weights, grads, states, mults):
            weight._data = update(weight._data, grad._data, state, learning_rate=lr * lr_mult,
                                  wd=wd * wd_mult, **hyper)

    return kernel
