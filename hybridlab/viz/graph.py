"""Drawing computation graphs: Symbols, compiler graphs and hybridized blocks.

What this module teaches
------------------------
A symbolic program *is* a graph, so the best way to read one is to look at it. Every
node is drawn with its operator and its inferred type (``float32[1,256]``); inputs,
parameters and constants have their own shapes so the data flow stands out; operators
are coloured by what they do to data (``OpDef.kind``: elementwise, broadcast, reduce,
opaque) -- the fact the fusion pass asks for -- never by a list of op names (MXNet's
``plot_network`` used an if/elif chain on names and guessed weights from ``_weight``).

Who is a parameter? A var is drawn as one when the registry names the operator input it
feeds as a parameter (``weight``, ``bias``, ...), when it carries a learnable var's
attributes (``sym.var(..., init=...)``, ``lr_mult``, ``wd_mult``), or when a block says
so (its ``collect_params()``). Anything else is an input: the graph cannot know more.

Invariants
----------
* Deterministic: node ids are ``n0, n1, ...`` in the graph's topological order and edges
  are emitted in input order, so two drawings of one graph have identical DOT text.
* Reads only: the graph is never modified; graphviz is imported inside functions.
* Nodes no output depends on (a pass snapshot before dead-code elimination) are drawn
  dotted and labelled ``unused``; disconnected pieces are packed in rows, not one line.
* Without the ``dot`` program a drawing still has its DOT text (``.source``) and its
  summary; rendering raises :class:`~hybridlab.errors.GraphvizNotFoundError`, one line
  with the install fix, and a notebook shows the summary followed by that line.
"""

from __future__ import annotations

import collections
import warnings
from dataclasses import dataclass, field
from typing import Any, Sequence

from hybridlab import display
from hybridlab.errors import GraphvizNotFoundError
from hybridlab.graph.passes import derived_input
from hybridlab.lab.graphs import (
    Block,
    as_graph,
    block_edges,
    block_lines,
    blocks,
    changed_attrs,
    drawable,
    fused_body,
    operator_calls,
    parameter_names,
    summary,
    unused_nodes,
)
from hybridlab.viz.bundle import laptop_svg, rich_bundle
from hybridlab.viz.palette import BACKGROUND, KIND_COLOURS, OKABE_ITO

LEAF_STYLES = {  # how the non-call nodes look
    "input": {"shape": "oval", "style": "filled", "fillcolor": "#ffffb3"},
    "param": {"shape": "box", "style": "filled,dashed", "fillcolor": "#f2f2f2"},
    "const": {"shape": "note", "style": "filled", "fillcolor": "#f2f2f2"},
    "output": {"shape": "plaintext"},
}
KIND_NAMES = {"elementwise": "elementwise", "broadcast": "broadcasting", "reduce": "reduction",
              "opaque": "other (e.g. matrix product)"}  # the legend's words for OpDef.kind
UNUSED_STYLE = {"style": "dotted", "color": "#888888", "fontcolor": "#666666"}
INSTALL_HINT = ("the graphviz 'dot' program is not installed; install it with "
                "`apt-get install graphviz` or `conda install python-graphviz` "
                "(the DOT text is still available as .source)")
PACKAGE_HINT = ("the graphviz Python package is not installed; install it with "
                "`pip install graphviz` (or, in the hybridlab checkout, "
                "`pip install -e '.[notebooks]'`)")


def graphviz_class() -> type:
    """A ``graphviz.Digraph`` whose rendering failures say how to install ``dot``."""
    global _DIGRAPH
    if _DIGRAPH is None:
        try:
            import graphviz
        except ImportError:
            raise ImportError(PACKAGE_HINT) from None

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

