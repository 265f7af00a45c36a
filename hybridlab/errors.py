"""The errors hybridlab raises, one class per mistake.

What this module teaches
------------------------
An error message is the part of a framework that students read most. Each class here
names one mistake; its docstring explains *why* it is a mistake and *how to fix it*,
and every message says three things: **what** went wrong (op, shapes, names), **where**
(the block and the user's source line when known) and **the fix**.

Each class subclasses the built-in exception MXNet raised for the same mistake, so
``except ValueError`` / ``except AttributeError`` code written for MXNet keeps working.
Later layers (the graph compiler, gluon) add their classes to this module.
"""

from __future__ import annotations


class MXNetError(RuntimeError):
    """MXNet's ``mx.base.MXNetError``: the base of every error below, so MXNet code that
    catches it catches hybridlab's errors too (each also keeps the built-in type MXNet's
    Python layer raised, ``ValueError``, ``TypeError``, ..., as its second base).

    Raised itself when an operator failed while the engine ran it.

    The engine runs operators later than the line that asked for them, so the error is
    raised at the next *sync point* (``asnumpy()``, ``wait_to_read()``, ``print``,
    ``nd.waitall()``) that depends on the failed result. The message names the operator
    and the user line that pushed it; the original exception is chained as
    ``__cause__``, so its traceback is shown too.
    """


class ShapeError(MXNetError, ValueError):
    """Operand shapes that an operator cannot accept (raised at the call, before running).

    Shapes are known as soon as an operator is called, so a mismatch is reported on the
    line that made it, with the shapes involved and a hint: for example broadcasting
    needs trailing dimensions that are equal or 1, and ``dot`` needs the inner dimensions
    to agree (``transpose_b=True`` if the second matrix is stored the other way round).
    """


class UnknownAttributeError(MXNetError, TypeError):
    """An operator was called with an attribute name it does not have (a typo?)."""


class AttributeValueError(MXNetError, ValueError):
    """An operator attribute has the wrong type or an out-of-range value."""


class UnknownOperatorError(MXNetError, KeyError, ValueError):
    """An operator name is not in the registry (in code or in a loaded model file)."""

    def __str__(self) -> str:  # KeyError would print the message in quotes
        return str(self.args[0]) if self.args else ""


class NotScalarError(MXNetError, ValueError):
    """``asscalar()`` was called on an array with more than one element.

    Fix: index first (``x[0].asscalar()``), reduce (``x.sum().asscalar()``) or use
    ``asnumpy()`` to get all the values.
    """


# ---------------------------------------------------------------------------------------
# Gluon: parameters, blocks and hybridize (appended by the gluon layer)
# ---------------------------------------------------------------------------------------


class DeferredInitializationError(MXNetError):
    """A parameter's shape is not known yet, so it has no value.

    Gluon layers may be created without their input size (``nn.Dense(256)`` does not know
    how many features it will receive). Such a parameter has a shape like ``(256, 0)``
    until the first forward call shows the input; ``initialize()`` only *schedules* its
    initialisation. Fix: run one forward pass first (``net(x)``), or give the size
    explicitly (``nn.Dense(256, in_units=512)``).
    """


class HybridizeError(MXNetError):
    """Base class of the mistakes that a symbolic trace of ``hybrid_forward`` cannot express.

    Under ``hybridize()`` the first call runs ``hybrid_forward`` once with ``F = sym`` and
    Symbol inputs: placeholders that have no values. Anything that needs a *value* at
    trace time (a Python ``if``, ``asnumpy()``, ``len``) cannot be recorded into the
    compiled program. Each subclass below also subclasses the built-in type MXNet raised.
    """


class NotImplementedForSymbol(HybridizeError):  # noqa: N818 -- MXNet's name
    """MXNet's ``mx.base.NotImplementedForSymbol``: what an NDArray can do and a Symbol
    cannot (a truth value, an in-place write). The errors below that MXNet raised as this
    one subclass it, so ``except NotImplementedForSymbol`` catches them as in MXNet."""


class SymbolBoolError(NotImplementedForSymbol, TypeError):
    """``if x:``, ``while x:``, ``bool(x)``, ``and``/``or`` on a Symbol.

    A Symbol has no value while the program is traced, so Python cannot decide which
    branch to take; the compiled program would have to contain both. Fix: compute both
    sides and select with ``F.where(cond, a, b)``, or use ``F.contrib.cond(pred,
    then_func, else_func)`` / ``F.contrib.while_loop``.
    """


class SymbolValueError(HybridizeError, AttributeError):
    """``asnumpy()`` / ``asscalar()`` / ``wait_to_read()`` inside ``hybrid_forward``.

    Reading a value leaves the graph: the compiled program cannot run Python on it.
    Fix: keep the computation in ``F.*`` operators; debug with ``hybridize(False)``.
    """


