"""The queue stepper: its model is plain Python (tested here), its view a thin widget."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridlab import engine, nd
from hybridlab.lab import queue
from hybridlab.viz import stepper
from hybridlab.viz.bundle import PNG, TEXT, WIDGET_VIEW


@pytest.fixture
def step_engine():
    previous = engine.current()
    eng = engine.StepEngine()
    engine.set_engine(eng)
    try:
        yield eng
    finally:
        engine.set_engine(previous)


def program(arrays: dict):
    """a, b = made; c = a * 2; d = b + c; a += 1 (after c read a): every dependency kind."""
    arrays["a"] = nd.ones((2, 3))
    arrays["b"] = nd.full((2, 3), 3.0)
    arrays["c"] = arrays["a"] * 2
    arrays["d"] = arrays["b"] + arrays["c"]
    arrays["a"] += 1


def test_the_model_shows_states_queues_and_dependency_kinds(step_engine):
    arrays: dict = {}
    model = queue.QueueModel(step_engine, lambda: arrays)
    program(arrays)
    assert model.counts() == {"pushed": 5, "done": 0, "pending": 5, "ready": 2}
    kinds = {(model.number(t), d.seq - model.first_seq, d.kind)
             for t in model.tasks for d in t.deps}
    assert (2, 0, "RAW") in kinds  # c = a * 2 reads a
    assert (4, 2, "WAR") in kinds  # a += 1 waits for the read of a by #2
    assert (4, 0, "WAW") in kinds  # ... and for the write that made a
    queues = model.queues()
    assert [(n, role) for n, role, _ in queues["a"]] == [(0, "write"), (2, "read"), (4, "write")]
    text = model.summary()
    assert text.splitlines()[0].startswith("queue stepper: 5 pushed, 0 done, 5 pending (2 ready)")
    assert "queue a: #0 write, #2 read, #4 write" in text


def test_sync_runs_exactly_what_the_array_needs(step_engine):
    arrays: dict = {}
    model = queue.QueueModel(step_engine, lambda: arrays)
    program(arrays)
    model.sync("c")
    states = [t.state for t in model.tasks]
    assert states == ["done", "ready", "done", "waiting", "ready"]
    assert "c" not in model.sync_choices() and "d" in model.sync_choices()
    with pytest.raises(KeyError, match="no array named 'zz'"):
        model.sync("zz")


def test_step_wait_all_and_reset(step_engine):
    arrays: dict = {}
    model = queue.QueueModel(step_engine, lambda: arrays)
    program(arrays)
    first = model.step()
    assert first is not None and first.state == "done" and model.counts()["done"] == 1
    model.wait_all()
    assert model.counts() == {"pushed": 5, "done": 5, "pending": 0, "ready": 0}
    assert model.step() is None
    model.reset()
    assert model.counts()["pushed"] == 0 and model.queues() == {}
    np.testing.assert_array_equal(arrays["d"].asnumpy(), np.full((2, 3), 5.0))


def test_pinned_bytes_count_existing_inputs_of_pending_tasks(step_engine):
    arrays: dict = {"x": nd.ones((4, 4))}  # pushed before the model: counts as existing
    model = queue.QueueModel(step_engine, lambda: arrays)
    model.wait_all()
    arrays["y"] = arrays["x"] * 3  # pending, reads x (64 bytes of float32)
    assert model.pinned_bytes() == 64
    arrays["z"] = arrays["y"] + 1  # reads y, which does not exist yet: nothing more
    assert model.pinned_bytes() == 64
    model.wait_all()
    assert model.pinned_bytes() == 0


def test_a_failed_task_is_drawn_failed_its_dependents_skipped_and_the_error_shown(step_engine):
    arrays: dict = {}
    model = queue.QueueModel(step_engine, lambda: arrays)
    arrays["m"] = nd.array([[1.0, 2.0], [2.0, 1.0]])  # not positive definite
    arrays["bad"] = nd.linalg.potrf(arrays["m"])
    arrays["after"] = arrays["bad"] * 2
    arrays["fine"] = arrays["m"] + 1
    model.sync("after")
    states = {t.name: t.state for t in model.tasks}
    assert states["linalg_potrf"] == "failed" and states["_mul_scalar"] == "skipped"
    assert "operator 'linalg_potrf' failed" in model.error and "pushed at" in model.error
    assert model.summary().splitlines()[-1].startswith("MXNetError")
    model.sync("fine")  # unrelated arrays stay valid
    np.testing.assert_array_equal(arrays["fine"].asnumpy(), [[2.0, 3.0], [3.0, 2.0]])


def test_large_queues_are_windowed(step_engine):
    arrays: dict = {"x": nd.zeros((1,))}
    model = queue.QueueModel(step_engine, lambda: arrays)
    for _ in range(150):
        arrays["x"] = arrays["x"] + 1
    shown, hidden = model.window()
    # the ready frontier (the first task, making x) + the most recent WINDOW tasks
    assert len(shown) == queue.WINDOW + 1 and hidden == 151 - len(shown)
    assert shown[0] is step_engine.ready[0]
    assert f"({hidden} older tasks hidden)" in model.summary()
    assert any(t in shown for t in step_engine.ready)


def test_a_model_needs_a_step_engine():
    with pytest.raises(TypeError, match="needs a StepEngine"):
        queue.QueueModel(engine.NaiveEngine())


OPS = st.lists(st.tuples(st.sampled_from(["add", "mul", "inplace", "neg"]),
                         st.integers(0, 2), st.integers(0, 2)), min_size=1, max_size=10)
CLICKS = st.lists(st.one_of(st.just(("step",)), st.tuples(st.just("sync"), st.integers(0, 2))),
                  max_size=12)


def run_program(ops, arrays):
    for op, i, j in ops:
        x, y = arrays[f"v{i}"], arrays[f"v{j}"]
        if op == "add":
            arrays[f"v{i}"] = x + y
        elif op == "mul":
            arrays[f"v{j}"] = x * y
        elif op == "inplace":
            x += y
        else:
            arrays[f"v{i}"] = -y


@settings(max_examples=40, deadline=None)
@given(ops=OPS, clicks=CLICKS)
def test_any_click_sequence_gives_the_naive_engines_values(ops, clicks):
    """Clicks through the widget's model change states exactly as the engine's own calls,
    and the values in the end equal NaiveEngine's."""
    start = {f"v{i}": np.arange(3, dtype=np.float32) + i for i in range(3)}
    with engine.engine_scope("NaiveEngine"):
        expected = {k: nd.array(v) for k, v in start.items()}
        run_program(ops, expected)
        expected = {k: v.asnumpy() for k, v in expected.items()}
    with engine.engine_scope(engine.StepEngine()) as eng:
        arrays = {k: nd.array(v) for k, v in start.items()}
        model = queue.QueueModel(eng, lambda: arrays)
        model.wait_all()
        run_program(ops, arrays)
        for click in clicks:
            before = {t.seq for t in eng.tasks if t.state == "done"}
            if click[0] == "step":
                ready = [t.seq for t in eng.ready]
                ran = model.step()
                assert (ran is None) == (not ready)
                if ran is not None:
                    assert ran.seq == ready[0] and ran.state == "done"
            else:
                name = f"v{click[1]}"
                model.sync(name)
                writer = arrays[name]._var._writer
                assert writer is None or writer.state == "done"
            after = {t.seq for t in eng.tasks if t.state == "done"}
            assert before <= after
        model.wait_all()
        got = {k: v.asnumpy() for k, v in arrays.items()}
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name])


