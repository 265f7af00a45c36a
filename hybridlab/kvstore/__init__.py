"""The key-value store (``mx.kv``): how devices and machines agree on the weights.

What this package teaches
-------------------------
Data parallelism runs one copy of the network per device, each on its slice of the
batch, so each device ends a backward pass with its own gradient. Before the update they
must agree: the gradients are *summed* across devices (an all-reduce), and every copy of
a weight gets the same new value. MXNet puts that behind one small interface, a store of
arrays under keys (one key per Parameter)::

    kv = mx.kv.create('device')
    kv.init(0, weight)                 # the store's copy of key 0
    kv.push(0, [grad_on_cpu0, grad_on_cpu1])   # summed into the store
    kv.pull(0, out=[w_on_cpu0, w_on_cpu1])     # the store's value, copied to each device

With no optimizer, a push *replaces* the stored value by the sum of what was pushed; after
``kv.set_optimizer(opt)`` a push *updates* the stored value with the sum as gradient (the
parameter server's "update on the server": each key updated once, not once per device).
``pushpull`` is a push and a pull in one call.

The package holds both halves of the store and what travels between them:

* ``local.py``: ``'local'`` and ``'device'``, the store of one process (every step an
  engine op), and the checks every store makes;
* ``dist.py``: ``'dist_sync'`` and ``'dist_async'``, the worker's half of a store shared
  by Dask workers;
* ``server.py``: the server's half, a Dask actor, and :func:`run_workers`, which starts
  the ranks (NOTE [The store as a Dask actor]);
* ``compression.py``: MXNet's 2-bit gradient compression with error feedback.
"""

from __future__ import annotations

from hybridlab.kvstore.compression import quantize_2bit
from hybridlab.kvstore.dist import DistKVStore
from hybridlab.kvstore.local import KVStore
from hybridlab.kvstore.server import KVServer, kv_session, run_workers

TYPES = ("local", "device", "dist_sync", "dist_async")


def create(name: str = "local") -> KVStore:
    """``mx.kv.create('local' | 'device' | 'dist_sync' | 'dist_async')``; MXNet's other
    names of one process's store (``'local_allreduce_cpu'``, ``'local_allreduce_device'``,
    ...) are a local store, on the devices when the name says ``device``."""
    known = name in TYPES + ("dist", "dist_device_sync") or str(name).startswith("local_")
    if not isinstance(name, str) or not known:
        raise ValueError(f"mx.kv.create: unknown kvstore type {name!r}; hybridlab has "
                         f"{list(TYPES)} (local/device: the devices of one process; "
                         f"dist_*: Dask workers, run through hybridlab.kvstore.run_workers)")
    if name.startswith("dist"):
        return DistKVStore("dist_async" if name == "dist_async" else "dist_sync",
                           kv_session(name))
    return KVStore(name)
