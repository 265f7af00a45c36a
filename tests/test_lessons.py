"""The lessons: notebooks in sync with their sources, and every exercise solvable.

The reference solutions in ``lessons/solutions/`` must pass their checks; the checks
themselves must be able to fail (``tests/test_exercises.py``).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import sync_notebooks  # noqa: E402 -- a tool script, not a package
from _clock import CompileClock, TaskClock, WorkerClock, stepping_clock  # noqa: E402

from hybridlab import exercises, random  # noqa: E402


def solution(name: str):
    """Import ``lessons/solutions/<name>.py`` as a module."""
    path = ROOT / "lessons" / "solutions" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"solution_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def _seeded():
    random.seed(0)


def test_every_lesson_has_a_notebook_with_the_same_cells():
    assert sync_notebooks.lesson_paths(), "no lessons found"
    assert sync_notebooks.check(sync_notebooks.lesson_paths()) == []


def test_the_check_notices_an_edited_lesson(tmp_path):
    lesson = sync_notebooks.lesson_paths()[0]
    edited = tmp_path / lesson.name
    edited.write_text(lesson.read_text() + "\n```{code-cell} ipython3\n1 + 1\n```\n")
    problems = sync_notebooks.check([edited])
    assert len(problems) == 1 and "differs" in problems[0]


def test_every_lesson_opens_with_goals_and_ends_with_exercises():
    for lesson in sync_notebooks.lesson_paths():
        text = lesson.read_text()
        assert "**What you will learn**" in text, lesson.name
        exercises_part = text.split("## Exercises", 1)[1]
        numbered = [line for line in exercises_part.splitlines() if line[:2] in ("1.", "2.", "3.")]
        assert len(numbered) >= 3 and "## Summary" in text, lesson.name


def test_lesson00_solutions():
    sol = solution("00_tour")
    assert exercises.check_tour_mlp(sol.tour_mlp())
    assert exercises.check_fc_count(sol.lesson_net(), sol.FC_COUNT)
    # a deterministic clock (one tick per engine task): the guess is judged against 5.0
    from _clock import TaskClock

    assert exercises.check_speedup_guess(sol.lesson_net(), sol.SPEEDUP_GUESS, calls=3,
                                         rounds=3, timer=TaskClock())


def test_lesson01_solutions():
    sol = solution("01_imperative_vs_symbolic")
    assert exercises.check_symbol_program(sol.exercise_symbol)
    assert exercises.check_fancy_func_nodes(sol.FANCY_FUNC_NODES)
    assert exercises.check_dense_from_primitives(sol.dense_from_primitives)
    assert exercises.check_held_bytes(sol.HELD_BYTES)


def test_lesson02_solutions(tmp_path):
    sol = solution("02_hybridize")
    assert exercises.check_hybridizable(sol.RowScaler)
    assert exercises.check_print_count(sol.PRINT_COUNT)
    assert exercises.check_export_roundtrip(*sol.export_roundtrip(str(tmp_path)))
    assert exercises.check_arena_bytes(sol.ARENA_BYTES)


def test_lesson03_solutions():
    sol = solution("03_lazy_evaluation")
    assert exercises.check_sync_points(sol.SYNC_POINTS)
    assert exercises.check_ready_after_two_steps(sol.READY_AFTER_TWO_STEPS)
    assert exercises.check_barrier(sol.BARRIER)
    assert exercises.check_bounded_loop(sol.train)
    from _clock import HandOverClock  # a task costs t2, a barrier adds the hand-over t3

    assert exercises.check_barrier_ratio(sol.BARRIER_RATIO, steps=20, rounds=3,
                                         timer=HandOverClock(tick=1e-5, hand_over=2e-5))


def test_lesson04_solutions():
    sol = solution("04_schedules_span_and_devices")
    assert exercises.check_span(sol.SPAN)
    assert exercises.check_makespan(1, sol.MAKESPAN_ON_ONE_WORKER)
    assert exercises.check_makespan(2, sol.MAKESPAN_ON_TWO_WORKERS)
    assert exercises.check_speedup(sol.SPEEDUP, timer=WorkerClock(), rounds=3)
    assert exercises.check_enough_workers(sol.ENOUGH_WORKERS)
    assert exercises.check_tree_sum(sol.total)


def test_lesson10_solutions():
    sol = solution("10_many_devices")
    assert exercises.check_allreduce_time(sol.RING_TIME, "ring", 8, 10e6, 20e-6, 2e-9)
    assert exercises.check_fastest_way(sol.FASTEST_FOR_1KB, 16, 1e3, 50e-6, 1e-9)
    assert exercises.check_break_even_batch(sol.BREAK_EVEN_BATCH, 40e-6, 1e-3, 8e-3)
    assert not exercises.check_break_even_batch(sol.BREAK_EVEN_BATCH - 1, 40e-6, 1e-3, 8e-3)
    assert not exercises.check_fastest_way("ring", 16, 1e3, 50e-6, 1e-9)
    assert not exercises.check_allreduce_time(sol.RING_TIME * 1.5, "ring", 8, 10e6, 20e-6, 2e-9)
    # the task-count cost model: every engine task costs the same
    assert exercises.check_two_device_step(sol.TWO_DEVICE_RATIO, timer=TaskClock(), rounds=3)
    assert not exercises.check_two_device_step(0.5, timer=TaskClock(), rounds=3)


def test_lesson05_solutions():
    sol = solution("05_passes_and_the_memory_planner")
    assert exercises.check_cse_count(sol.CSE_COUNT)
    assert exercises.check_biggest_stage(sol.BIGGEST_STAGE)
    assert exercises.check_times_one_pass(sol.drop_times_one)
    assert exercises.check_liveness_bound(sol.LIVENESS_BOUND)


def test_lesson06_solutions(monkeypatch):
    sol = solution("06_hybridize_pitfalls")
    assert exercises.check_sign_gate(sol.SignGate)
    assert exercises.check_flatten(sol.FlattenBlock)
    assert exercises.check_last_column(sol.LastColumn)
    assert exercises.check_centre(sol.Centre)
    assert exercises.check_mixed_tasks(sol.MIXED_TASKS)
    assert exercises.check_row_means(sol.AddRowMeans)
    assert exercises.check_retrace_cost(sol.RETRACE_RATIO, timer=CompileClock(monkeypatch))


def test_lesson07_solutions():
    from hybridlab.exercises import lesson07

    sol = solution("07_autograd_and_memory")
    assert lesson07.check_gradients(sol.gradients)
    assert lesson07.check_numeric_gradient(sol.numeric_gradient)
    assert lesson07.check_train_step(sol.train_step)
    assert lesson07.check_tape_bytes(sol.TAPE_BYTES)


def test_lesson08_solutions(tmp_path):
    from hybridlab.exercises import lesson08

    sol = solution("08_export_and_deployment")
    assert lesson08.check_params_size(sol.PARAMS_SIZE)
    assert lesson08.check_json_interpreter(sol.run_json)
    net = sol.classifier()
    path = sol.export_any_batch(net, str(tmp_path / "any.onnx"))
    assert lesson08.check_onnx_batch(path, net)


def test_lesson11_solutions():
    from hybridlab.exercises import lesson11

    sol = solution("11_hybrid_modes_elsewhere")
    assert lesson11.check_jit_rewrite(sol.clip_norm)
    assert lesson11.check_jaxpr_converter(sol.convert)
    # a stepping clock: the call takes 0.1 ms, the wait 1.9 ms, a ratio of 20
    assert lesson11.check_dispatch_ratio(sol.DISPATCH_RATIO, size=64,
                                         timer=stepping_clock([0, 0, 1e-4, 1.9e-3]))


def test_lesson11_torch_solution():
    pytest.importorskip("torch", reason="exercise 3 of lesson 11 needs PyTorch (optional; "
                                        "make test-frameworks runs it)")
    from hybridlab.exercises import lesson11

    assert lesson11.check_graph_count(solution("11_hybrid_modes_elsewhere").GRAPH_COUNT)
def test_lesson09_solutions():
    pytest.importorskip("onnx")
    from hybridlab.exercises import lesson09

    sol = solution("09_real_networks")
    assert lesson09.check_dense_concat_bytes(sol.DENSE_CONCAT_BYTES)
    assert lesson09.check_inception_speedup(sol.INCEPTION_SPEEDUP)
    assert lesson09.check_residual_sums(sol.count_sums)


def test_rebuilt_notebooks_keep_no_addresses_split_prints_or_random_widget_ids():
    import nbformat

    sync = sync_notebooks
    outputs = [nbformat.v4.new_output("stream", name="stdout", text="a\n"),
               nbformat.v4.new_output("stream", name="stdout", text="b\n"),
               nbformat.v4.new_output("stream", name="stderr", text="w\n"),
               nbformat.v4.new_output("execute_result", execution_count=1,
                                      data={"text/plain": "<matplotlib.legend.Legend at "
                                                          "0x7f936dbf4b50>"}),
               nbformat.v4.new_output("execute_result", execution_count=2,
                                      data={"text/plain": "3"})]
    kept = sync.stable_outputs(outputs)
    assert [(o.output_type, o.get("text") or o["data"]["text/plain"]) for o in kept] == [
        ("stream", "a\nb\n"), ("stream", "w\n"), ("execute_result", "3")]
    first, second = "4f0c" + "1" * 28, "9e" + "2" * 30
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {
        "state": {second: {"state": {"child": f"IPY_MODEL_{first}"}}, first: {}}}}
    notebook.cells = [nbformat.v4.new_code_cell("w", outputs=[nbformat.v4.new_output(
        "display_data", data={"application/vnd.jupyter.widget-view+json": {
            "model_id": second}})])]
    text = sync.stable_widget_ids(nbformat.writes(notebook))
    assert first not in text and second not in text
    assert f'"model_id": "{1:032x}"' in text and f"IPY_MODEL_{2:032x}" in text


def test_cells_that_need_a_missing_framework_are_skipped_and_never_rebuilt():
    import nbformat

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("%%requires not_a_framework_here\nimport x"),
                      nbformat.v4.new_code_cell("%%requires numpy\nimport numpy"),
                      nbformat.v4.new_code_cell("1 + 1")]
    assert sync_notebooks.required_modules(notebook) == ["not_a_framework_here", "numpy"]
    with pytest.raises(sync_notebooks.MissingFrameworkError, match="not_a_framework_here"):
        sync_notebooks.check_frameworks(notebook, "99-example.md")
    spec = importlib.util.spec_from_file_location("nb_conftest", ROOT / "notebooks" /
                                                  "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    assert [conftest.missing_modules(cell) for cell in notebook.cells] == [
        ["not_a_framework_here"], [], []]


def test_lesson11_builds_only_with_torch_and_marks_every_torch_cell():
    lesson = sync_notebooks.lesson_paths("11")[0]
    notebook = sync_notebooks.read_lesson(lesson)
    for cell in notebook.cells:
        if cell.cell_type == "code" and "torch" in _names(cell.source):  # not in strings
            assert cell.source.startswith("%%requires torch"), cell.source[:80]
    assert sync_notebooks.required_modules(notebook) == ["onnxscript", "torch"]


def _names(source: str) -> set[str]:
    import io
    import tokenize

    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return {token.string for token in tokens if token.type == tokenize.NAME}


def test_make_notebooks_builds_the_other_lessons_and_fails_for_a_refused_one(monkeypatch,
                                                                               tmp_path):
    built = []

    def build(lesson):
        if lesson.name.startswith("11"):
            raise sync_notebooks.MissingFrameworkError(f"{lesson.name}: needs torch")
        built.append(lesson.name)
        return 0.0

    lessons = [tmp_path / "10-a.md", tmp_path / "11-b.md", tmp_path / "12-c.md"]
    monkeypatch.setattr(sync_notebooks, "lesson_paths", lambda prefix="": lessons)
    monkeypatch.setattr(sync_notebooks, "build", build)
    monkeypatch.setattr(sync_notebooks, "NOTEBOOKS", tmp_path)
    assert sync_notebooks.main([]) == 1
    assert built == ["10-a.md", "12-c.md"]
