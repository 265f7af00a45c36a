"""MXNet's model files: the symbol JSON, both directions, and the export pair.

What this module teaches
------------------------
A model is two files: ``<name>-symbol.json``, the graph in MXNet 1.9.1's JSON layout
(nodes with their operator, name, attributes as strings and inputs as ``[node, output,
version]``; ``arg_nodes``, ``node_row_ptr``, ``heads``), and ``<name>-0000.params``, the
weights in MXNet's binary NDArray format (``hybridlab/ndarray_io.py``, the codec
``nd.save`` shares). :func:`to_json` writes a graph; :func:`from_json` reads one, and
:func:`write_export_pair` / :func:`check_export_pair` keep the two files of one export
together (NOTE [Export pair]). Errors name the file and the node, in one vocabulary
(:class:`~hybridlab.errors.ModelFileError`) whatever the user called.

Invariants
----------
* Loading never executes anything: the text is parsed with :mod:`json` and every node is
  checked against the registry (known operator, typed attributes, inputs that point
  backwards) before a graph value is built; sizes are bounded by the ``MAX_*`` limits.
* Works on graph IR values: ``symbol`` wraps them as Symbols, and a composite operator
  in a file written by MXNet is expanded with the front end ``symbol`` installs
  (``graph.frontend``), so this module sits below ``symbol``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import sys
from itertools import accumulate
from typing import Any, Sequence

import numpy as np

from hybridlab import errors, ndarray, ndarray_io
from hybridlab import name as _name
from hybridlab.graph import frontend, ir, shapes
from hybridlab.graph.ir import Graph, Node, Value
from hybridlab.ops import registry
from hybridlab.ops.registry import Aval

# Limits for loading model files: a file beyond them is refused before it is built.
MAX_JSON_BYTES = 64 * 2**20
MAX_NODES = 100_000
MAX_NAME_CHARS = 256
MAX_ATTRS = 64
MAX_NDIM = 32
MXNET_VERSION = 10901  # the JSON layout is MXNet 1.9.1's
_DTYPE_CODES = {"0": "float32", "1": "float64", "2": "float16", "3": "uint8", "4": "int32",
                "5": "int8", "6": "int64", "7": "bool"}  # MXNet's __dtype__ numbers
_DTYPE_NUMBERS = {name: number for number, name in _DTYPE_CODES.items()}


def to_json(graph: Graph, file_attrs: dict[str, str] | None = None) -> str:
    """``graph`` in MXNet's JSON layout; ``file_attrs``: more string entries for the
    top-level ``attrs`` (export's digest of its parameters; MXNet 1.9.1 ignores them)."""
    from hybridlab.base import __version__

    document = _document(graph, "tojson")
    nodes = document.pop("nodes")
    document["attrs"] = {"mxnet_version": ["int", MXNET_VERSION],
                         "hybridlab_version": ["str", __version__],
                         **{key: ["str", value] for key, value in (file_attrs or {}).items()}}
    body = ",\n".join(f'  "{k}": {json.dumps(v)}' for k, v in document.items())
    listed = ",\n    ".join(json.dumps(n) for n in nodes)
    return f'{{\n  "nodes": [\n    {listed}\n  ],\n{body}\n}}\n'


def _document(graph: Graph, where: str) -> dict[str, Any]:
    """The JSON object of a graph: its nodes, arg_nodes, node_row_ptr and heads (also a
    loop's body, written in its node's ``subgraphs`` as MXNet does)."""
    check_unique_names(graph.nodes, where)
    index = {id(n): i for i, n in enumerate(graph.nodes)}
    return {
        "nodes": [_node_json(n, index) for n in graph.nodes],
        "arg_nodes": [i for i, n in enumerate(graph.nodes) if n.kind == "var"],
        "node_row_ptr": list(accumulate([0] + [n.num_outputs for n in graph.nodes])),
        "heads": [[index[id(v.node)], v.index, 0] for v in graph.outputs],
    }


def check_unique_names(nodes: Sequence[Node], where: str) -> None:
    """Two different nodes with one name: a file could not say which is which (and
    ``load_json`` refuses it), and binding by name would feed both from one array."""
    first: dict[str, Node] = {}
    for node in nodes:
        other = first.setdefault(node.name, node)
        if other is not node:
            what = "argument" if node.kind == other.kind == "var" else "node"
            pair = (f"two {node.kind} nodes" if node.kind == other.kind
                    else f"a {other.kind} node and a {node.kind} node")
            raise ValueError(f"{where}: duplicated {what} name {node.name!r} ({pair}"
                             f"{_origins(other, node)}); give each a distinct name")


def _origins(*nodes: Node) -> str:
    places = [n.origin for n in nodes if n.origin]
    return f", created at {' and '.join(places)}" if places else ""


# NOTE: [Parameter inputs] An operator input with one of these names is a learnable
# parameter (or, for the last two, a running statistic): when the caller leaves it out,
# ``sym`` creates a variable ``<node name>_<input name>`` for it, as MXNet did
# (``fc1_weight``). The names are MXNet's operator-input contract, which its JSON files
# rely on too; any other missing input (``data``, ``lhs``) is an error.
PARAMETER_INPUTS = ("weight", "bias", "gamma", "beta", "moving_mean", "moving_var")
AUXILIARY_INPUTS = ("moving_mean", "moving_var")  # updated by the op, not by the optimiser


@dataclasses.dataclass(frozen=True)
class Names:
    """A graph's names as MXNet lists them (``list_inputs``, ``list_arguments``,
    ``list_auxiliary_states``, ``list_outputs``)."""

    inputs: list[str]
    arguments: list[str]
    auxiliary: list[str]
    outputs: list[str]


def names(graph: Graph) -> Names:
    """Every variable in graph order, split into arguments and auxiliary states (vars
    flagged ``__aux__``, as Gluon sets it, or feeding an operator's auxiliary input), and
    ``<name>_output`` per output (``<name>_output<i>`` for multi-output operators)."""
    variables = [node for node in graph.nodes if node.kind == "var"]
    aux = {id(n) for n in variables if str(n.attr_dict.get("__aux__")).lower() in ("true", "1")}
    for node in graph.nodes:
        if node.kind == "call":
            slots = node.opdef.input_names(node.attr_dict)
            aux |= {id(v.node) for v, slot in zip(node.inputs, slots)
                    if slot in AUXILIARY_INPUTS and v.node.kind == "var"}
    return Names([n.name for n in variables],
                 [n.name for n in variables if id(n) not in aux],
                 [n.name for n in variables if id(n) in aux],
                 [output_name(v) for v in graph.outputs])


def output_name(value: Value) -> str:
    if value.node.kind == "var":
        return value.node.name
    if value.node.num_outputs == 1:
        return f"{value.node.name}_output"
    return f"{value.node.name}_output{value.index}"


def read_symbol_file(fname: str) -> list[Value]:
    """The outputs of the graph in a symbol file (``sym.load``): read with the file's size
    bounded, then :func:`from_json`."""
    with ndarray_io.open_regular_file(fname, errors.ModelFileError) as file:
        size = os.fstat(file.fileno()).st_size
        if size > MAX_JSON_BYTES:
            raise errors.ModelFileError(f"{fname}: {size} bytes is larger than the "
                                        f"{MAX_JSON_BYTES} bytes a symbol file may have")
        text = _decode(file.read(size + 1), fname)  # (the bytes go at once)
    return from_json(text, source=fname)


def _decode(raw: bytes, fname: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise errors.ModelFileError(f"{fname}: not UTF-8 text at byte {err.start} (a symbol "
                                    f"file is JSON); is it the .params file?") from None


# NOTE [Load memory] (the .params side is in ndarray_io): loading peaks below 4x the file's
# size + 64 MiB. json.loads makes a Python object per value (a 2-byte "[]" is a 56-byte
# list) and every node then becomes IR objects, so a file is first priced from counts of
# its characters -- an upper bound of what parsing and building take, calibrated on
# worst-case files in tests/test_fuzz_loaders.py -- and refused if that is too much.
_COSTS = {"[": 120, "{": 240, '"': 40, ",": 40, '"op"': 200, "\\": 64}  # bytes per occurrence
_COMPOSITE_BYTES = 4096  # a composite (softrelu, stack...) expands into several nodes


def _check_load_memory(text: str, source: str) -> None:
    composites = sum(text.count(f'"{name}"') for name in registry.COMPOSITES)
    cost = 2 * sys.getsizeof(text) + composites * _COMPOSITE_BYTES + sum(
        text.count(key) * price for key, price in _COSTS.items())
    limit = 4 * len(text) + 64 * 2**20
    if cost > limit:
        raise errors.ModelFileError(
            f"{source}: loading this file would take about {cost // 2**20} MiB, more than "
            f"the {limit // 2**20} MiB hybridlab allows for {len(text)} characters (4x the "
            f"file + 64 MiB): too many nodes or values for its size. A real model file has "
            f"a few thousand nodes; re-export it, or check where it came from")


def from_json(text: str, source: str = "<json>") -> list[Value]:
    """Parse MXNet-layout JSON into graph values (the heads), checking every node against
    the registry.

    Rejected with :class:`~hybridlab.errors.ModelFileError` (a ValueError) naming the node:
    text that is not a JSON object, missing keys, unknown operators (with a suggestion),
    unknown or mistyped attributes, input references that are not ints, negative, out of
    range or pointing forward (a forward reference is how a cycle shows up in a node
    list), duplicate names, bad heads, and sizes beyond the ``MAX_*`` limits. Names and
    attribute strings are only ever compared and parsed as data, never run.
    """
    if not isinstance(text, (str, bytes)) or len(text) > MAX_JSON_BYTES:
        raise errors.ModelFileError(f"{source}: expected JSON text of at most "
                                    f"{MAX_JSON_BYTES} bytes")
    text = _decode(text, source) if isinstance(text, bytes) else text
    _check_load_memory(text, source)
    try:
        document = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as err:
        raise errors.ModelFileError(f"{source}: not valid JSON ({err})") from None
    _require(isinstance(document, dict), source, "the file must hold a JSON object")
    for key in ("nodes", "heads"):
        _require(isinstance(document.get(key), list), source, f"missing list {key!r}")
    return _load_document(document, source, depth=0)[0]


def _load_document(document: dict, source: str, depth: int) -> tuple[list[Value], list[Node]]:
    """The heads of one graph object, and its nodes (a loop's body is one too)."""
    for key in ("nodes", "heads"):
        _require(isinstance(document.get(key), list), source, f"missing list {key!r}")
    entries = document["nodes"]
    _require(0 < len(entries) <= MAX_NODES, source, f"needs 1..{MAX_NODES} nodes")
    built: list[Node] = []
    seen: dict[str, int] = {}
    for index, entry in enumerate(entries):
        built.append(_load_node(entry, index, built, seen, source, depth))
    heads = document["heads"]
    _require(0 < len(heads) <= MAX_NODES, source, "'heads' must list the outputs")
    outputs = [_load_ref(ref, built, len(built), f"{source}: heads") for ref in heads]
    _check_index_lists(document, built, source)
    return outputs, built


# the operators whose attributes hold graphs, written in the node's ``subgraphs`` list
SUBGRAPH_ATTRS = {"_foreach": ("body",), "_while_loop": ("cond", "func")}
MAX_SUBGRAPH_DEPTH = 8  # loops nested in loops


def _subgraph_attrs(entry: dict, op: str, where: str, depth: int) -> dict[str, Any]:
    """A node's ``subgraphs``, each loaded as a Graph under its attribute's name."""
    documents = entry.get("subgraphs", [])
    names = SUBGRAPH_ATTRS.get(op, ())
    _require(isinstance(documents, list) and len(documents) == len(names), where,
             f"{op} needs {len(names)} subgraph(s) in 'subgraphs', got "
             f"{len(documents) if isinstance(documents, list) else documents!r}")
    _require(depth < MAX_SUBGRAPH_DEPTH, where, f"subgraphs nested deeper than "
                                                f"{MAX_SUBGRAPH_DEPTH}")
    graphs = {}
    for name, document in zip(names, documents):
        _require(isinstance(document, dict), where, "a subgraph must be a JSON object")
        outputs, built = _load_document(document, f"{where}: subgraph {name!r}", depth + 1)
        graphs[name] = Graph.from_outputs(outputs, [n for n in built if n.kind == "var"])
    return graphs


def _reject_constant(text: str) -> None:
    raise ValueError(f"{text} is not allowed in a model file")


def _require(condition: bool, where: str, message: str) -> None:
    if not condition:
        raise errors.ModelFileError(f"{where}: {message}")


def _load_node(entry: Any, index: int, built: list[Node], seen: dict[str, int],
               source: str, depth: int = 0) -> Node:
    where = f"{source}: node {index}"
    _require(isinstance(entry, dict), where, "each node must be a JSON object")
    name, op = entry.get("name"), entry.get("op")
    for key, value in (("name", name), ("op", op)):
        _require(isinstance(value, str) and 0 < len(value) <= MAX_NAME_CHARS, where,
                 f"{key!r} must be a string of 1..{MAX_NAME_CHARS} characters")
    where = f"{where} ({name!r})"
    _require(name not in seen, where, f"duplicate name (node {seen.get(name)} has it too)")
    seen[name] = index
    attrs = entry.get("attrs", entry.get("attr", entry.get("param", {})))  # pre-1.0 keys
    _require(isinstance(attrs, dict) and len(attrs) <= MAX_ATTRS, where,
             f"'attrs' must be an object of at most {MAX_ATTRS} entries")
    _require(all(isinstance(v, str) for v in attrs.values()), where,
             "attribute values must be strings (MXNet stores '128', '(2, 2)', 'True')")
    refs = entry.get("inputs", [])
    _require(isinstance(refs, list) and len(refs) <= MAX_NODES, where, "'inputs' must be a list")
    inputs = [_load_ref(ref, built, index, where) for ref in refs]
    if op == "null":
        _require(not inputs, where, "a variable ('null' op) has no inputs")
        return _load_var(name, attrs, where)
    return _load_call(op, name, {**attrs, **_subgraph_attrs(entry, op, where, depth)},
                      inputs, where)


def _load_ref(ref: Any, built: list[Node], limit: int, where: str) -> Value:
    """``[node, output, version]``: node must come earlier (no forward edges, no cycles)."""
    ok = isinstance(ref, list) and len(ref) in (2, 3)
    ok = ok and all(isinstance(n, int) and not isinstance(n, bool) for n in ref)
    _require(ok, where, f"input reference {ref!r} must be [node, output, version] ints")
    node_index, output = ref[0], ref[1]
    _require(0 <= node_index < limit, where,
             f"input reference {ref!r} points to node {node_index}, but only nodes "
             f"0..{limit - 1} are defined before it (forward reference, cycle or out of range)")
    count = built[node_index].num_outputs
    _require(0 <= output < count, where,
             f"input reference {ref!r} asks for output {output} of node {node_index} "
             f"({built[node_index].name!r}), which has {count} output(s)")
    return built[node_index].out(output)


_VAR_KEYS = ("shape", "dtype", "init", "aux", "storage_type")  # read only as __key__


def _load_var(name: str, attrs: dict[str, str], where: str) -> Node:
    for key in attrs:  # other keys are a user's attributes (MXNet keeps them as they are)
        _require(key not in _VAR_KEYS, where, f"variable attribute {key!r} must be spelled "
                 f"__{key}__")
    try:
        shape = shapes.parse_shape(attrs["__shape__"]) if "__shape__" in attrs else None
        dtype = np.dtype(_DTYPE_CODES.get(attrs.get("__dtype__", "0"), attrs.get("__dtype__")))
    except (TypeError, ValueError, SyntaxError, OverflowError) as err:  # numpy parses
        raise errors.ModelFileError(f"{where}: bad __shape__ or __dtype__ ({err})") from None
    _require(dtype.kind in "biuf", where, f"__dtype__ {dtype.name!r} is not a numeric dtype")
    _require(shape is None or (len(shape) <= MAX_NDIM and all(d >= 0 for d in shape)), where,
             f"__shape__ {attrs.get('__shape__')!r} must have 0..{MAX_NDIM} dims >= 0")
    known = shape is not None and all(d > 0 for d in shape)
    stored = dict(attrs)
    if "__dtype__" in stored:
        stored["__dtype__"] = dtype.name
    return Node("var", name=name, attrs=tuple(sorted(stored.items())),
                aval=(Aval(shape, dtype),) if known else None, origin=where)  # type: ignore[arg-type]  # (known: a full shape)


def _load_call(op: str, name: str, attrs: dict[str, str], inputs: list[Value],
               where: str) -> Node:
    composite = next((c for c in registry.COMPOSITES.values() if op in (c.name, *c.aliases)),
                     None)
    if composite is not None:
        return _load_composite(composite, name, attrs, inputs, where)
    try:
        opdef = registry.get(op)
        given = {k: _untyped_literal(v) if k in opdef.attrs and opdef.attrs[k].type == "any"
                 and not isinstance(v, Graph) else v
                 for k, v in attrs.items() if not k.startswith("__")}
        parsed = opdef.parse_attrs(given)
    except (errors.UnknownOperatorError, errors.UnknownAttributeError,
            errors.AttributeValueError) as err:
        raise errors.ModelFileError(f"{where}: {err}") from None
    names = opdef.input_names(parsed)
    variadic = bool(names) and names[0].startswith("*")
    _require(len(inputs) >= 1 if variadic else len(inputs) == len(names), where,
             f"{opdef.name} takes inputs {list(names)}, the file gives {len(inputs)}")
    notes = {k: v for k, v in attrs.items() if k.startswith("__") and isinstance(v, str)}
    try:
        return ir.call(opdef.name, inputs, parsed, name=name, origin=where, parsed=True,
                       notes=notes)
    except Exception as err:  # any failure of the op's shape rule on untrusted attributes
        raise errors.ModelFileError(f"{where}: {type(err).__name__}: {err}") from err


def _load_composite(composite: registry.Composite, name: str, attrs: dict[str, str],
                    inputs: list[Value], where: str) -> Node:
    """A composite such as ``Activation`` in a file written by MXNet: expand it in place.

    Its Python function builds the primitive nodes (hybridlab never writes composites,
    so our own files never come here); helper nodes are named ``<name>_<op><n>``.
    """
    given = {k: _untyped_literal(v) for k, v in attrs.items() if not k.startswith("__")}
    sym, wrap, unwrap, _ = frontend.current()  # the front end the composite is written for
    try:
        with _name.Prefix(f"{name}_"):
            value = unwrap(composite.fn(sym, *[wrap(v) for v in inputs], **given))
    except Exception as err:  # wrong attributes for the composite's Python signature
        raise errors.ModelFileError(f"{where}: {composite.name}: {type(err).__name__}: "
                                    f"{err}") from err
    _require(value.index == 0 and value.node.kind == "call", where,
             f"{composite.name} must give one value made by an operator")
    notes = tuple(sorted((k, v) for k, v in attrs.items() if k.startswith("__")))
    return dataclasses.replace(value.node, name=name, origin=where, notes=notes)


def _untyped_literal(text: str) -> Any:
    """An untyped attribute from its string: None, a bool, an int, a float, a tuple or text."""
    literals = {"None": None, "True": True, "False": False}
    if text in literals:
        return literals[text]
    if text.strip().startswith(("(", "[")):
        try:
            return registry.parse_attr_value("file", "tuple", registry.Attr("indices"), text)
        except ValueError:
            return text
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


def _check_index_lists(document: dict, built: list[Node], source: str) -> None:
    """``arg_nodes`` and ``node_row_ptr`` are redundant; when present they must agree."""
    arg_nodes = document.get("arg_nodes", [])
    _require(isinstance(arg_nodes, list) and all(
        isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(built)
        and built[i].kind == "var" for i in arg_nodes), source,
        "'arg_nodes' must list indices of variable ('null') nodes")
    row_ptr = document.get("node_row_ptr")
    if row_ptr is None:
        return
    ok = isinstance(row_ptr, list) and len(row_ptr) == len(built) + 1 and row_ptr[:1] == [0]
    ok = ok and all(isinstance(r, int) and not isinstance(r, bool) for r in row_ptr)
    for node, entry, low, high in (zip(built, document["nodes"], row_ptr, row_ptr[1:])
                                   if ok else ()):
        visible = node.num_outputs  # MXNet also counts outputs it never shows
        ok = ok and high - low in (visible, visible + _hidden_outputs(entry))
    _require(ok, source, f"'node_row_ptr' {str(row_ptr)[:80]} does not match the nodes' "
                         f"output counts")


# NOTE: [Hidden outputs] MXNet counts outputs an operator keeps for its backward and
# never shows (in ``node_row_ptr``): files written by mxnet 1.9.1 count 3 for BatchNorm
# (the batch mean and variance), 2 for Dropout (its mask) and 2 for max Pooling (its
# workspace, in builds with oneDNN). hybridlab's operators return only what they show.
_HIDDEN_OUTPUTS = {"BatchNorm": 2, "Dropout": 1, "Pooling": 1}


def _hidden_outputs(entry: dict) -> int:
    return _HIDDEN_OUTPUTS.get(str(entry.get("op")), 0)


def _node_json(node: Node, index: dict[int, int]) -> dict[str, Any]:
    if node.kind == "const":
        raise ValueError(f"constant node {node.name!r} cannot be saved in MXNet JSON; save "
                         f"the symbol before constant folding")
    if node.kind == "var":
        entry: dict[str, Any] = {"op": "null", "name": node.name}
        attrs = dict(node.attrs)
        if attrs.get("__dtype__") in _DTYPE_NUMBERS:  # MXNet's readers expect the number
            attrs["__dtype__"] = _DTYPE_NUMBERS[attrs["__dtype__"]]
    else:
        defaults = node.opdef.attrs
        entry = {"op": node.op, "name": node.name}
        graphs = SUBGRAPH_ATTRS.get(node.op or "", ())
        attrs = {k: ir.attr_text(v) for k, v in node.attrs if k not in graphs and (
                 k not in defaults or defaults[k].default is registry.REQUIRED
                 or defaults[k].default != v)}
        attrs.update(node.notes)  # operator-level attributes (MXNet keeps them in attrs)
        if graphs:
            entry["subgraphs"] = [_document(node.attr_dict[k], "tojson") for k in graphs]
    if attrs:
        entry["attrs"] = attrs
    entry["inputs"] = [[index[id(v.node)], v.index, 0] for v in node.inputs]
    return entry


PARAMS_DIGEST = "hybridlab_params_sha256"  # export's JSON attrs: "<epoch>:<sha256> ..."


def write_export_pair(symbol_file: str, graph: Graph, param_file: str,
                      arrays: dict[str, Any], epoch: int = 0) -> None:
    """NOTE [Export pair]: the two files of one export must never mix with another's. Both
    are written whole to temporaries first, then the params are renamed into place, then the
    JSON. The JSON's top-level ``attrs`` record the sha256 of the .params bytes of every
    epoch exported with this very graph (MXNet's habit: one ``-symbol.json``, one
    ``-%04d.params`` per epoch): an export keeps the digests the JSON on disk holds when
    that JSON is the same graph, replaces its own epoch's, and starts afresh for a new
    graph. So ``SymbolBlock.imports`` loads any epoch of the graph, and refuses, naming
    both files, a .params file the JSON does not record: another graph's, or new params
    beside old JSON (a kill between the two renames), instead of running old code on new
    weights."""
    for array in arrays.values():  # every value computed before either file is touched
        array.wait_to_read()
    params_tmp = ndarray.save_temporary(param_file, arrays, caller="export")
    try:
        with open(params_tmp, "rb") as file:
            digest = hashlib.file_digest(file, "sha256").hexdigest()
        digests = {**_same_graph_digests(symbol_file, graph), f"{epoch:04d}": digest}
        recorded = " ".join(f"{label}:{value}" for label, value in sorted(digests.items()))
        text = to_json(graph, file_attrs={PARAMS_DIGEST: recorded})
        symbol_tmp = ndarray_io.write_temporary(symbol_file, text)
    except BaseException:
        os.unlink(params_tmp)
        raise
    try:
        ndarray_io.commit_temporary(params_tmp, param_file)
    except BaseException:
        os.unlink(params_tmp)
        os.unlink(symbol_tmp)
        raise
    try:
        ndarray_io.commit_temporary(symbol_tmp, symbol_file)
    except BaseException:
        os.unlink(symbol_tmp)
        raise


# The top-level attrs entry export writes (NOTE [Export pair]). Only that entry
# can match: a node's attribute values are strings (load refuses a list there), and a JSON
# string cannot hold an unescaped quote. Before per-epoch digests it held one bare digest.
_DIGEST_ENTRY = re.compile(rb'"' + PARAMS_DIGEST.encode()
                           + rb'"\s*:\s*\[\s*"str"\s*,\s*"([0-9a-f: -]{64,})"\s*\]')


def _recorded_digests(text: bytes) -> dict[str, str] | None:
    """``{epoch label: sha256}`` from a symbol JSON's digest entry ("" labels an old file's
    one digest); None when it has none (MXNet's file)."""
    found = _DIGEST_ENTRY.search(text)
    if found is None:
        return None
    entries = [entry.rpartition(":") for entry in found.group(1).decode().split()]
    return {label: digest for label, _, digest in entries}


def _same_graph_digests(symbol_file: str, graph: Graph) -> dict[str, str]:
    """The digests recorded by the JSON already at ``symbol_file`` if it holds this graph
    (as this version writes it), else none: a new graph does not vouch for old epochs."""
    try:
        if os.path.getsize(symbol_file) > MAX_JSON_BYTES:
            return {}
        with open(symbol_file, "rb") as file:
            old = file.read()
    except OSError:  # no file yet, or not a readable one: nothing to keep
        return {}
    found = _DIGEST_ENTRY.search(old)
    if found is None:
        return {}
    same = to_json(graph, file_attrs={PARAMS_DIGEST: found.group(1).decode()}).encode()
    return (_recorded_digests(old) or {}) if same == old else {}


def check_export_pair(symbol_file: str, param_file: str) -> None:
    """Refuse a .params file that is not one the JSON records (one per epoch exported
    with this graph)."""
    with open(symbol_file, "rb") as file:  # (symbol.load has checked its size)
        recorded = _recorded_digests(file.read())
    if recorded is None:
        return  # written by MXNet, or by hybridlab before 0.2: nothing to compare
    with open(param_file, "rb") as file:
        digest = hashlib.file_digest(file, "sha256").hexdigest()
    if digest not in recorded.values():
        listed = ", ".join(f"{'epoch ' + label + ': ' if label else ''}{value[:12]}..."
                           for label, value in recorded.items())
        raise errors.ModelFileError(
            f"{symbol_file} and {param_file} are not one export: the JSON records the "
            f".params files exported with its graph (sha256 {listed}), and this one is "
            f"{digest[:12]}.... An export was interrupted between the two files, or they "
            f"come from different exports (another graph). Fix: export the model again, or "
            f"pass a .params file written with this JSON")