@dataclass
class _Canvas:
    """What every node needs to know while a graph is drawn."""

    roles: dict[int, str]  # id(var node) -> "input" | "param"
    hidden: set[int]  # ids of parameters left out (plot_network's hide_weights)
    unused: set[int]  # ids of nodes no output depends on
    notes: dict[int, str]  # id(node) -> an extra label line (e.g. its memory slot)
    highlight: set[int] = field(default_factory=set)  # ids drawn with a bold red outline
    edges: list[tuple[str, str]] = field(default_factory=list)
    places: dict[int, Any] = field(default_factory=dict)  # id(node) -> the box it is drawn in
    names: bool = False  # write each operator node's name above its operator (MXNet's plot)


def to_dot(graph: Any, title: str = "plot", params: Any = (), node_attrs: dict | None = None,
           hide_weights: bool = False, notes: dict[int, str] | None = None,
           highlight: set[int] | None = None, groups: dict[int, str] | None = None,
           output_labels: Sequence[str] | None = None, names: bool = False) -> Any:
    """Draw a ``graph.ir.Graph``; ``params`` names the var nodes that are parameters,
    ``notes`` maps ``id(node)`` to an extra line for its label and ``highlight`` holds
    the ids of nodes to outline (what a pass changed); ``groups`` maps ``id(node)`` to
    the name of a box drawn around it (e.g. "forward"), ``output_labels`` names the
    outputs."""
    heading = {} if title == "plot" else {"label": title, "labelloc": "t", "fontsize": "12"}
    dot = graphviz_class()(name=title, graph_attr={
        "rankdir": "TB", "nodesep": "0.25", "ranksep": "0.3", "pack": "true",
        "packmode": "array_3", "fontname": "Helvetica", "bgcolor": BACKGROUND, **heading},
        node_attr={"fontname": "Helvetica", "fontsize": "10", "height": "0.3",
                   **(node_attrs or {})},
        edge_attr={"arrowsize": "0.6", "color": "#555555"})
    roles = {id(n): ("param" if n.name in set(params) or derived_input(n) is not None else
                     "input") for n in graph.inputs}  # a weight's transposed/folded copy too
    hidden = {id(n) for n in graph.inputs if roles[id(n)] == "param"} if hide_weights else set()
    canvas = _Canvas(roles, hidden, unused_nodes(graph), dict(notes or {}), set(highlight or ()),
                     names=names)
    boxes = {name: graphviz_class()(name=f"cluster_{name}", graph_attr={
        "label": dot_text(name), "labeljust": "l", "style": "rounded,dashed", "color": "#999999",
        "fontname": "Helvetica", "fontsize": "11", "fontcolor": "#555555"})
        for name in dict.fromkeys((groups or {}).values())}
    canvas.places = {key: boxes[name] for key, name in (groups or {}).items()}
    dot_ids = _draw_nodes(dot, graph, "n", {}, canvas)
    for box in boxes.values():
        dot.subgraph(box)
    for index, value in enumerate(graph.outputs):
        label = output_labels[index] if output_labels else f"output {index}"
        dot.node(f"out{index}", dot_text(label), **LEAF_STYLES["output"])
        canvas.edges.append((dot_ids[id(value.node)], f"out{index}"))
    for tail, head in canvas.edges:  # emitted last, at the top level: clusters keep their nodes
        dot.edge(tail, head)
    kinds = sorted({node.opdef.kind.value for node in operator_calls(graph)})
    if kinds and graph.outputs:  # the colours' key, under the drawing
        cells = "".join(f'<TD BGCOLOR="{KIND_COLOURS.get(kind, "#e5e5e5")}" STYLE="rounded">'
                        f"{KIND_NAMES.get(kind, kind)}</TD>" for kind in kinds)
        key = (f'<<TABLE BORDER="0" CELLSPACING="4" CELLPADDING="3"><TR>'
               f'<TD>operators:</TD>{cells}</TR></TABLE>>')
        if title == "plot":  # the graph's own label, centred at the bottom
            dot.attr(label=key, labelloc="b", fontsize="9")
        else:  # the label is the title: the key is a node under the last output
            dot.node("legend", key, shape="plaintext", fontsize="9")
            dot.edge(f"out{len(graph.outputs) - 1}", "legend", style="invis")
    return dot


