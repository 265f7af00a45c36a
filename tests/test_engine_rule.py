"""The engine after a failure, seen from NDArrays: every engine follows one rule.

ARCHITECTURE.md ("The engine after a failure") states it: whether an op is skipped, fails
or runs is decided by push order alone -- which writer each input comes from, and whether
that writer's failure was reported before the push -- never by how far the workers got.
So a program with failures and later writes into the arrays they left empty ends with the
same errors, in the same places, and the same values on ThreadedEngine(1, 2, 4) and on the
StepEngine (which runs nothing until asked: the other extreme of timing), with the arrays
on two devices, so the ThreadedEngines run them on two streams and copies on copy streams.
NaiveEngine raises each failure at its push, as documented; its errors are the same
teaching errors.
"""

from __future__ import annotations

import pytest
from _sync import within
from hypothesis import given, settings
from hypothesis import strategies as st

import hybridlab as mx
from hybridlab import engine, nd
from hybridlab.errors import MXNetError

N_ARRAYS = 3
step = st.one_of(
    st.tuples(st.sampled_from(["fail", "setrow", "wait"]), st.integers(0, N_ARRAYS - 1),
              st.just(0)),
    st.tuples(st.sampled_from(["add", "iadd", "fill", "copy"]), st.integers(0, N_ARRAYS - 1),
              st.integers(0, N_ARRAYS - 1)),
)


def _outcome(error: BaseException) -> str:
    assert isinstance(error, MXNetError), f"{type(error).__name__}: {error}"
    text = str(error)
    assert "NoneType" not in text and "internal" not in text, text
    return text.split("\n")[0]


def run(program: list) -> list:
    """What each step raised, what wait_all raised, and every array's final value or error."""
    # on two devices, so ops and copies run on several streams (NOTE [A worker per device])
    arrays = [nd.full((2, 2), float(i + 1), ctx=mx.cpu(i % 2)) for i in range(N_ARRAYS)]
    log: list = []
    for number, (kind, target, source) in enumerate(program):
        try:
            if kind == "fail":  # runs on the engine and fails there (not positive definite)
                arrays[target] = nd.linalg_potrf(-nd.ones((2, 2)) * (number + 1))
            elif kind == "add":
                arrays[target] = arrays[source] + number
            elif kind == "iadd":
                arrays[target] += arrays[source]
            elif kind == "setrow":
                arrays[target][0] = number
            elif kind == "fill":
                arrays[target][:] = arrays[source]
            elif kind == "copy":  # onto the target's device: a copy stream's op
                arrays[target] = arrays[source].copyto(mx.cpu(target % 2))
            else:
                arrays[target].wait_to_read()
            log.append(None)
        except Exception as error:
            log.append(_outcome(error))
    for _ in range(len(program) + 1):
        try:
            within(nd.waitall)
            break
        except Exception as error:
            log.append(("waitall", _outcome(error)))
    for array in arrays:
        try:
            log.append(array.asnumpy().tobytes())
        except Exception as error:
            log.append(("read", _outcome(error)))
    return log


@pytest.mark.threads
@settings(max_examples=int(__import__("os").environ.get("RULE_EXAMPLES", "60")), deadline=None)
@given(st.lists(step, min_size=1, max_size=14))
def test_programs_with_failures_and_later_writes_agree_on_every_engine(program):
    outcomes = {}
    for name, made in (("threaded1", lambda: engine.ThreadedEngine(1)),
                       ("threaded2", lambda: engine.ThreadedEngine(2)),
                       ("threaded4", lambda: engine.ThreadedEngine(4)),
                       ("step", engine.StepEngine), ("naive", engine.NaiveEngine)):
        eng = made()
        with engine.engine_scope(eng):
            outcomes[name] = run(program)
        within(eng.close) if hasattr(eng, "close") else None
    for name in ("threaded2", "threaded4", "step"):
        assert outcomes[name] == outcomes["threaded1"], name