@pytest.mark.viz
def test_the_widget_bundle_has_view_png_and_text(step_engine):
    pytest.importorskip("ipywidgets")
    arrays: dict = {}
    view = stepper.QueueStepper(queue.QueueModel(step_engine, lambda: arrays))
    program(arrays)
    view.refresh()
    assert "<svg" in view.drawing.value and "per-array queues" in view.queues.value
    assert list(view.choice.options) == ["a", "b", "c", "d"]
    bundle = view._repr_mimebundle_()
    assert WIDGET_VIEW in bundle and bundle[TEXT] == view.model.summary()
    assert bundle.get(PNG, "").startswith("iVBOR")  # base64 of the PNG signature
    view.buttons["Step"].click()
    assert view.model.counts()["done"] == 1 and "1</b> done" in view.counter.value
    view.choice.value = "d"
    view.buttons["Sync on"].click()
    assert [t.state for t in view.model.tasks][:4] == ["done"] * 4
    view.close()


@pytest.mark.viz
def test_queue_stepper_installs_a_step_engine_and_gives_the_old_one_back():
    pytest.importorskip("ipywidgets")
    before = engine.current()
    with stepper.queue_stepper(arrays=lambda: {}) as view:
        assert isinstance(engine.current(), engine.StepEngine)
        assert view.model.engine is engine.current()
    assert engine.current() is before
