"""Graph walks shared by the tape (``autograd``) and the graph IR (``graph.ir``).

What this module teaches
------------------------
Reverse-mode differentiation and every compiler pass need the same thing: the nodes a set
of outputs depends on, each after the nodes it reads. That is a depth-first *postorder*.
It lives here, below both users, so the tape and the IR share one walk without one of
them importing the other. Nodes are anything; ``children(node)`` says what a node reads.
The walk is iterative (an explicit stack), so a deep chain of ops cannot overflow
Python's recursion limit.
"""

from __future__ import annotations

from typing import Callable, Iterable, Sequence, TypeVar

T = TypeVar("T")


def postorder(roots: Iterable[T], children: Callable[[T], Sequence[T]]) -> list[T]:
    """Every node reachable from ``roots``, each after its children (iterative DFS).

    Nodes are told apart by identity (``id``), so unhashable nodes work too.
    """
    order: list[T] = []
    seen: set[int] = set()
    for root in roots:
        stack = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                order.append(node)
                continue
            if id(node) in seen:
                continue
            seen.add(id(node))
            stack.append((node, True))
            stack.extend((c, False) for c in reversed(children(node)) if id(c) not in seen)
    return order


K = TypeVar("K")
G = TypeVar("G")


def reverse_mode(order: Sequence[T], grads: dict[K, G], outputs: Callable[[T], Sequence[K]],
                 inputs: Callable[[T], Sequence[K]],
                 vjp: Callable[[T, list[G | None]], Sequence[G | None]],
                 add: Callable[[K, G, G], G]) -> dict[K, G]:
    """Reverse-mode differentiation's one sweep, shared by the tape (arrays), the
    backward-graph builder (graph values) and the fused op's gradient (sub-program steps).

    ``order`` is a postorder (each node after what it reads); ``grads`` holds the seeds
    (the heads' gradients) by key and is filled in place. From the last node back, a node
    some of whose outputs have a gradient gets ``vjp(node, [gradient or None per output])``
    -- one gradient or None per input -- and each is added into its input's key
    (``add(key, previous, new)``: a value used twice receives the sum).
    """
    for node in reversed(order):
        found = [grads.get(key) for key in outputs(node)]
        if all(g is None for g in found):
            continue
        for key, grad in zip(inputs(node), vjp(node, found)):
            if grad is not None:
                previous = grads.get(key)
                grads[key] = grad if previous is None else add(key, previous, grad)
    return grads
