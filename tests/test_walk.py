"""The shared walks: postorder, and the reverse sweep the three differentiators use."""

from __future__ import annotations

from hybridlab.walk import postorder, reverse_mode


def test_reverse_mode_sums_the_gradients_of_a_value_used_twice():
    # f = (x * y) + x at x=3, y=5: df/dx = y + 1 = 6, df/dy = x = 3
    values = {"x": 3.0, "y": 5.0, "m": 15.0, "f": 18.0}
    nodes = {"m": ("mul", ["x", "y"]), "f": ("add", ["m", "x"])}
    order = postorder(["f"], lambda n: nodes[n][1] if n in nodes else [])
    assert order == ["x", "y", "m", "f"]

    def vjp(node, found):
        op, args = nodes.get(node, (None, []))
        (g,) = found
        if op == "mul":
            return [g * values[args[1]], g * values[args[0]]]
        return [g] * len(args)

    added = []
    grads = reverse_mode(order, {"f": 1.0}, lambda n: [n], lambda n: nodes.get(n, (0, []))[1],
                         vjp, lambda key, a, b: added.append(key) or a + b)
    assert grads == {"f": 1.0, "m": 1.0, "x": 6.0, "y": 3.0} and added == ["x"]


def test_reverse_mode_skips_nodes_no_gradient_reached():
    calls = []
    nodes = {"a": ["x"], "b": ["x"]}
    reverse_mode(["x", "a", "b"], {"a": 1.0}, lambda n: [n], lambda n: nodes.get(n, []),
                 lambda n, found: calls.append(n) or [found[0]], lambda k, a, b: a + b)
    assert calls == ["a", "x"]  # b: no gradient reached it (x is reached, through a)
