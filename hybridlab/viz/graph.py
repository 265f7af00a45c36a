"""Drawing computation graphs: Symbols, compiler graphs and hybridized blocks.

What this module teaches
------------------------
A symbolic program *is* a graph, so the best way to read one is to look at it. Every
node is drawn with its operator and its inferred type (``float32[1,256]``); inputs,
parameters and constants have their own shapes so the data flow stands out; operators
are coloured by what they do to data (``OpDef.kind``: elementwise, broadcast, reduce,
opaque) -- the fact the fusion pass asks for -- never by a list of op names (MXNet's
``plot_network`` used an if/elif chain on names and guessed weights from ``_weight``).

Invariants
----------
* Deterministic: node ids are ``n0, n1, ...`` in the graph's topological order and edges
  are emitted in input order, so two drawings of one graph have identical DOT text.
* Reads only: the graph is never modified; graphviz is imported inside functions.
* Without the ``dot`` program a drawing still has its DOT text (``.source``); rendering
  raises :class:`~hybridlab.errors.GraphvizNotFoundError`, one line with the install fix.
"""

from __future__ import annotations

from typing import Any

from hybridlab.errors import GraphvizNotFoundError

KIND_COLOURS = {  # a colour-blind-safe pastel set, one per OpDef.kind
    "elementwise": "#b3e2cd",
    "broadcast": "#cbd5e8",
    "reduce": "#fdcdac",
    "opaque": "#f4cae4",
}
LEAF_STYLES = {  # how the non-call nodes look
    "input": {"shape": "oval", "style": "filled", "fillcolor": "#ffffb3"},
    "param": {"shape": "box", "style": "filled,dashed", "fillcolor": "#f2f2f2",
              "fontsize": "9"},
    "const": {"shape": "note", "style": "filled", "fillcolor": "#f2f2f2", "fontsize": "9"},
    "output": {"shape": "plaintext"},
}
INSTALL_HINT = ("the graphviz 'dot' program is not installed; install it with "
                "`apt-get install graphviz` or `conda install python-graphviz` "
                "(the DOT text is still available as .source)")


def graphviz_class() -> type:
    """A ``graphviz.Digraph`` whose rendering failures say how to install ``dot``."""
    global _DIGRAPH
    if _DIGRAPH is None:
        import graphviz

        def explained(method: Any) -> Any:
            def call(self: Any, *args: Any, **kwargs: Any) -> Any:
                try:
                    return method(self, *args, **kwargs)
                except graphviz.ExecutableNotFound:  # one line, not graphviz's traceback
                    raise GraphvizNotFoundError(INSTALL_HINT) from None
            return call

        class Digraph(graphviz.Digraph):
            pipe = explained(graphviz.Digraph.pipe)
            render = explained(graphviz.Digraph.render)

            def _repr_mimebundle_(self, include: Any = None, exclude: Any = None,
                                  **options: Any) -> dict[str, str]:
                try:  # Jupyter displays a bare Digraph (plot_network's result) this way
                    return super()._repr_mimebundle_(include, exclude, **options)
                except GraphvizNotFoundError as err:
                    return {"text/plain": str(err)}

        _DIGRAPH = Digraph
    return _DIGRAPH


_DIGRAPH: type | None = None


# ---------------------------------------------------------------------------------------
# Graph -> DOT
# ---------------------------------------------------------------------------------------

def to_dot(graph: Any, title: str = "plot", params: Any = (), node_attrs: dict | None = None,
           hide_weights: bool = False) -> Any:
    """Draw a ``graph.ir.Graph``; ``params`` names the var nodes that are parameters."""
    heading = {} if title == "plot" else {"label": title, "labelloc": "t", "fontsize": "12"}
    dot = graphviz_class()(name=title, graph_attr={"rankdir": "TB", "nodesep": "0.25",
                                                    "ranksep": "0.3", **heading},
                           node_attr={"fontname": "Helvetica", "fontsize": "10",
                                      "height": "0.3", **(node_attrs or {})},
                           edge_attr={"arrowsize": "0.6", "color": "#555555"})
    roles = {id(n): ("param" if n.name in set(params) else "input") for n in graph.inputs}
    hidden = {id(n) for n in graph.inputs if roles[id(n)] == "param"} if hide_weights else set()
    edges: list[tuple[str, str]] = []
    names = _draw_nodes(dot, graph, "n", {}, roles, hidden, edges)
    for index, value in enumerate(graph.outputs):
        dot.node(f"out{index}", f"output {index}", **LEAF_STYLES["output"])
        edges.append((names[id(value.node)], f"out{index}"))
    for tail, head in edges:  # emitted last, at the top level, so clusters keep their nodes
        dot.edge(tail, head)
    return dot


