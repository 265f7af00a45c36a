"""BatchNorm folding: in inference, a BatchNorm after a Convolution becomes the convolution's
own weight and bias.

::

    %3 = Convolution(%0, %1, %2)              %9 = var conv0_weight__folded
    %8 = BatchNorm(%3, %4, %5, %6, %7)  ==>   %10 = var conv0_bias__folded
                                              %3 = Convolution(%0, %9, %10)

Why it is exact: when predicting, BatchNorm uses its *moving* statistics, fixed numbers,
so per output channel ``c`` it is an affine map ``y = s[c] * (z - mean[c]) + beta[c]``
with ``s = gamma / sqrt(var + eps)``. The convolution is linear in its weight, so the
affine map moves into it::

    w'[c] = w[c] * s[c]                    (every weight of filter c)
    b'[c] = (b[c] - mean[c]) * s[c] + beta[c]

and one operator computes what two did: the pass over the activations that BatchNorm
cost (a read and a write of the whole feature map) is gone. While *training* BatchNorm
normalises with the batch's own statistics, which change every call, so nothing folds:
the pass reads its :class:`PassContext` and leaves a training graph untouched.

What the pass sees: the graph, not the parameters' values (a pass is a pure function of
the graph, and the values change when the parameters are loaded or trained). So, as the
layout pass does for transposed weights, it rewrites the convolution to read two new
inputs, ``<conv>_weight__folded`` and ``<conv>_bias__folded``, each a ``var`` whose
attribute ``folded_from`` names the parameters it is computed from; :func:`folded_value`
computes it. ``CachedOp`` makes them when the program first runs and keeps them with the
buffers they were made from (NOTE [Weights in the kernel's layout] in ``cached_op.py``):
made once in inference, made again only when a parameter gets a new buffer.

When (checked on the graph, never by name): a ``BatchNorm`` on axis 1 with one output,
whose data is output 0 of a ``Convolution`` that nothing else reads (nor the graph
returns), and whose weight, bias (if any), gamma, beta and moving statistics are all
graph inputs (``var``) of one floating dtype with known avals. It runs before
``lower_operators``, which would split BatchNorm into primitives.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping

import numpy as np

from hybridlab.graph.ir import Graph, Node, Value, call, rebuild, with_inputs
from hybridlab.graph.passes.context import Note, PassContext, PassResult
from hybridlab.graph.passes.derived import READERS, Derivation

FOLDED_FROM = "folded_from"  # the attribute of a var computed from other inputs by folding
FORMULA = ("w'[c] = w[c] * s[c],  b'[c] = (b[c] - mean[c]) * s[c] + beta[c],  "
           "s[c] = gamma[c] / sqrt(var[c] + eps)")


def fold_batchnorm(graph: Graph, context: PassContext) -> PassResult:
    """In inference, fold each ``Convolution -> BatchNorm`` pair into one Convolution reading
    folded weight and bias inputs (see the module docstring); in training, change nothing.
    Its note: the formula, and the first fold's arithmetic on real numbers."""
    if context.training:
        return PassResult(graph, [])
    readers = Counter(id(v.node) for n in graph.nodes for v in n.inputs)
    readers.update(id(v.node) for v in graph.outputs)
    pairs = {id(n.inputs[0].node): n for n in graph.nodes if _applies(n, readers)}
    if not pairs:
        return PassResult(graph, [])
    folded: dict[int, Node] = {}  # id(original BatchNorm) -> the convolution it became
    extra: list[Node] = []
    changes: list[str] = []

    def visit(node: Node, inputs: tuple[Value, ...]) -> Node | list[Value]:
        if id(node) in folded:  # a folded BatchNorm: its value is the convolution's
            return [folded[id(node)].out()]
        norm = pairs.get(id(node))
        node = with_inputs(node, inputs)
        if norm is None:
            return node
        weight, bias = _folded_inputs(node, norm)
        extra.extend((weight, bias))
        attrs = {**node.attr_dict, "no_bias": False}
        conv = call("Convolution", [inputs[0], weight.out(), bias.out()], attrs,
                    name=node.name, origin=node.origin)
        folded[id(norm)] = conv
        changes.append(f"folded {norm.name} (BatchNorm) into {node.name} (Convolution): "
                       f"reads {weight.name} and {bias.name}")
        return conv

    rewritten = rebuild(graph, visit)
    return PassResult(Graph(rewritten.nodes, rewritten.inputs + tuple(extra), rewritten.outputs),
                      changes, (_note(extra[0], len(pairs)),))


def _applies(node: Node, readers: Counter[int]) -> bool:
    if node.kind != "call" or node.op != "BatchNorm" or node.num_outputs != 1:
        return False
    data = node.inputs[0]
    conv = data.node
    if (conv.kind != "call" or conv.op != "Convolution" or data.index != 0
            or readers[id(conv)] != 1 or node.attr_dict["axis"] != 1 or conv.aval is None):
        return False
    params = [*conv.inputs[1:], *node.inputs[1:]]
    dtype = np.dtype(conv.aval[0].dtype)
    return (dtype.kind == "f" and all(v.node.kind == "var" and v.aval is not None
                                      and v.aval.dtype == dtype for v in params))