BLOCK_COLOURS = {"residual block": "#d4e6f6", "inception block": "#fbe3c8",
                 "dense layer": "#d3eee2", "block": "#e8e8e8", "chain": "#f6f6f6"}
BIG_GRAPH = 150  # nodes: above this, drawings show one box per block (``to_block_dot``)


def to_block_dot(graph: Any, found: Sequence[Block], title: str = "plot", params: Any = (),
                 expand: Any = (), highlight: set[int] | None = None) -> Any:
    """``graph`` drawn as one box per block of ``found`` (``lab.graphs.blocks``): its
    name, kind, operators and result type. Blocks named in ``expand`` (or all, with
    ``expand=True``) are drawn open, their operators inside a dashed box; a block holding a
    node of ``highlight`` is outlined in red. Weights and constants are left out: of the
    graph's inputs, only those the first operator reads are drawn (an imported BatchNorm's
    scale, read by a ``broadcast_mul``, cannot be told from data by its operator)."""
    heading = {} if title == "plot" else {"label": title, "labelloc": "t", "fontsize": "12"}
    dot = graphviz_class()(name=title, graph_attr={
        "rankdir": "TB", "nodesep": "0.25", "ranksep": "0.22", "fontname": "Helvetica",
        "bgcolor": BACKGROUND, **heading},
        node_attr={"fontname": "Helvetica", "fontsize": "10", "height": "0.3"},
        edge_attr={"arrowsize": "0.6", "color": "#555555"})
    opened = _opened(found, expand)
    marked = set(highlight or ())
    weights = set(params) | set(parameter_names(graph))  # a pass's new weights too
    roles = {id(n): "param" if n.name in weights else "input" for n in graph.inputs}
    canvas = _Canvas(roles, set(), unused_nodes(graph), {}, marked)
    position = {id(n): i for i, n in enumerate(graph.nodes)}
    ids: dict[int, str] = {}  # id(node) -> the DOT node drawing it (its own, or its block's)
    entry = {id(v.node) for v in (found[0].nodes[0].inputs if found else ())}
    for node in graph.inputs:
        if roles[id(node)] == "input" and id(node) in entry:
            ids[id(node)] = f"n{position[id(node)]}"
            dot.node(ids[id(node)], _label(node, canvas), **_style(node, canvas))
    for index, block in enumerate(found):
        changed = any(id(n) in marked for n in block.nodes)
        outline = ({"color": OKABE_ITO["vermillion"], "penwidth": "2.5"} if changed else {})
        if block.name in opened:
            with dot.subgraph(name=f"cluster_b{index}") as box:
                box.attr(label=dot_text(f"{block.name} ({block.kind})"), labeljust="l",
                         style="rounded,dashed", fontsize="11", fontname="Helvetica",
                         **{"color": "#999999", **outline})
                for node in block.nodes:
                    ids[id(node)] = f"n{position[id(node)]}"
                    box.node(ids[id(node)], _label(node, canvas), **_style(node, canvas))
        else:
            dot.node(f"b{index}", r"\n".join(dot_text(line) for line in block_lines(block)),
                     shape="box", style="rounded,filled", group="spine",
                     fillcolor=BLOCK_COLOURS.get(block.kind, "#eeeeee"), **outline)
            ids.update((id(node), f"b{index}") for node in block.nodes)
    for index in range(len(graph.outputs)):
        dot.node(f"out{index}", f"output {index}", **LEAF_STYLES["output"])
    for tail, head in block_edges(graph, found, ids):
        dot.edge(tail, head)
    return dot


def _opened(found: Sequence[Block], expand: Any) -> set[str]:
    """The names of the blocks ``expand`` opens (``True``: all), each checked."""
    opened = {b.name for b in found} if expand is True else set(expand or ())
    unknown = opened - {b.name for b in found}
    if unknown:
        raise ValueError(f"expand={sorted(unknown)}: no such block; the blocks are "
                         f"{[b.name for b in found][:8]}...")
    return opened


