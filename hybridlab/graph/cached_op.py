"""CachedOp: a graph compiled once per input signature and run as ONE engine operation.

What this module teaches
------------------------
``hybridize()`` turns a block into a graph; ``CachedOp`` is what runs it. The first call
with a new *signature* (input shapes and dtypes, training flag, and while autograd
records, which inputs want a gradient) infers shapes, runs the pass pipeline and
generates Python (a cache *miss*); later calls with the same signature reuse that program
(a *hit*). ``.code`` shows the generated source, ``.stats`` the counters.

A call pushes exactly one engine op that reads every input Var and writes every output
Var: the engine sees the whole graph as one task, the way MXNet ran a hybridized block.
While ``autograd.record()`` is on, the program compiled is the forward half of the
joint forward+backward graph (:mod:`hybridlab.graph.autodiff`): it also returns the
*residuals* the backward needs, and the call goes on the tape as one node whose
gradient runs the compiled backward half, again as one engine op. The backward returns
only the gradients autograd will read (inputs with ``attach_grad`` or made by recorded
ops), so a network's data and labels cost no gradient work, as in MXNet's CachedOp.

Inputs are given in ``graph.inputs`` order (``symbol.list_inputs()``).
"""

from __future__ import annotations

import functools
import operator
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from hybridlab import autograd, config, engine, ndarray, random
from hybridlab.errors import MissingGradientError
from hybridlab.graph import autodiff, ir, loops, shapes
from hybridlab.graph.autotune import (
    AS_STORED,
    PRETRANSPOSED,
    AlgorithmTuner,
    LayoutChoice,
    Tuner,
)
from hybridlab.graph.codegen import Program, compile_graph
from hybridlab.graph.passes import (
    PassContext,
    choose_convolutions,
    derived_input,
    lower_operators,
    run_pipeline,
)
from hybridlab.graph.passes.context import PREDICTION
from hybridlab.graph.passes.eliminate_dead_code import eliminate_dead_code
from hybridlab.graph.passes.pretranspose_weights import pretranspose_weights
from hybridlab.ndarray_io import aligned
from hybridlab.ops.registry import Aval, RunContext

loops.install()  # (at its import too) _foreach asks the graph layer to compile its body

_VAR = operator.attrgetter("_var")  # an NDArray's engine Var
_IS_NONE = functools.partial(operator.is_, None)  # (``None in arrays`` would compare them)


@dataclass(frozen=True)
class Traced:
    """What a CachedOp compiles: a graph, and how a call feeds it.

    A plain CachedOp has one, its graph; a hybridized block's CachedOp asks the block's
    ``trace(training, avals)`` on each miss (a trace per mode: BatchNorm traces
    differently while training), and the block gives: ``feed``, NDArrays appended to every
    call's inputs (its parameters; ``graph.inputs`` lists the call's arrays, then them);
    ``writes``, for each output after the first ``len(graph.outputs) - len(writes)``, the
    index in ``feed`` of the array it replaces (running statistics: MXNet's operators
    mutate them, hybridlab's programs return them and the call stores them); ``regroup``:
    a function giving the results the structure the block returned (a list, nested lists)
    from the flat list of them, or None for one result (or a plain list of several).
    """

    graph: ir.Graph
    feed: tuple[Any, ...] = ()
    writes: tuple[int, ...] = ()
    regroup: Any = None


@dataclass
class _Entry:
    forward: Program
    backward: Program | None
    out_avals: list[Aval]  # outputs, then residuals
    num_outputs: int
    in_avals: list[Aval]
    training: bool  # with in_avals and needs: the signature it was compiled for
    needs: tuple[bool, ...] = ()  # while recording: which inputs want a gradient
    saved_inputs: tuple[int, ...] = ()  # inputs the backward reads again
    wanted: tuple[int, ...] = ()  # inputs the backward returns a gradient for
    plain: Any = None  # the generated function, when NOTE [The plain call] applies
    layouts: _Layouts | None = None  # NOTE [Weights in the kernel's layout]
    traced: Traced | None = None  # the graph it was compiled from, and how to feed it
    feed: tuple[Any, ...] = ()  # (traced.feed: read on every call)
    tuning: _Tuning | None = None  # NOTE [Layout by measurement]: until the first call ran
    layout: LayoutChoice | None = None  # what that measurement found
    convolutions: dict[str, Any] = field(default_factory=dict)  # algorithm by layer name
    arg_avals: list[Aval] = field(default_factory=list)  # in_avals of the call's own arrays
    # NOTE [Run now]: the plain call runs in the caller when an engine is idle and the
    # program is short; None until timed (``_timed``), on a threaded engine's first calls
    short: bool | None = None
    seconds: list[float] = field(default_factory=list)