def _draw_nodes(target: Any, graph: Any, prefix: str, bound: dict, roles: dict, hidden: set,
                edges: list) -> dict[int, str]:
    """Add ``graph``'s nodes to ``target``; returns id(node) -> DOT id (``bound`` first)."""
    names = dict(bound)
    for position, node in enumerate(graph.nodes):
        if id(node) in names or id(node) in hidden:
            continue
        dot_id = f"{prefix}{position}"
        body = _subgraph(node)
        if body is not None:
            names[id(node)] = _draw_cluster(target, node, body, dot_id, names, edges)
            continue
        names[id(node)] = dot_id
        target.node(dot_id, _label(node), **_style(node, roles))
        edges.extend((names[id(v.node)], dot_id) for v in node.inputs if id(v.node) in names)
    return names


def _draw_cluster(target: Any, node: Any, body: Any, dot_id: str, names: dict,
                  edges: list) -> str:
    """A fused node: its sub-program drawn inside a dashed box, wired to the outer graph."""
    bound = {id(var): names[id(v.node)] for var, v in zip(body.inputs, node.inputs)}
    with target.subgraph(name=f"cluster_{dot_id}") as cluster:
        cluster.attr(label=f"fused: {node.name}", style="rounded,dashed", color="#777777",
                     fontsize="9")
        inner = _draw_nodes(cluster, body, dot_id + "_", bound, {}, set(), edges)
    return inner[id(body.outputs[0].node)]


def _subgraph(node: Any) -> Any:
    """The sub-program a fused node carries as an attribute, or None."""
    from hybridlab.graph.ir import Graph

    return next((v for _, v in node.attrs if isinstance(v, Graph)), None)


def _label(node: Any) -> str:
    from hybridlab.graph.ir import _format_type

    if node.kind == "var":
        head = node.name
    elif node.kind == "const":
        head = f"const {node.value.item():g}" if node.value.size == 1 else "const"
    else:
        head = r"\n".join([node.op, *_changed_attrs(node)])
    if node.aval is None:  # a symbol whose shapes are not known yet
        return head
    return rf"{head}\n{_format_type(node.aval)}"  # DOT's escaped line break keeps one line


def _changed_attrs(node: Any, limit: int = 2) -> list[str]:
    """The (at most ``limit``) short attributes that differ from the operator's defaults."""
    defaults = {key: spec.default for key, spec in node.opdef.attrs.items()}
    shown = [f"{k}={v!r}" for k, v in node.attrs
             if defaults.get(k, object()) != v and len(repr(v)) <= 16]
    return shown[:limit]


def _style(node: Any, roles: dict) -> dict[str, str]:
    if node.kind == "var":
        role = roles.get(id(node), "input")
        return {**LEAF_STYLES[role], **({"group": "spine"} if role == "input" else {})}
    if node.kind == "const":
        return LEAF_STYLES["const"]
    colour = KIND_COLOURS.get(node.opdef.kind.value, "#e5e5e5")
    # One group for the data path: graphviz then keeps it straight, parameters to the side.
    return {"shape": "box", "style": "rounded,filled", "fillcolor": colour, "group": "spine"}


def summary(graph: Any, params: Any = ()) -> str:
    """A one-line description that does not depend on graphviz (nbval compares it)."""
    counts: dict[str, int] = {}
    for node in graph.nodes:
        if node.kind == "call":
            counts[node.op] = counts.get(node.op, 0) + 1
    ops = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in counts.items())
    n_params = sum(1 for n in graph.inputs if n.name in set(params))
    return (f"Graph(nodes={len(graph.nodes)}, inputs={len(graph.inputs) - n_params}, "
            f"params={n_params}, ops=[{ops}])")


# ---------------------------------------------------------------------------------------
# Notebook display
# ---------------------------------------------------------------------------------------