def draw_blocks(obj: Any, title: str = "plot", expand: Any = (), shape: dict | None = None
                ) -> Drawing:
    """A :class:`Drawing` of ``obj`` with one box per block (``lab.graphs.blocks``: by name
    scope where names carry it, by structure where they do not); ``expand`` opens blocks
    by name (``True``: all); ``shape`` gives a Symbol's input shapes (the boxes' types)."""
    graph, params = as_graph(obj, shape)
    found = blocks(graph)
    text = f"{summary(graph, params)}; {len(found)} blocks"
    return Drawing(to_block_dot(graph, found, title, params, expand), text)


def _draw_nodes(target: Any, graph: Any, prefix: str, bound: dict, canvas: _Canvas
                ) -> dict[int, str]:
    """Add ``graph``'s nodes to ``target``; returns id(node) -> DOT id (``bound`` first)."""
    names = dict(bound)
    for position, node in enumerate(graph.nodes):
        if id(node) in names or id(node) in canvas.hidden:
            continue
        dot_id = f"{prefix}{position}"
        body = fused_body(node)
        if body is not None:
            names[id(node)] = _draw_cluster(target, node, body, dot_id, names, canvas)
            continue
        names[id(node)] = dot_id
        canvas.places.get(id(node), target).node(dot_id, _label(node, canvas),
                                                 **_style(node, canvas))
        canvas.edges.extend((names[id(v.node)], dot_id) for v in node.inputs
                            if id(v.node) in names)
    return names


def _draw_cluster(target: Any, node: Any, body: Any, dot_id: str, names: dict,
                  canvas: _Canvas) -> str:
    """A fused node: its sub-program drawn inside a dashed box, wired to the outer graph."""
    bound = {id(var): names[id(v.node)] for var, v in zip(body.inputs, _outer_inputs(node))}
    title = _CLUSTER_TITLES.get(node.op, "fused:")
    lines = [title, node.name] + ([canvas.notes[id(node)]] if id(node) in canvas.notes else [])
    label = "".join(dot_text(line) + r"\r" for line in lines)  # \r: DOT's right-justified line end
    with target.subgraph(name=f"cluster_{dot_id}") as cluster:
        # Label at the bottom right: edges enter at the top and leave at the middle.
        changed = id(node) in canvas.highlight
        cluster.attr(label=label, labelloc="b", labeljust="r", style="rounded,dashed",
                     color=OKABE_ITO["vermillion"] if changed else "#777777",
                     penwidth="2.5" if changed else "1", fontname="Helvetica", fontsize="10",
                     fontcolor="#444444", margin="36,8")
        inner = _Canvas({}, set(), set(), {}, canvas.highlight, canvas.edges,
                        names=canvas.names)
        names_inside = _draw_nodes(cluster, body, dot_id + "_", bound, inner)
    return names_inside[id(body.outputs[0].node)]


# a node holding a graph is drawn as a box around it: a fused group, or a loop's step
_CLUSTER_TITLES = {"_foreach": "foreach, its body once:", "_while_loop": "while_loop step:"}


def _outer_inputs(node: Any) -> list:
    """The node's inputs that feed its drawn sub-program, in the sub-program's order (a
    while_loop's step reads the loop variables and its own free inputs, not cond's)."""
    if node.op != "_while_loop":
        return list(node.inputs)
    attrs = node.attr_dict
    count, skip = attrs["num_vars"], attrs["num_cond_free"]
    return [*node.inputs[:count], *node.inputs[count + skip:]]


def _label(node: Any, canvas: _Canvas) -> str:
    from hybridlab.graph.ir import format_type

    if node.kind == "var":  # a pass's derived input says whose: "= fc_weight transposed"
        derived = derived_input(node)
        lines = [node.name] + ([f"= {derived.text}"] if derived is not None else [])
    elif node.kind == "const":
        lines = [f"const {node.value.item():g}" if node.value.size == 1 else "const"]
    else:
        lines = [*([node.name] if canvas.names else []), node.op, *changed_attrs(node)]
    if node.aval is not None:  # None: a symbol whose shapes are not known yet
        lines.append(format_type(node.aval))
    lines += [canvas.notes[id(node)]] if id(node) in canvas.notes else []
    lines += ["unused"] if id(node) in canvas.unused else []
    # DOT's escaped line break keeps the source one line per node
    return r"\n".join(dot_text(line) for line in lines)