class SymbolNumberError(HybridizeError, TypeError):
    """``float(x)``, ``int(x)`` or ``range(x)`` on a Symbol.

    Turning a Symbol into a Python number needs its value, which does not exist while the
    graph is built. Fix: keep the arithmetic in ``F.*`` operators (``x * 2.0`` works on a
    Symbol); choose with ``F.where``; debug with ``hybridize(False)``.
    """


class SymbolShapeError(HybridizeError, AttributeError):
    """``.shape`` / ``.dtype`` / ``.context`` / ``.size`` / ``.ndim`` (or ``.grad``...) on a Symbol.

    A traced program is meant to work for every input, so the trace has no shape, dtype or
    device. The fix depends on what was asked (:data:`ATTRIBUTE_FIXES`): reshape codes
    (``x.reshape((0, -1))``: 0 copies a dimension, -1 infers it) and ``F.*_like``
    operators instead of ``.shape``, or ``hybridize(static_shape=True)``, under which
    traced Symbols carry the concrete shapes of the first call (shapes only: not dtypes).
    """


# The message text of the Symbol mistakes above, one fix per call or attribute: symbol.py
# raises them with these words and gluon/_trace.py adds the block and the user's line.

ATTRIBUTE_FIXES = {
    "shape": "reshape codes (x.reshape((0, -1)): 0 copies a dimension, -1 infers one), "
             "F.*_like operators, or hybridize(static_shape=True), under which x.shape works",
    "size": "reshape codes and F.*_like operators need no sizes; under "
            "hybridize(static_shape=True), x.shape works",
    "ndim": "reshape codes (-2 copies all remaining dimensions) need no ndim; under "
            "hybridize(static_shape=True), len(x.shape) works",
    "dtype": "F.*_like operators follow x's dtype; x.astype('float64') sets one; store a "
             "dtype on the block (self._dtype) when you need to read it "
             "(hybridize(static_shape=True) does not help: it fixes shapes, not dtypes)",
    "context": "F.zeros_like(x) / F.ones_like(x) make arrays where x is, and the compiled "
               "program runs where its inputs are, so there is no device to ask for",
}


def attribute_message(attribute: str, symbol: str) -> str:
    """The SymbolShapeError text for ``.attribute`` read from ``symbol`` (its repr)."""
    fix = ATTRIBUTE_FIXES.get(attribute, "use F.* operators in the block, and read NDArray "
                                         "attributes from its output, after the call")
    return (f".{attribute} of {symbol}: a traced program must work for every input, so a "
            f"Symbol has no {attribute}. Fix: {fix}")


def value_message(call: str, symbol: str) -> str:
    """The SymbolValueError / SymbolNumberError text for ``call`` (``"asscalar()"``,
    ``"float(x)"``) on ``symbol``: name the call the user wrote, not an alias of it."""
    return (f"{call} on {symbol}: a Symbol is a placeholder in a graph being built, with no "
            f"value to read. Fix: keep the computation in F.* operators (F.where to choose); "
            f"read values from the block's output, after the call; debug with "
            f"hybridize(False)")


class SymbolInplaceError(NotImplementedForSymbol, TypeError):
    """``x += 1``, ``x[:] = y`` or ``x[0] = 0`` on a Symbol.

    A Symbol is a node of a graph, not a buffer: there is nothing to overwrite. Fix:
    build a new value (``x = x + 1``) or select with ``F.where(mask, new, x)``.
    """


class SymbolIndexError(HybridizeError, TypeError):
    """``x[0]``, ``x[1:3]`` or ``len(x)`` on a Symbol.

    MXNet silently reinterpreted ``x[0]`` on a Symbol as "output 0 of a grouped symbol",
    so the same line meant different things before and after hybridize. hybridlab
    refuses instead. Fix: ``F.slice_axis(x, axis=0, begin=0, end=1)``, ``F.take``,
    ``F.split``; the number of rows is not known in a trace (use ``static_shape=True``).
    """


class NonHybridChildError(HybridizeError, ValueError):
    """A plain ``Block`` child used inside a ``HybridBlock``.

    A Block's ``forward`` is arbitrary Python on NDArrays and cannot be traced. Fix:
    make the child a ``HybridBlock`` (write ``hybrid_forward``), or make the parent a
    plain ``Block`` (``hybridize()`` then hybridizes the hybridizable children only).
    """


