"""Make the fixtures that prove hybridlab's files are MXNet's files, in both directions.

Three steps, each run by hand with a different Python (hybridlab never imports this file):

1. ``/work/mxvenv/bin/python tools/mxnet_fixtures.py mxnet-writes``: real MXNet 1.9.1
   (a virtualenv outside the repository: ``pip install mxnet==1.9.1 "numpy<1.24"``)
   exports (and saves with ``save_parameters``) three models (the seed MLP, LeNet, a small
   convnet with BatchNorm, a residual ``elemwise_add``, pooling, LeakyReLU, Flatten and
   Dropout) and ``nd.save`` files of every dtype it stores, with the inputs, the outputs
   and the expected values as plain numpy ``.npz`` files (so the tests do not read the
   expectations with the reader under test).
2. ``.venv/bin/python tools/mxnet_fixtures.py hybridlab-writes``: hybridlab writes
   ``nd.save`` files, ``save_parameters`` and ``export`` of an MLP, and its output.
3. ``/work/mxvenv/bin/python tools/mxnet_fixtures.py mxnet-reads``: real MXNet loads what
   step 2 wrote and saves what it read (values, dtypes, the model's outputs) as ``.npz``.

Everything goes to ``tests/fixtures/mxnet/``; ``tests/test_mxnet_files.py`` compares.
Three more steps, each with real MXNet alone: ``mxnet-rnn`` (the fused RNN's outputs and
gradients), ``mxnet-recordio`` (record files) and ``mxnet-deformable`` (the deformable
convolution's outputs and gradients); each function says which test reads them.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures",
                   "mxnet")
DTYPES = ["float32", "float64", "float16", "uint8", "int8", "int32", "int64", "bool",
          "int16", "uint16", "uint32", "uint64"]  # MXNet 1.9.1 saves the first eight
STORED = DTYPES[:8]


def _path(*parts: str) -> str:
    os.makedirs(os.path.join(OUT, *parts[:-1]), exist_ok=True)
    return os.path.join(OUT, *parts)


def _sample(dtype: str, shape: tuple) -> np.ndarray:
    rng = np.random.default_rng(DTYPES.index(dtype))
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if dtype.startswith("float"):
        return (rng.standard_normal(shape) * 3).astype(dtype)
    info = np.iinfo(dtype)
    low, high = max(info.min, -1000), min(info.max, 1000)
    values = rng.integers(low, high, shape).astype(dtype)
    values.flat[0], values.flat[-1] = info.min, info.max  # the extremes survive too
    return values


def _layers(nn, kind: str):
    """The three models, written once for both frameworks' Gluon APIs."""
    net = nn.HybridSequential()
    if kind == "mlp":  # the seed MLP (input 64 instead of 512, to keep the file small)
        net.add(nn.Dense(256, activation="relu"), nn.Dense(128, activation="relu"),
                nn.Dense(2))
    elif kind == "lenet":
        net.add(nn.Conv2D(6, 5, activation="relu"), nn.MaxPool2D(2, 2),
                nn.Conv2D(16, 5, activation="relu"), nn.MaxPool2D(2, 2),
                nn.Dense(120, activation="relu"), nn.Dense(84, activation="relu"),
                nn.Dense(10))
    return net