def dot_text(text: str) -> str:
    r"""``text`` shown as it is in a DOT label: a backslash is an escape there (``\n``,
    ``\l``; one at the end would swallow the closing quote), so it is doubled."""
    return text.replace("\\", "\\\\")


def _style(node: Any, canvas: _Canvas) -> dict[str, str]:
    if node.kind == "var":
        role = canvas.roles.get(id(node), "input")
        style = {**LEAF_STYLES[role], **({"group": "spine"} if role == "input" else {})}
    elif node.kind == "const":
        style = LEAF_STYLES["const"]
    else:  # one group for the data path: graphviz keeps it straight, parameters aside
        style = {"shape": "box", "style": "rounded,filled", "group": "spine",
                 "fillcolor": KIND_COLOURS.get(node.opdef.kind.value, "#e5e5e5")}
    if id(node) in canvas.unused:
        style = {**style, **UNUSED_STYLE,
                 "style": UNUSED_STYLE["style"] + (",rounded" if node.kind == "call" else "")}
    if id(node) in canvas.highlight:
        style = {**style, "color": OKABE_ITO["vermillion"], "penwidth": "2.5"}
    return style


# ---------------------------------------------------------------------------------------
# Notebook display
# ---------------------------------------------------------------------------------------

class Drawing:
    """What a notebook shows: an SVG when ``dot`` exists, and always a stable text line."""

    def __init__(self, dot: Any, text: str) -> None:
        self.dot = dot
        self.text = text  # the summary; never changes (display it as often as you like)
        self.hint: str | None = None  # why the last rendering failed, if it did
        self._svg: str | None = None
        self._png: bytes | None = None

    @property
    def source(self) -> str:
        """The DOT text (available without the ``dot`` program)."""
        return self.dot.source

    def svg(self) -> str | None:
        """The rendered SVG (rendered once), or None without ``dot`` (see ``hint``)."""
        if self._svg is None:
            try:
                self._svg = self.dot.pipe(format="svg", encoding="utf-8")
                self.hint = None
            except GraphvizNotFoundError as err:
                self.hint = str(err)
        return self._svg

    def png(self) -> bytes | None:
        """The rendered PNG (rendered once), or None without ``dot``: what a reader that
        shows no SVG (an untrusted notebook) displays instead."""
        if self._png is None and self.hint is None:  # one run of dot, not an SVG first
            try:
                self._png = self.dot.pipe(format="png")
            except GraphvizNotFoundError as err:
                self.hint = str(err)
        return self._png

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        svg = self.svg()
        if svg is None:
            return {"text/plain": f"{self.text}\n{self.hint}"}
        return rich_bundle(self.text, self.png(), **{"image/svg+xml": laptop_svg(svg)})

    def __repr__(self) -> str:
        return self.text


def draw(obj: Any, title: str = "plot", **options: Any) -> Drawing:
    """A :class:`Drawing` of a Symbol, a ``Graph``, a CachedOp or a hybridized block."""
    graph, params = as_graph(obj)
    return Drawing(to_dot(graph, title, params, **options), summary(graph, params))


def draw_gradient(obj: Any, title: str = "plot") -> Drawing:
    """The joint forward + backward graph of ``obj`` (``graph.autodiff.gradient_graph``;
    shapes must be known), its forward and backward nodes boxed apart, the gradient
    arriving from the loss and every gradient output named ``d loss / d <input>``."""
    from hybridlab.graph.autodiff import gradient_graph

    graph, params = as_graph(obj)
    joint = gradient_graph(graph)
    forward = {node.name for node in graph.nodes}  # gradient_graph copies the nodes
    groups = {id(node): "forward" if node.name in forward else "backward"
              for node in joint.nodes if node.kind == "call"}
    incoming = {id(node): f"d loss / d output {i}"
                for i, node in enumerate(joint.inputs[len(graph.inputs):])}
    labels = [f"output {i}" for i in range(len(graph.outputs))] + [
        f"d loss / d {node.name}" for node in graph.inputs]
    return Drawing(to_dot(joint, title, params, notes=incoming, groups=groups,
                          output_labels=labels), summary(joint, params))