class ArrayInTraceError(HybridizeError, TypeError):
    """``nd.array(...)`` (or another NDArray) created inside ``hybrid_forward``.

    The trace records only ``F.*`` operators; an NDArray made inside would be frozen as a
    constant, or break when ``F`` is ``sym``. Fix: create constants with ``F.ones``,
    ``F.zeros``, ``F.full``, or register a parameter (``self.params.get(..., grad_req='null')``).
    """


class UnboundedLoopError(HybridizeError, ValueError):
    """``F.contrib.while_loop`` without ``max_iterations`` while hybridized.

    A compiled program's values have fixed shapes, so the stacked outputs of a traced
    loop need their number of rows when it is traced (imperatively, ``nd.contrib.while_loop``
    can run "until ``cond`` fails"). Fix: give ``max_iterations``, an upper bound on the
    number of steps; the rows of the stacked outputs after the loop stopped are zeros.
    """


class UnusedLoopInputError(HybridizeError, AssertionError):
    """A traced ``foreach`` whose body never reads one of its data arrays or states.

    MXNet's ``foreach`` refuses it (an ``AssertionError``): the loop operator feeds each
    data row and state to the body, so one the body ignores has no place in it. Fix: use
    it in the body, or leave it out of ``data``/``init_states``.
    """


class TraceOutputError(HybridizeError, TypeError):
    """``hybrid_forward`` returned something that is not a Symbol while it was traced.

    A compiled program can only return values it computed: the results of ``F.*``
    operators. A Python number or list computed at trace time is not part of the graph.
    Fix: return ``F.*`` results (one, or a tuple of them), e.g. ``F.ones_like(x) * 3.0``
    for a constant.
    """


class BlockInputError(MXNetError, ValueError):
    """A block was called with no input, or with something that is not an NDArray/Symbol.

    ``net(x)`` computes when ``x`` is an NDArray and builds a graph when ``x`` is a
    Symbol; a numpy array, a list or a mixture of the two kinds is neither. Fix:
    ``net(nd.array(x))`` (MXNet raised ValueError here too).
    """


class GraphvizNotFoundError(MXNetError):
    """A graph drawing was rendered but the graphviz ``dot`` program is missing.

    The Python ``graphviz`` package only writes DOT text; turning it into SVG or PNG needs
    the ``dot`` executable. Fix: ``apt-get install graphviz`` (or ``conda install
    python-graphviz``); meanwhile the drawing's DOT text is in its ``.source``.
    """


class GraphError(MXNetError, ValueError):
    """A compiler graph broke one of its invariants (found by ``graph.ir.verify``).

    The graph IR promises topological order, single assignment, registered operators
    and avals that agree with each operator's shape rule. A pass that breaks one of these
    is a compiler bug: the message lists each problem and prints the whole graph, so the
    offending ``%N`` line can be found. Fix: run ``run_pipeline(g, verify=True)`` to find
    the first pass that breaks it, or disable that pass (``disabled=("fuse_elementwise",)``).
    """


class UnknownEngineError(MXNetError, ValueError):
    """An engine type name hybridlab does not know (in ``set_engine`` or the environment).

    Fix: use one of ``NaiveEngine`` (runs each op at once: the easiest to debug),
    ``ThreadedEngine`` (lazy and parallel, the default) or ``StepEngine`` (holds ops
    until ``step()``), e.g. ``HYBRIDLAB_ENGINE_TYPE=NaiveEngine``.
    """


# ---------------------------------------------------------------------------------------
# NDArray, autograd and devices (appended by the ndarray layer)
# ---------------------------------------------------------------------------------------


class NoGPUError(MXNetError):
    """``mx.gpu()`` was asked for, but hybridlab computes with numpy on the CPU.

    Fix: use ``mx.cpu()``; MXNet code that picks a device with
    ``mx.gpu() if mx.context.num_gpus() else mx.cpu()`` works unchanged (``num_gpus()``
    is 0), and so does ``try: ... mx.gpu() ... except mx.base.MXNetError:``.
    """


class InplaceGradError(MXNetError):
    """An in-place write (``x += 1``, ``x[:] = v``, ``out=x``) on an array in a recorded graph.

    Under ``autograd.record()`` the tape remembers the arrays an operator read, because
    its gradient needs their values later; overwriting one would silently give wrong
    gradients. Fix: build a new array (``x = x + 1``), or do the update outside
    ``record()`` (as ``Trainer.step`` does).
    """


class UpdateOnKVStoreError(MXNetError, AssertionError):
    """``trainer.update()`` or ``trainer.allreduce_grads()`` while the key-value store
    applies the optimizer itself (``update_on_kvstore``): the store has already summed the
    gradients and moved the weights in ``step``. (MXNet asserted this, hence the second
    base.) Fix: call ``step(batch_size)``, or make the Trainer with
    ``update_on_kvstore=False`` to split the step in two.
    """


