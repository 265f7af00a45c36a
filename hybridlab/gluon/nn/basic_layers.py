"""The basic layers: containers, ``Dense``, ``Dropout``, ``Flatten``, ``BatchNorm``, lambdas.

What this module teaches
------------------------
``Sequential`` and ``HybridSequential`` only call their children in order; ``Dense`` is
one ``F.FullyConnected`` whose weight shape waits for the first input (``infer_shape``).

``Dropout`` and ``BatchNorm`` behave differently in training (``autograd.record()``)
and prediction. A hybridized block compiles one program per mode, so the Python test
``autograd.is_training()`` below is decided once per program, which is exactly right.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

import numpy as np

from hybridlab import autograd
from hybridlab.errors import ShapeError
from hybridlab.gluon import _trace
from hybridlab.gluon._trace import known_shape_of as _known_shape
from hybridlab.gluon._trace import shape_of as _shape
from hybridlab.gluon.block import Block, HybridBlock
from hybridlab.gluon.nn.activations import Activation
from hybridlab.ops.nn import variance_from_invstd


class Sequential(Block):
    """Children run one after another: ``net.add(a, b)``; ``net(x) == b(a(x))``."""

    def add(self: Block, *blocks: Block) -> None:  # (HybridSequential shares it)
        for block in blocks:
            self.register_child(block)

    def forward(self, x: Any) -> Any:
        for block in self._children.values():
            x = block(x)
        return x

    def __getitem__(self, index: int | slice) -> Block:
        """One child, or for a slice a new container of the same kind (as MXNet 1.x)."""
        chosen = list(self._children.values())[index]
        if not isinstance(chosen, list):
            return chosen
        net = type(self)(prefix=self.prefix)
        with net.name_scope():
            net.add(*chosen)
        return net

    def __len__(self) -> int:
        return len(self._children)

    def hybridize(self, active: bool = True, **flags: Any) -> None:
        """Hybridize the children; with only HybridBlocks inside, say which class compiles."""
        if self._children and all(isinstance(c, HybridBlock) for c in self._children.values()):
            warnings.warn(f"all children of the Sequential {self.name!r} are HybridBlocks: "
                          f"use nn.HybridSequential to compile them as one program",
                          stacklevel=2)
        super().hybridize(active, **flags)


class HybridSequential(HybridBlock):
    """A :class:`Sequential` whose children are all HybridBlocks, so it can be compiled."""

    add = Sequential.add
    __getitem__ = Sequential.__getitem__
    __len__ = Sequential.__len__

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        for block in self._children.values():
            x = block(x)
        return x


class Dense(HybridBlock):
    """``activation(dot(x, weight.T) + bias)``; ``flatten`` folds all but the first axis."""

    def __init__(self, units: int, activation: str | None = None, use_bias: bool = True,
                 flatten: bool = True, dtype: Any = "float32", weight_initializer: Any = None,
                 bias_initializer: Any = "zeros", in_units: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._units, self._flatten = units, flatten
        with self.name_scope():
            self.weight = self.params.get("weight", shape=(units, in_units), dtype=dtype,
                                          init=weight_initializer)
            self.bias = self.params.get("bias", shape=(units,), dtype=dtype,
                                        init=bias_initializer) if use_bias else None
            self.act = Activation(activation, prefix=activation + "_") if activation else None

    def infer_shape(self, x: Any, *args: Any) -> None:
        shape = _shape(x)
        in_units = int(np.prod(shape[1:])) if self._flatten else shape[-1]
        self.weight.shape = (self._units, in_units)

    def hybrid_forward(self, F: Any, x: Any, weight: Any, bias: Any = None) -> Any:
        inputs = (x, weight) if bias is None else (x, weight, bias)
        out = F.FullyConnected(*inputs, no_bias=bias is None, num_hidden=self._units,
                               flatten=self._flatten, name="fwd")
        return self.act(out) if self.act is not None else out

    def __repr__(self) -> str:
        shape = self.weight.shape
        return f"Dense({shape[1] or None} -> {shape[0]}, {self.act or 'linear'})"  # type: ignore[index]


class Dropout(HybridBlock):
    """Zero a fraction ``rate`` of the inputs while training; identity when predicting."""

    def __init__(self, rate: float, axes: tuple = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._rate, self._axes = rate, axes

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return F.Dropout(x, p=self._rate, axes=self._axes, name="fwd")

    def __repr__(self) -> str:
        return f"Dropout(p = {self._rate}, axes={self._axes})"  # MXNet's text, spaces too


class Flatten(HybridBlock):
    """Reshape ``(N, ...)`` to ``(N, -1)``."""

    def hybrid_forward(self, F: Any, x: Any) -> Any:
        return F.Flatten(x)

    def __repr__(self) -> str:
        return "Flatten"  # MXNet's text, without brackets


class BatchNorm(HybridBlock):
    """Normalise each channel (``axis``) with batch statistics while training.

    ``running_mean``/``running_var`` are *auxiliary states*: not trained by gradients
    (``grad_req='null'``) but updated as ``running = momentum*running + (1-momentum)*batch``
    on every training call, and used instead of batch statistics when predicting.
    """

    def __init__(self, axis: int = 1, momentum: float = 0.9, epsilon: float = 1e-5,
                 center: bool = True, scale: bool = True, use_global_stats: bool = False,
                 in_channels: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._axis, self._momentum, self._eps = axis, momentum, epsilon
        self._use_global_stats, self._fix_gamma = use_global_stats, not scale
        with self.name_scope():
            get = self.params.get
            self.gamma = get("gamma", shape=(in_channels,), init="ones",
                             grad_req="write" if scale else "null")
            self.beta = get("beta", shape=(in_channels,), init="zeros",
                            grad_req="write" if center else "null")
            self.running_mean = get("running_mean", shape=(in_channels,), init="zeros",
                                    differentiable=False)
            self.running_var = get("running_var", shape=(in_channels,), init="ones",
                                   differentiable=False)

    def infer_shape(self, x: Any, *args: Any) -> None:
        self._check_input(x)
        channels = _shape(x)[self._axis]
        for param in (self.gamma, self.beta, self.running_mean, self.running_var):
            param.shape = (channels,)

    def __repr__(self) -> str:  # MXNet's text
        return (f"BatchNorm(axis={self._axis}, eps={self._eps}, momentum={self._momentum}, "
                f"fix_gamma={self._fix_gamma}, use_global_stats={self._use_global_stats}, "
                f"in_channels={self.gamma.shape[0] or None})")  # type: ignore[index]

    def _check_input(self, x: Any) -> None:
        shape = _known_shape(x)
        if shape is not None and not -len(shape) <= self._axis < len(shape):
            raise ShapeError(
                f"BatchNorm {self.name!r}: axis={self._axis} is the channel axis, but the "
                f"input has shape {shape}. Fix: give (batch, channels, ...) input, e.g. "
                f"x.reshape((-1, 1)) for one feature, or choose another axis")

    def hybrid_forward(self, F: Any, x: Any, gamma: Any, beta: Any, running_mean: Any,
                       running_var: Any) -> Any:
        # MXNet's one BatchNorm operator; while training it also returns the batch's
        # statistics, from which the running ones move (the operator updates nothing)
        self._check_input(x)
        training = autograd.is_training() and not self._use_global_stats
        result = F.BatchNorm(x, gamma, beta, running_mean, running_var, eps=self._eps,
                             momentum=self._momentum, fix_gamma=self._fix_gamma,
                             use_global_stats=self._use_global_stats, axis=self._axis,
                             output_mean_var=training, name="fwd")
        if not training:
            return result
        out, mean, invstd = result  # (MXNet's third output: 1 / sqrt(var + eps))
        self._update(F, self.running_mean, running_mean, mean)
        self._update(F, self.running_var, running_var,
                     variance_from_invstd(F, invstd, self._eps))
        return out

    def _update(self, F: Any, param: Any, running: Any, batch: Any) -> None:
        """Move the running statistic towards the batch's (no gradient flows through it)."""
        keep = self._momentum
        if hasattr(batch, "list_outputs"):
            # traced: the compiled program returns the new value as an extra output, which
            # the block copies into the parameter after each training call. (A Symbol call
            # outside hybridize() only builds a graph: there is nothing to update.)
            frame = _trace.current()
            if frame is not None:
                frame.aux_updates.append((param, running * keep + batch * (1 - keep)))
            return
        # run imperatively, nd.BatchNorm itself moved the statistics in place (as MXNet's)