class Drawing:
    """What a notebook shows: an SVG when ``dot`` exists, and always a stable text line."""

    def __init__(self, dot: Any, text: str) -> None:
        self.dot = dot
        self.text = text

    @property
    def source(self) -> str:
        """The DOT text (available without the ``dot`` program)."""
        return self.dot.source

    def svg(self) -> str | None:
        """The rendered SVG, or None (with the install hint in ``text``) without ``dot``."""
        try:
            return self.dot.pipe(format="svg", encoding="utf-8")
        except GraphvizNotFoundError as err:
            self.text = f"{self.text}\n{err}"
            return None

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        svg = self.svg()
        return {"text/plain": self.text, **({"image/svg+xml": svg} if svg else {})}

    def __repr__(self) -> str:
        return self.text


def draw(obj: Any, title: str = "plot", **options: Any) -> Drawing:
    """A :class:`Drawing` of a Symbol, a ``Graph``, a CachedOp or a hybridized block."""
    graph, params = as_graph(obj)
    return Drawing(to_dot(graph, title, params, **options), summary(graph, params))


def mimebundle(obj: Any) -> dict[str, str]:
    """``_repr_mimebundle_`` for Symbols and blocks: they call this so they draw themselves."""
    return draw(obj)._repr_mimebundle_()


def plot_network(symbol: Any, title: str = "plot", save_format: str = "pdf",
                 shape: dict | None = None, dtype: Any = "float32", node_attrs: dict | None = None,
                 hide_weights: bool = True) -> Any:
    """MXNet's ``mx.viz.plot_network``: a ``graphviz.Digraph`` of ``symbol``.

    With ``shape={"data": (1, 512)}`` every node shows its inferred type, and the
    arguments not named in ``shape`` are drawn as parameters (hidden if ``hide_weights``).
    """
    graph, params = as_graph(symbol, shape, dtype)
    dot = to_dot(graph, title, params, node_attrs, hide_weights)
    dot.format = save_format
    return dot


def as_graph(obj: Any, shape: dict | None = None, dtype: Any = "float32") -> tuple[Any, tuple]:
    """``(graph, parameter names)`` for anything drawable; ``shape`` fills in the types."""
    from hybridlab.graph.ir import Graph

    if isinstance(obj, Graph):
        return obj, ()
    if hasattr(obj, "to_graph"):  # a Symbol
        graph = obj.to_graph()
        if shape:
            graph = _with_shapes(obj, graph, shape, dtype)
        return graph, parameter_names(graph)
    cached_op = cached_op_of(obj)
    if cached_op is not None:
        return cached_op.graph, parameter_names(cached_op.graph) + block_parameters(obj)
    raise TypeError(f"cannot draw a {type(obj).__name__}: expected a Symbol, a graph.ir.Graph, "
                    f"a CachedOp, or a hybridized HybridBlock that has been called once")


def cached_op_of(obj: Any) -> Any:
    """The CachedOp itself, or the one a hybridized block compiled for its latest call."""
    programs = getattr(obj, "_programs", None)  # HybridBlock: one program per signature
    if programs:
        return list(programs.values())[-1].op
    return obj if hasattr(obj, "code") and hasattr(obj, "graph") else None


def block_parameters(obj: Any) -> tuple[str, ...]:
    """A block's own parameter names (covers ``self.params.get`` weights fed to ``dot``)."""
    collect = getattr(obj, "collect_params", None)
    return tuple(collect().keys()) if collect is not None else ()


def parameter_names(graph: Any) -> tuple[str, ...]:
    """Vars feeding an operator input that the registry names as a parameter (``weight``)."""
    from hybridlab.symbol import PARAMETER_INPUTS

    names = []
    for node in graph.nodes:
        if node.kind == "call":
            slots = node.opdef.input_names(node.attr_dict)
            names += [v.node.name for v, slot in zip(node.inputs, slots)
                      if slot in PARAMETER_INPUTS and v.node.kind == "var"]
    return tuple(dict.fromkeys(names))


def _with_shapes(symbol: Any, graph: Any, shape: dict, dtype: Any) -> Any:
    """``graph`` with every type inferred from the data shapes (parameters' shapes follow)."""
    import numpy as np

    from hybridlab.graph.ir import infer_shapes
    from hybridlab.ops.registry import Aval

    arg_shapes, _, aux_shapes = symbol.infer_shape(**shape)
    names = symbol.list_arguments() + symbol.list_auxiliary_states()
    known = dict(zip(names, (arg_shapes or []) + (aux_shapes or [])))
    if any(known.get(n.name) is None for n in graph.inputs):
        return graph  # not enough shapes given: draw without types rather than fail
    return infer_shapes(graph, {n: Aval(tuple(s), np.dtype(dtype)) for n, s in known.items()})