class GraphReleasedError(MXNetError):
    """``backward()`` ran twice through the same recorded graph.

    The first backward frees the tape (the saved inputs) to save memory. Fix: pass
    ``retain_graph=True`` to the first ``backward()``, or record the forward pass again.
    """


class MissingGradientError(MXNetError):
    """A gradient of a gradient went through an op whose own gradient rule is not written.

    ``autograd.grad(..., create_graph=True)`` records the backward computation so it can
    be differentiated again. Some backward ops (``_dot_grad_lhs``, ``_conv_data_grad``,
    ``_pooling_grad``) have a gradient in mathematics but no rule in the registry
    (``OpDef.grad_missing``), so instead of a silent zero -- a wrong answer that looks
    right -- the second ``backward`` stops here and names the op. Fix: build the model
    from ops whose backward is differentiable (``FullyConnected``'s gradient is written
    with ``dot``, which has one), or take a single gradient.
    """


class NotRecordedError(MXNetError):
    """``backward()`` on an array that no recorded operation produced.

    Gradients flow only through operations run inside ``with autograd.record():`` from
    arrays marked with ``x.attach_grad()``. Fix: call ``attach_grad()`` on the inputs
    and compute the output inside ``autograd.record()``.
    """


class RecordIOError(MXNetError, ValueError):
    """A record file (``mx.recordio``) that is not one, or is cut short: no magic number
    where a record should start, a length beyond the end of the file, an index line that
    is not ``key<TAB>offset``. The message names the file and the byte offset.
    Fix: check the path and that the index belongs to this record file; write it again
    with ``MXRecordIO(uri, 'w')`` (a file is complete only once the writer is closed).
    """


class ArrayFileError(MXNetError, ValueError):
    """``nd.load`` (or a ``.params`` loader) was given a file it cannot read as arrays.

    ``nd.save`` writes MXNet's binary NDArray format (``hybridlab.ndarray_io``), read with
    bounded reads and no pickle: loading never runs code. The message names the file,
    the entry (array index) and what was wrong: a bad magic number, a size larger than
    the file, a truncated file, a dtype or storage type hybridlab cannot hold, a shape
    larger than any array, more than ``ndarray_io.MAX_ARRAYS`` arrays, or a path that is
    not a regular file (a directory, a FIFO, a device: refused before reading).
    Fix: check the path, and re-save the arrays with ``nd.save(fname, list_or_dict)``.
    """


# ---------------------------------------------------------------------------------------
# Symbols and model files (appended by the symbol layer)
# ---------------------------------------------------------------------------------------


class ModelFileError(MXNetError, ValueError):
    """A symbol JSON file that hybridlab refuses to load (and why, node by node).

    Loading a model must never run code, whatever strings the file holds, so every node
    is checked against the operator registry before a graph is built: known operator,
    known and well-typed attributes, inputs that point to earlier nodes (that is what
    rules out cycles), unique names, valid heads, sane sizes (a shape past 2**60
    elements), a file whose parse would take more than 4x its size + 64 MiB, a path that
    is not a regular file, and an export whose ``.params`` file is not the one written
    with the JSON. The message names the node index and name (or both files). Fix:
    re-export the model (``net.export(path)``) or repair the file.
    """


class OnnxExportError(MXNetError, AttributeError):
    """``mx.onnx.export_model`` met something an ONNX model cannot express.

    Usually an operator with no row in ``hybridlab.onnx.ONNX_OPS`` (MXNet raised an
    AttributeError, "No conversion function registered for op type ..."); the message names
    the operator and the node. Fix: express that step with operators the table lists, or
    add a row to the table (one function that emits the ONNX nodes).
    """


class OnnxImportError(MXNetError, ValueError):
    """An ONNX file hybridlab cannot read (``mx.contrib.onnx.import_model``): not a model,
    an operator with no row in ``hybridlab.onnx.IMPORTERS``, a form of one hybridlab's
    operators cannot take (asymmetric pads), a damaged tensor, external data from outside
    the model's folder, or more memory than ``HYBRIDLAB_ONNX_MAX_BYTES`` allows. The
    message names the node (its operator and the model's opset) or the tensor."""


class DaskGraphError(MXNetError, ValueError):
    """A graph that cannot be handed to Dask as it is (``hybridlab.dask``).

    Every graph input must be bound to an array, and every operator node needs a kernel
    in the operator registry (a Dask task calls it by name on a worker). The message names
    the node (``%N`` as in the printed IR). Fix: pass ``inputs={name: array}`` for the
    inputs named, or replace the operator.
    """