class _Layouts:
    """NOTE: [Weights in the kernel's layout] a pass may make a program read a weight in
    another form, as a new input it marks (NOTE [Derived inputs] in graph/passes):
    ``pretranspose_weights`` each dense layer's weight transposed, ``fold_batchnorm`` a
    convolution's weight and bias with the BatchNorm after it folded in. The call supplies
    them: each is made when the program first runs and kept with the buffers it was made
    from. Buffers are never written once stored (NOTE [Immutable buffers] in ndarray.py):
    a weight that changes gets a new buffer object, so "are these still the same buffer
    objects" is the whole validity test, one identity comparison per source and call. In
    inference the copies are made once; in training every step changes the weights, and
    every step would pay them again (so the layout pass runs only in inference, and
    folding only applies there).
    """

    __slots__ = ("sources", "makers", "used", "held")

    def __init__(self, sources: list[tuple[int | None, ...]], makers: list[Any]) -> None:
        self.sources = sources  # for each derived input, the inputs it is made from
        self.makers = makers  # and the function of their arrays that makes it
        self.used = sorted({i for each in sources for i in each if i is not None})
        self.held: tuple[list[Any], list[Any]] = ([], [])  # (the sources seen, what was made)

    @classmethod
    def of(cls, program: Program, inputs: Sequence[ir.Node]) -> _Layouts | None:
        """The program's extra inputs (after ``inputs``), or None when it has none."""
        names = [node.name for node in inputs]
        extra = program.graph.inputs[len(names):]
        if not extra:
            return None
        derivations = [derived_input(node) for node in extra]
        if any(d is None for d in derivations):
            raise RuntimeError(f"the program reads inputs no pass derives: "
                               f"{[n.name for n, d in zip(extra, derivations) if d is None]}")
        return cls([tuple(names.index(s) if s else None for s in d[0])  # type: ignore[index]
                    for d in derivations], [d[1] for d in derivations])  # type: ignore[index]

    def extend(self, arrays: list[Any]) -> list[Any]:
        """``arrays`` followed by each derived input, made again only from new buffers (the
        pair of what was seen and made is swapped in at once: concurrent calls each read a
        consistent one)."""
        seen, made = self.held
        current = [arrays[i] for i in self.used]
        if len(seen) != len(current) or any(a is not b for a, b in zip(current, seen)):
            before = dict(zip(self.used, seen))  # (references kept: ids cannot be reused)
            made = [made[k] if made and all(i is None or before[i] is arrays[i] for i in sources)
                    else aligned(make(*[None if i is None else arrays[i] for i in sources]))
                    for k, (sources, make) in enumerate(zip(self.sources, self.makers))]
            self.held = (current, made)
        arrays.extend(made)
        return arrays


class _Tuning:
    """NOTE: [Layout by measurement] in inference, a program whose dense layers the layout
    pass can rewrite is compiled both ways (``graph/autotune.py`` says why). Its entry
    holds this object until the signature's first call runs: that call's engine op times
    the two programs on its own inputs (``Tuner.choose``), puts the faster in the entry --
    its forward, its layout copies, and the plain call when the entry allows one -- and
    returns that program's results. Later calls run the chosen program alone; calls pushed
    before the choice was made (a ThreadedEngine) wait on the lock, then run it too.
    """

    def __init__(self, entry: _Entry, layout: Program, tuner: Tuner, plain: bool,
                 inputs: Sequence[ir.Node]) -> None:
        self.entry, self.tuner, self.plain, self.lock = entry, tuner, plain, threading.Lock()
        self.candidates = {AS_STORED: (entry.forward, entry.layouts),
                           PRETRANSPOSED: (layout, _Layouts.of(layout, inputs))}

    def run(self, arrays: Sequence[Any], contexts: tuple[RunContext, ...] = ()
            ) -> Sequence[Any]:
        entry = self.entry
        with self.lock:
            if entry.tuning is self:  # the first call: measure, then keep the faster
                runs = {name: _runner(*pair) for name, pair in self.candidates.items()}
                entry.layout = self.tuner.choose(runs, arrays)
                entry.forward, entry.layouts = self.candidates[entry.layout.chosen]
                entry.plain = entry.forward.single() if self.plain else None
                entry.tuning = None
        results: Sequence[Any] = _runner(entry.forward, entry.layouts)(arrays)
        return results


