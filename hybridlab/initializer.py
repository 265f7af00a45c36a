"""Initializers (``mx.init``): how a parameter gets its first value.

What this module teaches
------------------------
An initializer is a function ``shape, dtype -> NDArray``. The values are drawn with
``nd.random.*`` so they come from hybridlab's seeded stream: ``mx.random.seed(42)``
gives the same network every run, whatever the engine.

Which initializer a parameter gets (the rule MXNet uses):
0. an ``init`` given to that one parameter, ``param.initialize(init)``, else
1. the parameter's own ``init`` (``Dense`` passes ``bias_initializer='zeros'``,
   ``BatchNorm`` passes ``'ones'`` for ``gamma``), else
2. the ``init`` given to ``net.initialize(init)``, whose default is ``Uniform(0.07)``.
There is no guessing from name suffixes such as ``_weight``.
"""

from __future__ import annotations

import json
import math
import numbers
from typing import Any

import numpy as np


class Initializer:
    """Base class: ``init(shape, dtype)`` returns a new NDArray.

    An initializer written MXNet's way overrides ``_init_weight(self, name, arr)`` and
    fills ``arr`` in place instead (see :func:`run`). ``dumps()`` describes it as MXNet's
    JSON, ``["uniform", {"scale": 0.07}]`` -- what a Symbol variable's ``init`` attribute
    holds and :func:`create_from_config` reads back."""

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs  # the constructor's arguments, as given (dumps)

    def dumps(self) -> str:
        return json.dumps([type(self).__name__.lower(), getattr(self, "_kwargs", {})])

    def __call__(self, shape: tuple[int, ...], dtype: Any = "float32") -> Any:
        from hybridlab import ndarray as nd
        arr = nd.zeros(shape, dtype=dtype)  # type: ignore[misc]  # (nd's generated names)
        self._init_weight("", arr)
        return arr

    def _init_weight(self, name: str, arr: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define __call__(self, shape, "
                                  f"dtype) or, as in MXNet, _init_weight(self, name, arr)")

    def _public(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._public().items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other: object) -> bool:  # Constant(-10) == Constant(-10), as in MXNet
        return type(self) is type(other) and self._public() == other._public()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(repr(self))


def _number(value: Any, what: str, example: str) -> float:
    """``value`` if it is a real number; a clear TypeError now rather than deep in numpy
    later (the Trainer checks its hyperparameters with it too)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be a number, got {value!r} ({type(value).__name__}); "
                        f"e.g. {example}")
    return float(value)


class Uniform(Initializer):
    """Values drawn uniformly from ``[-scale, scale]`` (MXNet's default, scale 0.07)."""

    def __init__(self, scale: float = 0.07) -> None:
        super().__init__(scale=scale)
        self.scale = _number(scale, "mx.init.Uniform(scale)", "mx.init.Uniform(0.07)")

    def __call__(self, shape: tuple[int, ...], dtype: Any = "float32") -> Any:
        from hybridlab import ndarray as nd
        return nd.random.uniform(-self.scale, self.scale, shape=shape, dtype=dtype)  # type: ignore[attr-defined]


class Normal(Initializer):
    """Values drawn from a normal distribution with mean 0 and standard deviation ``sigma``."""

    def __init__(self, sigma: float = 0.01) -> None:
        super().__init__(sigma=sigma)
        self.sigma = _number(sigma, "mx.init.Normal(sigma)", "mx.init.Normal(0.01)")

    def __call__(self, shape: tuple[int, ...], dtype: Any = "float32") -> Any:
        from hybridlab import ndarray as nd
        return nd.random.normal(0.0, self.sigma, shape=shape, dtype=dtype)  # type: ignore[attr-defined]


class Xavier(Initializer):
    """Glorot & Bengio: keep the variance of activations equal across layers.

    ``factor_type`` chooses the fan (``'avg'``, ``'in'``, ``'out'``); the scale is
    ``sqrt(magnitude / fan)``. For a (out, in, kh, kw) kernel, fans count kh*kw too.
    """

    def __init__(self, rnd_type: str = "uniform", factor_type: str = "avg",
                 magnitude: float = 3.0) -> None:
        if rnd_type not in ("uniform", "gaussian") or factor_type not in ("avg", "in", "out"):
            raise ValueError("Xavier: rnd_type is 'uniform' or 'gaussian', factor_type is "
                             f"'avg', 'in' or 'out'; got {rnd_type!r}, {factor_type!r}")
        super().__init__(rnd_type=rnd_type, factor_type=factor_type, magnitude=magnitude)
        self.rnd_type, self.factor_type = rnd_type, factor_type
        self.magnitude = _number(magnitude, "mx.init.Xavier(magnitude)", "magnitude=3")

    def __call__(self, shape: tuple[int, ...], dtype: Any = "float32") -> Any:
        from hybridlab import ndarray as nd
        if len(shape) < 2:
            raise ValueError(f"Xavier needs a weight with at least 2 dimensions, got {shape}")
        receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1
        fan_in, fan_out = shape[1] * receptive, shape[0] * receptive
        fan = {"avg": (fan_in + fan_out) / 2.0, "in": fan_in, "out": fan_out}[self.factor_type]
        scale = math.sqrt(self.magnitude / fan)
        if self.rnd_type == "uniform":
            return nd.random.uniform(-scale, scale, shape=shape, dtype=dtype)  # type: ignore[attr-defined]
        return nd.random.normal(0.0, scale, shape=shape, dtype=dtype)  # type: ignore[attr-defined]


class Constant(Initializer):
    """Every element equal to ``value``; or ``value`` itself, an array broadcast to the shape."""

    def __init__(self, value: Any) -> None:
        super().__init__(value=value)
        if hasattr(value, "shape") or isinstance(value, (list, tuple)):
            self.value = value  # an array (NDArray, numpy, nested list), as MXNet accepts
        else:
            self.value = _number(value, "mx.init.Constant(value)", "mx.init.Constant(0.5)")

    def __call__(self, shape: tuple[int, ...], dtype: Any = "float32") -> Any:
        from hybridlab import ndarray as nd
        if isinstance(self.value, float):
            return nd.full(shape, self.value, dtype=dtype)  # type: ignore[misc]
        value = self.value.asnumpy() if hasattr(self.value, "asnumpy") else self.value
        try:
            return nd.array(np.broadcast_to(np.asarray(value, dtype=dtype), shape))
        except ValueError:
            raise ValueError(f"mx.init.Constant: a value of shape {np.shape(value)} cannot "
                             f"fill a parameter of shape {shape}") from None

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and np.array_equal(
            np.asarray(getattr(self.value, "asnumpy", lambda: self.value)()),
            np.asarray(getattr(other.value, "asnumpy", lambda: other.value)()))  # type: ignore[attr-defined]

    __hash__ = Initializer.__hash__

    def dumps(self) -> str:
        """An array value is written as nested lists (JSON has no arrays)."""
        value = self._kwargs.get("value")
        if value is not None and not np.isscalar(value):
            self._kwargs["value"] = np.asarray(getattr(value, "asnumpy", lambda: value)()
                                               ).tolist()
        return super().dumps()


class Zero(Constant):
    """All zeros (biases, BatchNorm's ``beta`` and ``running_mean``)."""

    def __init__(self) -> None:
        super().__init__(0.0)
        self._kwargs = {}


class One(Constant):
    """All ones (BatchNorm's ``gamma`` and ``running_var``)."""

    def __init__(self) -> None:
        super().__init__(1.0)
        self._kwargs = {}


class LSTMBias(Initializer):
    """Zeros, except the forget gate's block of an LSTM's bias: ``forget_bias`` (MXNet's
    gate order input, forget, candidate, output), so a new LSTM starts by remembering."""

    def __init__(self, forget_bias: float = 1.0) -> None:
        super().__init__(forget_bias=forget_bias)
        self.forget_bias = _number(forget_bias, "mx.init.LSTMBias(forget_bias)",
                                   "mx.init.LSTMBias(1.0)")

    def __call__(self, shape: tuple[int, ...], dtype: Any = "float32") -> Any:
        from hybridlab import ndarray as nd
        values = np.zeros(shape, dtype)
        quarter = shape[0] // 4
        values[quarter:2 * quarter] = self.forget_bias
        return nd.array(values, dtype=dtype)


class Bilinear(Initializer):
    """A bilinear interpolation kernel for each filter of a (N, C, H, W) weight: a
    transposed convolution initialised so that it upsamples (FCN, Long et al.)."""

    def _init_weight(self, name: str, arr: Any) -> None:
        height, width = arr.shape[2], arr.shape[3]
        factor = math.ceil(width / 2.0)
        centre = (2 * factor - 1 - factor % 2) / (2.0 * factor)
        x, y = np.arange(width), np.arange(height)
        rows = 1 - np.abs(y / factor - centre)
        columns = 1 - np.abs(x / factor - centre)
        arr[:] = np.broadcast_to(rows[:, None] * columns[None, :], arr.shape)


class MSRAPrelu(Xavier):
    """He et al.'s initialisation for (P)ReLU layers: Gaussian, variance
    ``2 / ((1 + slope**2) * fan)``."""

    def __init__(self, factor_type: str = "avg", slope: float = 0.25) -> None:
        super().__init__("gaussian", factor_type, 2.0 / (1 + slope ** 2))
        self._kwargs = {"factor_type": factor_type, "slope": slope}


class Orthogonal(Initializer):
    """An orthogonal matrix (of the weight flattened to 2-D), times ``scale`` (Saxe et al.)."""

    def __init__(self, scale: float = 1.414, rand_type: str = "uniform") -> None:
        super().__init__(scale=scale, rand_type=rand_type)
        self.scale, self.rand_type = _number(scale, "mx.init.Orthogonal(scale)", "1.414"), \
            rand_type

    def _init_weight(self, name: str, arr: Any) -> None:
        rows, columns = arr.shape[0], int(np.prod(arr.shape[1:]))
        from hybridlab import ndarray
        nd: Any = ndarray  # (its operators are generated from the registry)
        draw = nd.random.uniform(-1, 1, shape=(rows, columns)) if self.rand_type == "uniform" \
            else nd.random.normal(0, 1, shape=(rows, columns))
        u, _, v = np.linalg.svd(draw.asnumpy(), full_matrices=False)
        arr[:] = (self.scale * (u if u.shape == (rows, columns) else v)).reshape(arr.shape)


_BY_NAME = {"zeros": Zero, "zero": Zero, "ones": One, "one": One, "uniform": Uniform,
            "normal": Normal, "xavier": Xavier, "constant": Constant, "bilinear": Bilinear,
            "lstmbias": LSTMBias, "msraprelu": MSRAPrelu, "orthogonal": Orthogonal}


def register(klass: type) -> type:
    """``@mx.init.register``: ``create_from_config`` finds the class by its lower-case name."""
    _BY_NAME[klass.__name__.lower()] = klass
    return klass


def create_from_config(text: str) -> Initializer:
    """An initializer from MXNet's JSON, ``["constant", {"value": 0.25}]`` (a Symbol
    variable's ``init`` attribute, written by ``dumps``)."""
    try:
        name, kwargs = json.loads(text)
        klass = _BY_NAME[str(name).lower()]
    except (ValueError, TypeError, KeyError):
        raise ValueError(f"{text!r} is not an initializer's JSON such as '[\"uniform\", "
                         f"{{\"scale\": 0.07}}]' (known names: {sorted(_BY_NAME)})") from None
    made: Initializer = klass(**kwargs)
    return made


_MXNET_DEFAULTS = {"bias": "zeros", "beta": "zeros", "gamma": "ones", "running_mean": "zeros",
                   "running_var": "ones", "moving_mean": "zeros", "moving_var": "ones"}


def run(init: Initializer, name: str, shape: tuple[int, ...], dtype: Any) -> Any:
    """The first value of parameter ``name`` from ``init``. An initializer written MXNet's
    way (overriding ``_init_weight``) is dispatched by the name's suffix as MXNet does:
    ``*weight`` (and any other name) -> ``_init_weight``, biases and BatchNorm's
    statistics -> zeros or ones (its ``_init_bias``/``_init_gamma`` ... when it defines them)."""
    if type(init)._init_weight is Initializer._init_weight or type(init).__call__ \
            is not Initializer.__call__:
        return init(shape, dtype)
    from hybridlab import ndarray as nd
    arr = nd.zeros(shape, dtype=dtype)  # type: ignore[misc]  # (nd's generated names)
    suffix = next((s for s in _MXNET_DEFAULTS if name.endswith(s)), None)
    method = getattr(init, f"_init_{suffix}", None) if suffix else init._init_weight
    if method is not None:
        method(name, arr)
    elif _MXNET_DEFAULTS[suffix] == "ones":  # type: ignore[index]
        arr[:] = 1
    return arr


def create(init: Initializer | str | None) -> Initializer | None:
    """Accept an Initializer, one of the names MXNet accepts (``'zeros'``), or None."""
    if init is None or isinstance(init, Initializer):
        return init
    if isinstance(init, str) and init.lower() in _BY_NAME:
        return _BY_NAME[init.lower()]()
    raise ValueError(f"unknown initializer {init!r}; use an mx.init object such as "
                     f"mx.init.Normal(0.01) or one of {sorted(_BY_NAME)}")