def _convnet(gluon, nn):
    """BatchNorm, LeakyReLU, a residual elemwise_add, both poolings, Flatten, Dropout."""
    class Residual(gluon.HybridBlock):
        def __init__(self, channels, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.conv = nn.Conv2D(channels, 3, padding=1, use_bias=False)
                self.bn = nn.BatchNorm()

        def hybrid_forward(self, F, x):
            return F.elemwise_add(x, self.bn(self.conv(x)))

    net = nn.HybridSequential()
    net.add(nn.Conv2D(8, 3, padding=1, activation="relu"), nn.BatchNorm(), nn.LeakyReLU(0.1),
            Residual(8), nn.MaxPool2D(2), nn.AvgPool2D(2), nn.Flatten(), nn.Dropout(0.5),
            nn.Dense(10))
    return net


INPUT_SHAPES = {"mlp": (3, 64), "lenet": (2, 1, 28, 28), "convnet": (2, 3, 8, 8)}


# --- 1. real MXNet writes -----------------------------------------------------------------
def mxnet_writes() -> None:
    import mxnet as mx
    from mxnet import autograd, gluon, nd
    from mxnet.gluon import nn

    mx.random.seed(7)
    np.random.seed(7)
    for kind in ("mlp", "lenet", "convnet"):
        net = _convnet(gluon, nn) if kind == "convnet" else _layers(nn, kind)
        net.initialize(mx.init.Xavier())
        x = nd.array(np.random.default_rng(1).standard_normal(INPUT_SHAPES[kind]))
        if kind == "convnet":  # move BatchNorm's running statistics away from 0 and 1
            for _ in range(3):
                with autograd.record():
                    net(x * 2 + 1)
        net.hybridize()
        y = net(x)
        net.export(_path(kind, "model"), epoch=0)
        net.save_parameters(_path(kind, "model.params"))  # structural keys: 0.weight, ...
        np.savez(_path(kind, "io.npz"), x=x.asnumpy(), y=y.asnumpy())
        saved = {k: v.asnumpy() for k, v in nd.load(_path(kind, "model-0000.params")).items()}
        np.savez(_path(kind, "params-expected.npz"), **saved)
    arrays, stored = [], []
    for dtype in DTYPES:
        values = _sample(dtype, (2, 3))
        try:
            nd.save(_path("tmp-probe"), [nd.array(values, dtype=dtype)])
        except (mx.MXNetError, TypeError, ValueError, KeyError) as err:
            print(f"MXNet cannot save {dtype}: {err!r:.80}")
            continue
        arrays.append(nd.array(values, dtype=dtype))
        stored.append(dtype)
    os.remove(_path("tmp-probe"))
    nd.save(_path("arrays-list.nd"), arrays)
    nd.save(_path("arrays-dict.nd"), {f"w_{d}": a for d, a in zip(stored, arrays)})
    np.savez(_path("arrays-expected.npz"), **{d: a.asnumpy() for d, a in zip(stored, arrays)})
    mx.npx.set_np()  # numpy-shape mode: MXNet writes the "V3" array magic, 0-d allowed
    mx.npx.save(_path("arrays-np-shape.nd"), {"scalar": mx.np.array(2.5),
                                              "m": mx.np.arange(6).reshape(2, 3)})
    with open(_path("versions.json"), "w") as f:
        json.dump({"mxnet": mx.__version__, "numpy": np.__version__, "dtypes": stored}, f)


# --- 2. hybridlab writes ------------------------------------------------------------------
def hybridlab_writes() -> None:
    import hybridlab as mx
    from hybridlab import autograd, gluon, nd
    from hybridlab.gluon import nn

    mx.random.seed(7)
    values = {d: _sample(d, (2, 3)) for d in STORED}
    nd.save(_path("from_hybridlab", "arrays-list.nd"), [nd.array(v, dtype=v.dtype)
                                                        for v in values.values()])
    nd.save(_path("from_hybridlab", "arrays-dict.nd"),
            {f"w_{d}": nd.array(v, dtype=v.dtype) for d, v in values.items()})
    np.savez(_path("from_hybridlab", "arrays-written.npz"), **values)
    net = _layers(nn, "mlp")
    net.initialize()
    x = nd.array(np.random.default_rng(1).standard_normal(INPUT_SHAPES["mlp"]))
    net.hybridize()
    y = net(x)
    net.save_parameters(_path("from_hybridlab", "mlp.params"))
    net.export(_path("from_hybridlab", "mlp"))
    np.savez(_path("from_hybridlab", "mlp-io.npz"), x=x.asnumpy(), y=y.asnumpy())
    # MXNet's layer operators as hybridlab writes them (Activation, BatchNorm with its
    # auxiliary states, Dropout, elemwise_add, LeakyReLU, Pooling, Flatten)
    net = _convnet(gluon, nn)
    net.initialize(mx.init.Xavier())
    x = nd.array(np.random.default_rng(1).standard_normal(INPUT_SHAPES["convnet"]))
    net.hybridize()
    for _ in range(3):  # move BatchNorm's running statistics away from 0 and 1
        with autograd.record():
            net(x * 2 + 1)
    y = net(x)
    net.export(_path("from_hybridlab", "convnet"))
    np.savez(_path("from_hybridlab", "convnet-io.npz"), x=x.asnumpy(), y=y.asnumpy())


# --- 3. real MXNet reads what hybridlab wrote ---------------------------------------------
def mxnet_reads() -> None:
    import mxnet as mx
    from mxnet import gluon, nd
    from mxnet.gluon import nn

    src = os.path.join(OUT, "from_hybridlab")
    read = nd.load(os.path.join(src, "arrays-list.nd"))
    np.savez(_path("from_hybridlab", "mxnet-read-list.npz"),
             **{str(i): a.asnumpy() for i, a in enumerate(read)})
    read = nd.load(os.path.join(src, "arrays-dict.nd"))
    np.savez(_path("from_hybridlab", "mxnet-read-dict.npz"),
             **{k: a.asnumpy() for k, a in read.items()})
    x = nd.array(np.load(os.path.join(src, "mlp-io.npz"))["x"])
    net = _layers(nn, "mlp")
    net.load_parameters(os.path.join(src, "mlp.params"))
    imported = gluon.SymbolBlock.imports(os.path.join(src, "mlp-symbol.json"), ["data"],
                                         os.path.join(src, "mlp-0000.params"))
    np.savez(_path("from_hybridlab", "mxnet-outputs.npz"), load_parameters=net(x).asnumpy(),
             imports=imported(x).asnumpy())
    x = nd.array(np.load(os.path.join(src, "convnet-io.npz"))["x"])
    imported = gluon.SymbolBlock.imports(os.path.join(src, "convnet-symbol.json"), ["data"],
                                         os.path.join(src, "convnet-0000.params"))
    np.savez(_path("from_hybridlab", "mxnet-convnet-outputs.npz"), imports=imported(x).asnumpy())
    print("MXNet", mx.__version__, "read everything hybridlab wrote")


# --- 4. real MXNet's fused RNN operator: outputs and gradients ---------------------------
RNN_CASES = {  # name -> RNN attributes (data: T=4, N=3, C=5; state_size 6)
    "lstm": {"mode": "lstm", "num_layers": 2, "bidirectional": True},
    "gru": {"mode": "gru", "num_layers": 2, "bidirectional": True},
    "rnn_tanh": {"mode": "rnn_tanh", "num_layers": 2, "bidirectional": False},
    "rnn_relu": {"mode": "rnn_relu", "num_layers": 1, "bidirectional": True},
    "lstmp": {"mode": "lstm", "num_layers": 2, "bidirectional": True, "projection_size": 4},
}


def mxnet_rnn() -> None:
    """``mx.nd.RNN`` on random packed parameters: the outputs, the last states, and the
    gradients of every input for random head gradients (``tests/ops/test_rnn_operator.py``)."""
    import mxnet as mx
    from mxnet import autograd, nd

    for case, attrs in RNN_CASES.items():
        rng = np.random.default_rng(len(case))
        layers, dirs = attrs["num_layers"], 2 if attrs["bidirectional"] else 1
        gates = {"lstm": 4, "gru": 3}.get(attrs["mode"], 1)
        hidden, size = attrs.get("projection_size") or 6, 6
        count = 0
        for layer in range(layers):
            width = 5 if layer == 0 else hidden * dirs
            count += dirs * (gates * size * (width + hidden) + 2 * gates * size)
            count += dirs * hidden * size if "projection_size" in attrs else 0
        arrays = {"data": rng.standard_normal((4, 3, 5)),
                  "parameters": rng.standard_normal(count) * 0.4,
                  "state": rng.standard_normal((layers * dirs, 3, hidden)) * 0.5}
        if attrs["mode"] == "lstm":
            arrays["state_cell"] = rng.standard_normal((layers * dirs, 3, size)) * 0.5
        inputs = {k: nd.array(v.astype(np.float32)) for k, v in arrays.items()}
        for value in inputs.values():
            value.attach_grad()
        saved = {f"in_{k}": v.asnumpy() for k, v in inputs.items()}
        if "projection_size" in attrs:  # "No training support for LSTM with projection on CPU"
            outs = nd.RNN(**inputs, state_size=size, state_outputs=True, **attrs)
            saved.update({f"out_{i}": o.asnumpy() for i, o in enumerate(outs)})
            np.savez(_path("rnn", f"{case}.npz"), attrs=json.dumps(attrs), **saved)
            continue
        with autograd.record():
            outs = nd.RNN(**inputs, state_size=size, state_outputs=True, **attrs)
        heads = [rng.standard_normal(o.shape).astype(np.float32) for o in outs]
        autograd.backward(outs, [nd.array(h) for h in heads])
        saved.update({f"out_{i}": o.asnumpy() for i, o in enumerate(outs)})
        saved.update({f"head_{i}": h for i, h in enumerate(heads)})
        saved.update({f"grad_{k}": v.grad.asnumpy() for k, v in inputs.items()})
        np.savez(_path("rnn", f"{case}.npz"), attrs=json.dumps(attrs), **saved)
    print("MXNet", mx.__version__, "wrote", len(RNN_CASES), "RNN cases")


# --- 5. real MXNet's record files ---------------------------------------------------------
def recordio_payloads() -> list[bytes]:
    """The records both frameworks write: empty, short, every length mod 4, and records
    holding the magic number at 4-byte boundaries (split into parts by the writer)."""
    rng = np.random.default_rng(7)
    magic = (0xCED7230A).to_bytes(4, "little")
    payloads = [b"", b"a", b"ab", b"abc", b"abcd", magic, b"wxyz" + magic + b"12",
                magic + b"mid" + b"\0" + magic + magic + b"end"]
    payloads += [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in (5, 64, 1001)]
    return payloads


def mxnet_recordio() -> None:
    """``plain.rec``, ``indexed.rec``/``.idx`` (keys 10, 20, ...) and ``packed.rec`` (each
    payload packed with an id and a label: a number, then arrays) written by MXNet 1.9.1,
    and the payloads as hex (``payloads.json``) for ``tests/test_recordio.py``."""
    import mxnet as mx

    payloads = recordio_payloads()
    writer = mx.recordio.MXRecordIO(_path("recordio", "plain.rec"), "w")
    for data in payloads:
        writer.write(data)
    writer.close()
    writer = mx.recordio.MXIndexedRecordIO(_path("recordio", "indexed.idx"),
                                          _path("recordio", "indexed.rec"), "w")
    for i, data in enumerate(payloads):
        writer.write_idx(10 * (i + 1), data)
    writer.close()
    writer = mx.recordio.MXRecordIO(_path("recordio", "packed.rec"), "w")
    for i, data in enumerate(payloads):
        label = 1.5 * i if i % 2 else np.arange(i, dtype=np.float32)
        writer.write(mx.recordio.pack((0, label, i, 2 * i), data))
    writer.close()
    with open(_path("recordio", "payloads.json"), "w") as file:
        json.dump([p.hex() for p in payloads], file)
    print("MXNet", mx.__version__, "wrote", len(payloads), "records per file")


# --- 6. real MXNet's deformable convolution ------------------------------------------------
DEFORMABLE_CASES = {
    "plain": {"kernel": (3, 3), "pad": (1, 1), "num_filter": 4},
    "strided": {"kernel": (3, 2), "stride": (2, 1), "dilate": (2, 1), "num_filter": 6,
                "num_deformable_group": 2, "num_group": 2, "no_bias": True},
}


def mxnet_deformable() -> None:
    """``contrib.DeformableConvolution`` on random data and fractional offsets (some taps
    outside the image, some in its last row or column): the output and the gradients of
    every input for a random head gradient (``tests/ops/test_deformable.py``)."""
    import mxnet as mx
    from mxnet import autograd, nd

    for case, attrs in DEFORMABLE_CASES.items():
        rng = np.random.default_rng(len(case))
        kh, kw = attrs["kernel"]
        stride, dilate = attrs.get("stride", (1, 1)), attrs.get("dilate", (1, 1))
        pad = attrs.get("pad", (0, 0))
        out_h = (7 + 2 * pad[0] - dilate[0] * (kh - 1) - 1) // stride[0] + 1
        out_w = (6 + 2 * pad[1] - dilate[1] * (kw - 1) - 1) // stride[1] + 1
        groups = attrs.get("num_deformable_group", 1)
        arrays = {"data": rng.standard_normal((2, 4, 7, 6)),
                  "offset": rng.uniform(-2.5, 2.5, (2, 2 * kh * kw * groups, out_h, out_w)),
                  "weight": rng.standard_normal((attrs["num_filter"],
                                                 4 // attrs.get("num_group", 1), kh, kw))}
        if not attrs.get("no_bias"):
            arrays["bias"] = rng.standard_normal(attrs["num_filter"])
        inputs = {k: nd.array(v.astype(np.float32)) for k, v in arrays.items()}
        for value in inputs.values():
            value.attach_grad()
        with autograd.record():
            out = nd.contrib.DeformableConvolution(**inputs, **attrs)
        head = rng.standard_normal(out.shape).astype(np.float32)
        out.backward(nd.array(head))
        saved = {f"in_{k}": v.asnumpy() for k, v in inputs.items()}
        saved.update({f"grad_{k}": v.grad.asnumpy() for k, v in inputs.items()})
        np.savez(_path("deformable", f"{case}.npz"), attrs=json.dumps(attrs), out=out.asnumpy(),
                 head=head, **saved)
    print("MXNet", mx.__version__, "wrote", len(DEFORMABLE_CASES), "deformable cases")


if __name__ == "__main__":
    steps = {"mxnet-writes": mxnet_writes, "hybridlab-writes": hybridlab_writes,
             "mxnet-reads": mxnet_reads, "mxnet-rnn": mxnet_rnn,
             "mxnet-recordio": mxnet_recordio, "mxnet-deformable": mxnet_deformable}
    if len(sys.argv) != 2 or sys.argv[1] not in steps:
        sys.exit(f"usage: python tools/mxnet_fixtures.py {{{'|'.join(steps)}}}")
    steps[sys.argv[1]]()