def _runner(program: Program, layouts: _Layouts | None) -> Any:
    """A function of the call's input arrays running ``program`` (with its layout copies)."""
    if layouts is None:
        return program.run
    return lambda arrays: program.run(layouts.extend(list(arrays)))


class CachedOp:
    """``CachedOp(symbol_or_graph, static_alloc=False, static_shape=False,
    disabled_passes=(), passes=())(*ndarrays)``: ``passes`` adds passes to the pipeline
    (see ``run_pipeline``; e.g. ``pretranspose_weights``, NOTE [Weights in the kernel's
    layout]); ``disabled_passes`` names pipeline passes not to run. ``trace=`` instead of a
    graph: ``trace(training, avals) -> Traced``, asked on each miss (a hybridized block's
    own tracer: its CachedOp is the block's one cache). ``autotune``: choose the weights'
    layout by measurement (NOTE [Layout by measurement]); None follows the ``AUTOTUNE``
    flag (``HYBRIDLAB_AUTOTUNE``, on unless set to 0); ``.tuner`` times the candidates."""

    def __init__(self, symbol_or_graph: Any = None, static_alloc: bool = False,
                 static_shape: bool = False, disabled_passes: Sequence[str] = (),
                 passes: Sequence[Any] = (), trace: Any = None,
                 autotune: bool | None = None) -> None:
        if trace is None:
            graph = symbol_or_graph
            fixed = Traced(graph.to_graph() if hasattr(graph, "to_graph") else graph)
            trace = lambda training, avals: fixed  # noqa: E731 -- one graph for every call
            self._graph: ir.Graph | None = fixed.graph
        else:
            self._graph = None
        self._trace = trace
        self.static_alloc, self.static_shape = static_alloc, static_shape
        self.disabled = tuple(disabled_passes)  # names of pipeline passes not to run
        self.passes = tuple(passes)  # your own passes (run_pipeline's ``passes``)
        self.autotune, self.tuner = autotune, Tuner()
        self._calls, self._misses = 0, 0  # see ``stats``
        self._cache: dict[tuple[Any, ...], _Entry] = {}
        self._last: _Entry | None = None

    @property
    def graph(self) -> ir.Graph:
        """The graph compiled (a block's: the one its last call traced)."""
        if self._last is not None and self._last.traced is not None:
            return self._last.traced.graph
        if self._graph is None:
            raise RuntimeError("this CachedOp traces its graph on the first call: call it once")
        return self._graph

    @property
    def stats(self) -> dict[str, int]:
        """``{"hits": calls that reused a program, "misses": calls that compiled one}``."""
        return {"hits": self._calls - self._misses, "misses": self._misses}

    @property
    def layout(self) -> LayoutChoice | None:
        """The layout measured for the last call's signature (None: not measured)."""
        return None if self._last is None else self._last.layout

    def layouts(self) -> list[tuple[list[Aval], LayoutChoice]]:
        """Every signature whose layout was measured, with what was found."""
        return [(e.in_avals[:len(e.in_avals) - len(e.feed)], e.layout)
                for e in self._cache.values() if e.layout is not None]

    def convolutions(self) -> dict[str, Any]:
        """The algorithm measured for each convolution of the last call's program (NOTE
        [Convolution algorithms]), by layer name; empty when nothing was measured."""
        return {} if self._last is None else dict(self._last.convolutions)

    @property
    def last_program(self) -> Program | None:
        """The forward program the last call ran (None before the first call)."""
        return None if self._last is None else self._last.forward

    def arguments(self, arrays: Sequence[Any]) -> list[Any]:
        """The generated function's arguments for the call's ``arrays``: the arrays, the
        fed ones (a block's parameters) and the copies a layout pass asks for (NOTE
        [Weights in the kernel's layout])."""
        last = self._last
        arrays = list(arrays) + ([x.asnumpy() if hasattr(x, "asnumpy") else x
                                  for x in last.feed] if last is not None else [])
        return arrays if last is None or last.layouts is None else last.layouts.extend(arrays)

    @property
    def code(self) -> str:
        """The source of the program compiled last (forward, then backward if any)."""
        if self._last is None:
            return "# not compiled yet: call the CachedOp once"
        parts = [self._last.forward.source] + ([self._last.backward.source]
                                               if self._last.backward else [])
        return "\n".join(parts)

    def __call__(self, *args: Any) -> Any:
        # NOTE: [The hot path] a hybridized call spends its framework time here, once per
        # call: find the program for the signature, make one NDArray per result, push one
        # engine op. Everything that can be decided at compile time was (normal avals,
        # the number of random nodes); what is left is one pass over the inputs per list.
        mode = autograd._MODE  # the flags themselves: this runs on every call
        entry = self._last
        inputs = args if entry is None or not entry.feed else args + entry.feed
        try:
            # the signature: the call's own arrays (a fed array -- a block's parameter --
            # keeps its aval for life, so the entry's are still right)
            avals = [x._aval for x in args]
            # which inputs want a gradient (autograd's own test): the data and labels do not
            needs = tuple([x._ag is not None for x in inputs]) if mode.recording else ()
        except AttributeError:  # not an NDArray: say so here, not deep in the program
            raise self._not_arrays(args) from None
        # NOTE: [The last signature first] a loop calls with the signature of its last
        # call: compare with that entry before hashing anything (an *inline cache*, as
        # CPython's bytecode caches attribute lookups). ``!=`` on two lists of avals
        # compares element by element and skips any pair that is the same object, so an
        # unchanged aval costs one identity test. Any difference (shape, dtype, mode,
        # number of inputs) goes the slow way, through the dictionary.
        if (entry is None or avals != entry.arg_avals or mode.training != entry.training
                or needs != entry.needs):
            entry = self._lookup(args, mode.training, mode.recording)
            inputs = args + entry.feed
        self._calls += 1
        function = entry.plain
        if function is None:
            return self._push_program(entry, inputs)
        # NOTE: [The plain call] most calls run a program with one result, no random node,
        # no 0-d output and no backward to record (a network's forward in a loop). Its
        # generated function needs no Program.run around it: the engine op calls it with
        # the inputs' arrays and stores the one result (with static_alloc, through
        # ``Program.single``, which lends it an arena). The op and its Vars
        # are those _push pushes, minus the steps that would do nothing, and written here
        # rather than in a helper (one Python call less; "Performance notes").
        # normalised at compile time; on the data's device (MXNet's rule, ndarray.py)
        result = ndarray._new(entry.out_avals[0], None,
                              inputs[0]._ctx if inputs else ndarray._CPU)
        layouts, current = entry.layouts, engine.current()
        if (current.synchronous or entry.short) and current.idle():  # NOTE [Run now]
            arrays = [x._data for x in inputs]  # (nothing pending: every one is current)
            if not any(map(_IS_NONE, arrays)):  # else NOTE [Inputs without values]: pushed
                try:
                    result._data = function(*(arrays if layouts is None
                                              else layouts.extend(arrays)))[0]
                except Exception as error:
                    current.fail_now(error, map(_VAR, inputs), (result._var,), "CachedOp",
                                     result._ctx)
                return result
        if ndarray._unfilled(inputs) is not None:  # NOTE [Inputs without values]
            return self._push_program(entry, inputs)
        if layouts is None:
            def run() -> None:
                result._data = function(*[x._data for x in inputs])[0]
        else:  # NOTE [Weights in the kernel's layout]
            def run() -> None:
                result._data = function(*layouts.extend([x._data for x in inputs]))[0]

        if entry.short is None:  # the first calls on a threaded engine are timed
            run = _timed(run, entry)
        current.push(run, map(_VAR, inputs), (result._var,), "CachedOp", result._ctx)
        return result

    def _push_program(self, entry: _Entry, inputs: tuple[Any, ...]) -> Any:
        """The general call: several results, random nodes, an arena, a tape entry, fed
        arrays to replace (``Traced.writes``: the running statistics)."""
        # out_avals were normalised at compile time: the constructor without the checks;
        # they are the outputs, the fed arrays' next values (``writes``), the residuals
        count, writes = entry.num_outputs, entry.traced.writes if entry.traced else ()
        ctx = inputs[0]._ctx if inputs else ndarray._CPU  # the data's device
        results = [ndarray._new(aval, None, ctx) for aval in entry.out_avals]
        if writes:  # the program's values for them become the fed arrays' next buffers
            fed = inputs[len(inputs) - len(entry.feed):]
            results[count:count + len(writes)] = [fed[i] for i in writes]
        # read once, before the program: the first call's engine op may end the tuning
        # meanwhile, and then forward and layouts are already the chosen ones (it sets them
        # before clearing ``tuning``)
        tuning = entry.tuning
        program, contexts = entry.forward, ()  # type: tuple[Program, tuple[RunContext, ...]]
        if program.num_random:  # (most graphs have none: skip the generator expression)
            # one generator per random node, drawn now in node order: the stream the
            # imperative engine would draw, so hybridize() does not change the numbers
            contexts = tuple(RunContext(entry.training, random.next_generator())
                             for _ in range(program.num_random))
        _push(tuning or program, inputs, results, contexts, "CachedOp",
              None if tuning else entry.layouts, range(count, count + len(writes)))
        outputs = results[:count]
        if entry.backward is not None:
            saved = results[count + len(writes):] + [inputs[i] for i in entry.saved_inputs]
            autograd.record_op(_TapeOp(entry, saved), {}, list(inputs), outputs)
        if entry.traced is not None and entry.traced.regroup is not None:
            return entry.traced.regroup(outputs)
        return outputs[0] if entry.num_outputs == 1 else outputs

    def _lookup(self, args: tuple[Any, ...], training: bool, recording: bool) -> _Entry:
        """The entry for this signature from the cache, compiled on a miss."""
        try:
            arg_avals = [x._aval for x in args]
        except AttributeError:
            raise self._not_arrays(args) from None
        traced = self._trace(training, arg_avals)
        inputs = args + traced.feed
        if len(inputs) != len(traced.graph.inputs):
            names = [n.name for n in traced.graph.inputs[:len(traced.graph.inputs)
                                                        - len(traced.feed)]]
            raise TypeError(f"CachedOp takes {len(names)} inputs {names}, got {len(args)}")
        avals = [x._aval if x._data is not None else _computed(x) for x in inputs]
        needs = tuple([x._ag is not None for x in inputs]) if recording else ()
        key = (tuple(avals), training, needs)
        entry = self._cache.get(key)
        if entry is None:
            self._misses += 1
            entry = self._cache[key] = self._compile(traced, avals, training, needs)
        self._last = entry
        return entry

    def _not_arrays(self, args: tuple[Any, ...]) -> TypeError:
        kinds = ", ".join(type(x).__name__ for x in args)
        names = f" {[n.name for n in self._graph.inputs]}" if self._graph is not None else ""
        return TypeError(f"CachedOp inputs{names} must be NDArrays, got ({kinds}); convert "
                         f"with nd.array(...)")

    def _compile(self, traced: Traced, avals: list[Aval], training: bool,
                 needs: tuple[bool, ...]) -> _Entry:
        """The entry keeps ``avals``, these very objects: NOTE [The last signature first]."""
        graph = shapes.infer_graph(traced.graph, [Aval(tuple(a.shape), np.dtype(a.dtype))
                                               for a in avals])
        # lowered before the gradient: layer operators have no gradient rule of their own,
        # their lowerings' primitives do. Without a gradient the pipeline lowers, after
        # the passes that read layer operators whole (fold_batchnorm)
        wanted = tuple(i for i, need in enumerate(needs) if need)
        # NOTE [Convolution algorithms]: measured in inference, when autotuning is on
        algorithms = None if training or wanted or not self._autotuned() \
            else AlgorithmTuner(self.tuner)
        context = PassContext(training=training, convolutions=algorithms)
        if wanted:
            graph = lower_operators(graph, context).graph
        written = len(traced.writes)
        num_outputs = len(graph.outputs) - written
        saved: tuple[int, ...] = ()
        backward = None
        if wanted:  # recording, and some input wants its gradient
            joint = _keep_gradients(autodiff.gradient_graph(graph), len(graph.outputs), needs)
            split = autodiff.split_joint(joint, len(avals), len(graph.outputs))
            graph, saved = split.forward, split.saved_inputs
            backward = self._program(split.backward, "backward", context)
        # normalised once here, so each call can make its results from them as they are
        out_avals = [Aval(tuple(v.aval.shape), np.dtype(v.aval.dtype))  # type: ignore[union-attr]
                     for v in graph.outputs]  # (inferred above: every value has an aval)
        # the algorithms' pass runs where a user's would: after dead code, before fusion
        choose = (choose_convolutions,) if algorithms is not None else ()
        forward = self._program(graph, "forward", context, choose)
        plain = (len(out_avals) == 1 and backward is None and not forward.num_random
                 and not forward.scalar_outputs and traced.regroup is None)
        entry = _Entry(forward, backward, out_avals, num_outputs, avals, training,
                       needs, saved, wanted, forward.single() if plain else None,
                       _Layouts.of(forward, graph.inputs), traced, traced.feed,
                       convolutions=algorithms.chosen if algorithms else {},
                       arg_avals=avals[:len(avals) - len(traced.feed)])
        if self._tunes(entry):  # NOTE [Layout by measurement]
            layout = self._program(graph, "forward", context, (pretranspose_weights, *choose))
            if len(layout.graph.inputs) > len(forward.graph.inputs):  # it rewrote a layer
                entry.tuning = _Tuning(entry, layout, self.tuner, plain, graph.inputs)
                entry.plain = None
        return entry

    def _autotuned(self) -> bool:
        """Whether to choose by measurement (``autotune``, else the ``AUTOTUNE`` flag)."""
        return bool(config.flag("AUTOTUNE")) if self.autotune is None else self.autotune

    def _tunes(self, entry: _Entry) -> bool:
        """Whether to measure the layouts: autotune on, inference, no random node (timing
        would draw numbers), nothing written back, and no layout pass asked for already."""
        return (self._autotuned() and entry.backward is None and not entry.forward.num_random
                and not (entry.traced and entry.traced.writes)
                and pretranspose_weights not in self.passes)

    def _program(self, graph: ir.Graph, name: str, context: PassContext,
                 extra: tuple[Any, ...] = ()) -> Program:
        optimised, _ = run_pipeline(graph, disabled=self.disabled, passes=self.passes + extra,
                                    context=context)
        program = compile_graph(optimised, static_alloc=self.static_alloc,
                                static_shape=self.static_shape, name=name)
        if config.flag("DEBUG"):  # HYBRIDLAB_DEBUG=1: show every program as it is compiled
            print(f"# {program.filename}\n{program.source}")
        return program