def _folded_inputs(conv: Node, norm: Node) -> tuple[Node, Node]:
    """The two new inputs: vars whose ``folded_from`` names, in :func:`folded_value`'s
    order, the weight, bias ("" without one), gamma, beta, moving mean and variance."""
    bias = "" if conv.attr_dict["no_bias"] else conv.inputs[2].node.name
    sources = (conv.inputs[1].node.name, bias, *(v.node.name for v in norm.inputs[1:]))
    attrs = norm.attr_dict
    recipe = (("eps", float(attrs["eps"])), ("fix_gamma", bool(attrs["fix_gamma"])))
    weight, gamma = conv.inputs[1], norm.inputs[1]
    assert weight.aval is not None and gamma.aval is not None, "_applies checked the avals"
    return (Node("var", attrs=((FOLDED_FROM, sources), ("part", "weight"), *recipe),
                 name=f"{conv.name}_weight__folded", aval=(weight.aval,)),
            Node("var", attrs=((FOLDED_FROM, sources), ("part", "bias"), *recipe),
                 name=f"{conv.name}_bias__folded", aval=(gamma.aval,)))


def scale(gamma: np.ndarray, var: np.ndarray, eps: float, fix_gamma: bool) -> np.ndarray:
    """``s[c] = gamma[c] / sqrt(var[c] + eps)`` (gamma taken as 1 with ``fix_gamma``)."""
    s: np.ndarray = (np.ones_like(gamma) if fix_gamma else gamma) / np.sqrt(
        var + np.asarray(eps, var.dtype))
    return s


def folded_value(part: str, eps: float, fix_gamma: bool, weight: np.ndarray,
                 bias: np.ndarray | None, gamma: np.ndarray, beta: np.ndarray, mean: np.ndarray,
                 var: np.ndarray) -> np.ndarray:
    """The folded ``part`` ("weight" or "bias") from its sources' values."""
    s = scale(gamma, var, eps, fix_gamma)
    if part == "weight":
        result: np.ndarray = weight * s.reshape(-1, *(1,) * (weight.ndim - 1))
        return result
    result = (-mean if bias is None else bias - mean) * s + beta
    return result


def recipe(node: Node) -> Derivation:
    """A folded input's sources, the function of their values that computes it, its label."""
    attrs: dict[str, Any] = dict(node.attrs)
    sources = tuple(attrs[FOLDED_FROM])

    def make(*values: Any) -> np.ndarray:
        return folded_value(attrs["part"], attrs["eps"], attrs["fix_gamma"], *values)

    return Derivation(sources, make, f"{sources[0]} with {sources[2].removesuffix('_gamma')} "
                                     f"folded")


READERS[FOLDED_FROM] = recipe  # NOTE [Derived inputs]


def _note(weight: Node, pairs: int) -> Note:
    """The pass explorer's note: the formula, and for one output channel of the first
    fold (``weight``, its folded weight input) the numbers before and after."""
    attrs: dict[str, Any] = dict(weight.attrs)
    sources, eps, fix_gamma = attrs[FOLDED_FROM], attrs["eps"], attrs["fix_gamma"]

    def on_values(values: Mapping[str, Any], channel: int) -> str | None:
        if any(name and name not in values for name in sources):
            return None
        arrays = {name: np.asarray(values[name]) for name in sources if name}
        w, gamma, beta, mean, var = (arrays[sources[i]] for i in (0, 2, 3, 4, 5))
        b = arrays.get(sources[1])  # None: no bias
        c, s = channel % len(w), scale(gamma, var, eps, fix_gamma)
        new_w, new_b = (folded_value(part, eps, fix_gamma, w, b, gamma, beta, mean, var)
                        for part in ("weight", "bias"))
        shift = 0.0 if b is None else b[c]
        return "\n".join([
            f"{sources[0]} with its BatchNorm, output channel {c}:",
            f"  s = {'1 (fix_gamma)' if fix_gamma else f'{gamma[c]:.6g}'} / "
            f"sqrt({var[c]:.6g} + {eps:g}) = {s[c]:.6g}",
            f"  w'[{c}] = w[{c}] * s: {_first(w[c])} -> {_first(new_w[c])}",
            f"  b' = ({shift:.6g} - {mean[c]:.6g}) * {s[c]:.6g} + {beta[c]:.6g} = "
            f"{new_b[c]:.6g}"])

    return Note(f"inference: BatchNorm's moving statistics are constants, so it folds into "
                f"the convolution ({pairs} pair(s) here)\n  {FORMULA}", on_values)


def _first(weights: Any, count: int = 3) -> str:
    return "[" + ", ".join(f"{v:.4g}" for v in np.ravel(weights)[:count]) + ", ...]"