class Lambda(Block):
    """Wrap a function of NDArrays (or the name of an ``nd`` operator) as a Block."""

    def __init__(self, function: Callable | str, prefix: str | None = None) -> None:
        super().__init__(prefix=prefix)
        self._func = function

    def forward(self, *args: Any) -> Any:
        from hybridlab import ndarray
        function = getattr(ndarray, self._func) if isinstance(self._func, str) else self._func
        return function(*args)


class HybridLambda(HybridBlock):
    """Wrap ``function(F, x, ...)`` (or the name of an ``F`` operator) as a HybridBlock."""

    def __init__(self, function: Callable | str, prefix: str | None = None) -> None:
        super().__init__(prefix=prefix)
        self._func = function

    def hybrid_forward(self, F: Any, x: Any, *args: Any) -> Any:
        if isinstance(self._func, str):  # an operator name: the same op in nd and sym
            return getattr(F, self._func)(x, *args)
        return self._func(F, x, *args)


class Embedding(HybridBlock):
    """Row ``x[i]`` of a learned ``(input_dim, output_dim)`` table for each index in ``x``.

    ``sparse_grad`` is accepted for MXNet's code; the gradient is stored densely (the same
    values: zero rows for indices not seen)."""

    def __init__(self, input_dim: int, output_dim: int, dtype: Any = "float32",
                 weight_initializer: Any = None, sparse_grad: bool = False,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._attrs = {"input_dim": input_dim, "output_dim": output_dim,
                       "dtype": np.dtype(dtype).name}
        with self.name_scope():
            self.weight = self.params.get("weight", shape=(input_dim, output_dim),
                                          dtype=dtype, init=weight_initializer)

    def hybrid_forward(self, F: Any, x: Any, weight: Any) -> Any:
        return F.Embedding(x, weight, name="fwd", **self._attrs)

    def __repr__(self) -> str:
        return (f"Embedding({self._attrs['input_dim']} -> {self._attrs['output_dim']}, "
                f"{self._attrs['dtype']})")


def _normalise(F: Any, x: Any, axes: tuple[int, ...], eps: float) -> Any:
    """``(x - mean) / sqrt(var + eps)`` over ``axes`` (the statistics of this input)."""
    centred = F.broadcast_sub(x, F.mean(x, axis=axes, keepdims=True))
    return F.broadcast_div(centred, F.sqrt(F.mean(F.square(centred), axis=axes,
                                                  keepdims=True) + eps))


class _Norm(HybridBlock):
    """A normalisation with a learned ``gamma`` and ``beta`` per channel (or group): the
    channels are along ``axis``, where a deferred size is read."""

    def __init__(self, size: int, epsilon: float, center: bool, scale: bool,
                 beta_initializer: Any, gamma_initializer: Any, axis: int = 1,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._eps, self._axis = epsilon, axis
        with self.name_scope():
            self.gamma = self.params.get("gamma", shape=(size,), init=gamma_initializer,
                                         grad_req="write" if scale else "null")
            self.beta = self.params.get("beta", shape=(size,), init=beta_initializer,
                                        grad_req="write" if center else "null")

    def infer_shape(self, x: Any, *args: Any) -> None:
        self.gamma.shape = self.beta.shape = (_shape(x)[self._axis],)

    def _affine(self, F: Any, x: Any, gamma: Any, beta: Any, axis: int) -> Any:
        """``x * gamma + beta`` with both along ``axis`` of ``x``."""
        shape = [1] * len(_shape(x))
        shape[axis] = -1
        return F.broadcast_add(F.broadcast_mul(x, F.reshape(gamma, shape=tuple(shape))),
                               F.reshape(beta, shape=tuple(shape)))


class LayerNorm(_Norm):
    """Normalise each sample over ``axis`` (the features), then scale and shift."""

    def __init__(self, axis: int = -1, epsilon: float = 1e-5, center: bool = True,
                 scale: bool = True, beta_initializer: Any = "zeros",
                 gamma_initializer: Any = "ones", in_channels: int = 0, **kwargs: Any) -> None:
        super().__init__(in_channels, epsilon, center, scale, beta_initializer,
                         gamma_initializer, axis, **kwargs)

    def hybrid_forward(self, F: Any, x: Any, gamma: Any, beta: Any) -> Any:
        axis = self._axis % len(_shape(x))
        return self._affine(F, _normalise(F, x, (axis,), self._eps), gamma, beta, axis)


class InstanceNorm(_Norm):
    """Normalise each sample's each channel (``axis``) over its other axes."""

    def __init__(self, axis: int = 1, epsilon: float = 1e-5, center: bool = True,
                 scale: bool = False, beta_initializer: Any = "zeros",
                 gamma_initializer: Any = "ones", in_channels: int = 0, **kwargs: Any) -> None:
        super().__init__(in_channels, epsilon, center, scale, beta_initializer,
                         gamma_initializer, axis, **kwargs)

    def hybrid_forward(self, F: Any, x: Any, gamma: Any, beta: Any) -> Any:
        ndim = len(_shape(x))
        axis = self._axis % ndim
        axes = tuple(a for a in range(1, ndim) if a != axis)
        return self._affine(F, _normalise(F, x, axes, self._eps), gamma, beta, axis)


class GroupNorm(_Norm):
    """Split the channels (axis 1) into ``num_groups`` groups and normalise each group of
    each sample; ``gamma`` and ``beta`` are one per group (MXNet 1.x)."""

    def __init__(self, num_groups: int = 1, epsilon: float = 1e-5, center: bool = True,
                 scale: bool = True, beta_initializer: Any = "zeros",
                 gamma_initializer: Any = "ones", **kwargs: Any) -> None:
        super().__init__(num_groups, epsilon, center, scale, beta_initializer,
                         gamma_initializer, **kwargs)
        self._groups = num_groups

    def hybrid_forward(self, F: Any, x: Any, gamma: Any, beta: Any) -> Any:
        grouped = F.reshape(x, shape=(0, self._groups, -1))
        out = self._affine(F, _normalise(F, grouped, (2,), self._eps), gamma, beta, 1)
        return F.reshape_like(out, x)