class _TapeOp:
    """What the autograd tape stores for a CachedOp call: its gradient is a program."""

    name = "CachedOp"

    def __init__(self, entry: _Entry, residuals: list[Any]) -> None:
        self.entry, self.residuals = entry, residuals

    def grad(self, F: Any, inputs: list[Any], outputs: list[Any], out_grads: list[Any]
             ) -> list[Any]:
        if autograd._MODE.recording:  # create_graph=True: the backward must go on the tape
            raise MissingGradientError(
                "autograd.grad(..., create_graph=True) went through a hybridized block: its "
                "backward runs as one compiled program, which the tape cannot differentiate "
                "again. For gradients of gradients call net.hybridize(False) first (the "
                "imperative block records every backward operator)")
        entry = self.entry
        result: list[Any] = [None] * len(entry.in_avals)
        # each gradient on its input's device (MXNet's rule), computed where the data is
        grads = [ndarray.empty_like_aval(entry.in_avals[i], inputs[i]._ctx)
                 for i in entry.wanted]
        # the values written to fed arrays (running statistics) pass no gradient back
        written = [ndarray.from_numpy(np.zeros(a.shape, a.dtype), inputs[0]._ctx) for a in
                   entry.out_avals[entry.num_outputs:entry.num_outputs + len(entry.traced.writes)]
                   ] if entry.traced is not None and entry.traced.writes else []
        backward: Any = entry.backward  # (a recorded call's entry has one)
        contexts = tuple(RunContext(True, random.next_generator())  # (a loop's body: its
                         for _ in range(backward.num_random))  # kernel takes the mode)
        _push(backward, self.residuals + list(out_grads) + written, grads, contexts,
              "CachedOp_backward")
        for index, grad in zip(entry.wanted, grads):
            result[index] = grad
        return result  # None: no gradient for that input (autograd skips it)


