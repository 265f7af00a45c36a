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