def mimebundle(obj: Any, text: str | None = None) -> dict[str, str]:
    """What ``_repr_mimebundle_`` of a Symbol, Graph or HybridBlock returns: the drawing,
    with ``text`` (default: the graph's summary) as the plain-text form.

    Never raises for display reasons: an object with nothing to draw yet (a block before
    its first hybridized call) shows ``text`` or its repr; without graphviz the text is
    followed by the one-line install hint.
    """
    if not drawable(obj):
        return {"text/plain": text if text is not None else repr(obj)}
    graph, params = as_graph(obj)
    plain = text if text is not None else summary(graph, params)
    try:
        dot = to_dot(graph, "plot", params)
    except ImportError as err:  # the graphviz Python package itself is missing
        return {"text/plain": f"{plain}\n{err}"}
    return Drawing(dot, plain)._repr_mimebundle_()


display.set_renderer(mimebundle)  # core objects draw through this hook (core never imports viz)


def plot_network(symbol: Any, title: str = "plot", save_format: str = "pdf",
                 shape: dict | None = None, dtype: Any = "float32", node_attrs: dict | None = None,
                 hide_weights: bool = True) -> Any:
    """MXNet's ``mx.viz.plot_network``: a ``graphviz.Digraph`` of ``symbol``.

    Each operator node shows its name (``fc1``), its operator and the attributes that
    differ from the defaults; with ``shape={"data": (1, 512)}`` also its inferred type,
    and the arguments not named in ``shape`` are drawn as parameters (hidden by default,
    ``hide_weights``, as MXNet).
    """
    graph, params = as_graph(symbol, shape, dtype)
    counts = collections.Counter(n.name for n in graph.nodes)
    repeated = sorted(name for name, count in counts.items() if count > 1)
    if repeated:  # MXNet warns too (its drawing joined such nodes into a cycle)
        warnings.warn(f"There are multiple variables with the same name in your graph: "
                      f"{','.join(repeated)}. Each is drawn as its own node, but a name no "
                      f"longer says which; give each a name= of its own", RuntimeWarning,
                      stacklevel=2)
    dot = to_dot(graph, title, params, node_attrs, hide_weights, names=True)
    dot.format = save_format
    return dot


def print_summary(symbol: Any, shape: dict | None = None, line_length: int = 120,
                  positions: Sequence[float] = (.44, .64, .74, 1.)) -> None:
    """MXNet's ``mx.viz.print_summary``: one row per operator -- its name and type, its
    output shape (with ``shape={"data": ...}``), its parameters' count and the layers it
    reads -- then the total number of parameters."""
    graph, params = as_graph(symbol, shape)
    ends = [int(line_length * p) for p in positions]

    def row(fields: Sequence[Any]) -> None:
        line = ""
        for field_text, end in zip(fields, ends):
            line = (line + str(field_text))[:end].ljust(end)
        print(line.rstrip())

    print("_" * line_length)
    row(["Layer (type)", "Output Shape", "Param #", "Previous Layer"])
    print("=" * line_length)
    total = 0
    for node in graph.nodes:
        if node.kind != "call":
            continue
        weights = [v.node for v in node.inputs if v.node.name in params]
        count = sum(_size(w.aval[0].shape) for w in weights if w.aval is not None)
        total += count
        previous = [v.node.name for v in node.inputs if v.node.name not in params]
        out = "x".join(map(str, node.aval[0].shape)) if node.aval is not None else "?"
        row([f"{node.name}({node.op})", out, count, ", ".join(previous)])
        print("_" * line_length)
    print(f"Total params: {total}")
    print("_" * line_length)


def _size(shape: Sequence[int]) -> int:
    count = 1
    for size in shape:
        count *= size
    return count