def _keep_gradients(joint: ir.Graph, num_outputs: int, needs: tuple[bool, ...]) -> ir.Graph:
    """The joint graph returning only the gradients someone reads: dead code elimination
    then drops the work only the others needed (the data's ``dx = g . W``)."""
    if all(needs):
        return joint
    grads = joint.outputs[num_outputs:]
    kept = joint.outputs[:num_outputs] + tuple(g for g, need in zip(grads, needs) if need)
    return eliminate_dead_code(ir.Graph(joint.nodes, joint.inputs, kept), PREDICTION).graph


SHORT = 1e-3  # seconds of CPU: a program shorter runs in the caller of an idle engine
# (NOTE [Run now]): handing it to a worker thread and waiting for it costs tens of us (a
# batch-1 MLP's whole work); a caller that pushes without waiting overlaps only its own
# Python time, ~20 us a call, with the worker's -- 2% of a 1 ms program, less than the
# hand-off costs below that; a longer program goes to a worker
TIMED_CALLS = 5  # the first calls timed to decide, the fastest counting (the first ones
# are cold); in the worker's CPU time (``thread_time``), which a busy machine does not inflate


def _timed(run: Any, entry: _Entry) -> Any:
    """``run`` timed, until ``entry`` has ``TIMED_CALLS`` durations and can decide whether
    its program is short (NOTE [Run now])."""
    def timed() -> None:
        start = time.thread_time()
        run()
        entry.seconds.append(time.thread_time() - start)
        if len(entry.seconds) >= TIMED_CALLS:
            entry.short = min(entry.seconds) < SHORT

    return timed


def _computed(x: Any) -> Any:
    """The aval of an input whose ``_data`` is None (NOTE [Inputs without values]: pending,
    or never computed -- which the pushed op finds out when it runs, as ``nd``'s do)."""
    return x._aval


def _push(program: Program | _Tuning, inputs: Sequence[Any], outputs: Sequence[Any],
          contexts: tuple[RunContext, ...], name: str, layouts: _Layouts | None = None,
          align: range = range(0)) -> None:
    """One engine op: run ``program`` on the inputs' data, fill the outputs' data (those
    in ``align``, parameters, aligned as every parameter value: NOTE [Aligned weights])."""

    missing = ndarray._unfilled(inputs)  # NOTE: [Inputs without values] as ndarray's

    def run() -> None:
        # A result may be an input's own array (a graph returning its input, or a view
        # of it): NOTE [Immutable buffers] in ndarray.py lets them share it, since no
        # array's data is ever written after it was stored.
        if missing is not None:  # an input never computed: ndarray's error, not numpy's
            ndarray._refuse_unfilled(missing)
        arrays = [x._data for x in inputs]
        if layouts is not None:
            arrays = layouts.extend(arrays)
        for i, (array, value) in enumerate(zip(outputs, program.run(arrays, contexts))):
            array._data = aligned(value) if i in align else value

    # NOTE: [Lazy reads and writes] ``map`` objects, not lists: the engine turns them
    # into tuples when it links the op, and the NaiveEngine, which has nothing to link,
    # never builds them at all (two list comprehensions saved on every call)
    engine.current().push(run, map(_VAR, inputs), map(_VAR, outputs), name,
                          outputs[0]._ctx if outputs else None)  # (its results' device)



class SymbolCachedOp(CachedOp):
    """MXNet's ``nd.CachedOp(sym, flags=())``: ``sym`` compiled once per input signature,
    called with its inputs in ``sym.list_inputs()`` order. ``out=`` (an NDArray, or a list
    for several outputs) receives the results, written in place; ``flags`` are MXNet's
    ``static_alloc``/``static_shape`` pairs."""

    def __init__(self, sym: Any, flags: Any = ()) -> None:
        given = dict(flags)
        unknown = set(given) - {"static_alloc", "static_shape"}
        if unknown:
            raise ValueError(f"nd.CachedOp: unknown flags {sorted(unknown)}; hybridlab takes "
                             f"static_alloc and static_shape")
        super().__init__(sym, static_alloc=bool(given.get("static_alloc")),
                         static_shape=bool(given.get("static_shape")))

    def __call__(self, *args: Any, out: Any = None) -> Any:
        results = super().__call__(*args)
        if out is None:
            return results
        outs, got = (out, results) if isinstance(out, (list, tuple)) else ([out], [results])
        if len(outs) != len(got):
            raise ValueError(f"nd.CachedOp: out= has {len(outs)} arrays for {len(got)} outputs")
        ndarray._assign_all(list(outs), list(got))
        return out

