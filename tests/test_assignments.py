"""The course's nbgrader assignments: built from the lessons, graded by the lessons' checks.

``tools/assignments.py`` builds one assignment per lesson from the lesson's questions, its
reference solutions and their checks; ``tools/grade.py`` autogrades submissions, each in a
sandbox. The grading round here is the one a course runs: the assignments generated, three
students' submissions autograded -- the reference solutions (full marks), the released
notebooks unchanged (zero), one wrong answer per lesson (that exercise's points lost, the
check's explanation as its feedback) -- and the grades exported to CSV. Hostile
submissions are graded too: one that loops forever, one that imports a missing module, one
that is not JSON, and one that tries to delete a file outside its folder.
"""

from __future__ import annotations

import csv
import functools
import html
import importlib.util
import json
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import assignments  # noqa: E402 -- tool scripts, not a package
import grade  # noqa: E402
import sandbox  # noqa: E402

pytestmark = pytest.mark.skipif(importlib.util.find_spec("nbgrader") is None,
                                reason="nbgrader (the instructor extra) is not installed")

# One wrong answer per lesson: (exercise, the answer cell's new source).
WRONG = {"00": (2, "FC_COUNT = 2"), "01": (2, "FANCY_FUNC_NODES = 4"),
         "02": (2, "PRINT_COUNT = 2"), "03": (3, "BARRIER = 'nd.waitall()'"),
         "04": (1, "SPAN = 5\nMAKESPAN_ON_ONE_WORKER = 5\nMAKESPAN_ON_TWO_WORKERS = 3"),
         "05": (1, "CSE_COUNT = 1"), "06": (4, "RETRACE_RATIO = 1"),
         "07": (4, "TAPE_BYTES = 1"), "08": (1, "PARAMS_SIZE = 100"),
         "09": (1, "DENSE_CONCAT_BYTES = 1"), "10": (2, "FASTEST_FOR_1KB = 'ring'"),
         "11": (4, "DISPATCH_RATIO = 1.0"),
         "12": (2, "PADDING = 1 - (3 + 5 + 8 + 9 + 20 + 31) / (32 * 6)")}


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """Every lesson's assignment, built and released into a fresh course directory."""
    folder = tmp_path_factory.mktemp("course")
    built = assignments.build(folder, assignments.lessons_with_exercises())
    assignments.release(folder, built)
    return folder, built


def released(folder: Path, assignment) -> nbformat.NotebookNode:
    return nbformat.read(folder / "release" / assignment.name / f"{assignment.name}.ipynb",
                         as_version=4)


def submit(folder: Path, student: str, assignment, book) -> None:
    target = folder / "submitted" / student / assignment.name
    target.mkdir(parents=True, exist_ok=True)
    nbformat.write(book, target / f"{assignment.name}.ipynb")


def answered(folder: Path, assignment, answers: dict[int, str] | None = None):
    """The released notebook with every answer cell filled: the reference solution, or
    ``answers[N]`` for exercise N."""
    book = released(folder, assignment)
    for exercise in assignment.exercises:
        cell = next(c for c in book.cells
                    if c.metadata["nbgrader"]["grade_id"] == f"exercise-{exercise.number}-answer")
        cell.source = (answers or {}).get(exercise.number,
                                          assignments.strip_markers(exercise.answer))
    return book


def available(exercise) -> bool:
    return not exercise.requires or importlib.util.find_spec(exercise.requires) is not None


def solution_lines(assignment) -> set[str]:
    """The lines of the solution regions that appear nowhere else in the solution file."""
    text = assignment.solution.read_text().splitlines()
    inside, region, outside = False, set(), set()
    for line in text:
        if line.strip() in (assignments.BEGIN, assignments.END):
            inside = line.strip() == assignments.BEGIN
            continue
        (region if inside else outside).add(line.strip())
    return {line for line in region - outside if len(line) > 3}


def test_every_lesson_with_exercises_is_an_assignment(course):
    folder, built = course
    lessons = sorted(ROOT.glob("lessons/[0-9][0-9]-*.md"))
    assert [a.name for a in built] == [f"lesson{p.name[:2]}" for p in lessons]
    for assignment in built:
        book = released(folder, assignment)
        tests = [c for c in book.cells if c.metadata["nbgrader"].get("grade")]
        assert [c.metadata["nbgrader"]["points"] for c in tests] == \
            [e.points for e in assignment.exercises]
        assert all("check_" in c.source for c in tests)


def test_released_notebooks_hold_no_solution_text(course):
    folder, built = course
    for assignment in built:
        secret = solution_lines(assignment)
        hidden = [line for e in assignment.exercises for call in e.hidden
                  for line in [f"feedback = {call}"]]
        assert secret, assignment.name
        cells = released(folder, assignment).cells
        text = "\n".join(cell.source for cell in cells)
        code = {line.strip() for c in cells if c.cell_type == "code"
                for line in c.source.splitlines()}
        prose = "\n".join(c.source for c in cells if c.cell_type == "markdown")
        leaked = sorted((secret | set(hidden)) & code) + \
            [line for line in secret if len(line) > 30 and line in prose]
        assert not leaked, f"{assignment.name} shows solution text: {leaked[:3]}"
        assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text


def expected_feedback(assignment, number: int, wrong: str, monkeypatch) -> str:
    """What the check says of the wrong answer, computed here from the solution module."""
    namespace: dict = {}
    exec(compile(assignment.solution.read_text(), str(assignment.solution), "exec"), namespace)
    exec(wrong, namespace)
    module = importlib.import_module(f"hybridlab.exercises.lesson{assignment.number}")
    from hybridlab.exercises import clocks

    compile_clock = functools.partial(clocks.CompileClock, monkeypatch)  # undone after
    scope = {**vars(module), **vars(clocks), "CompileClock": compile_clock, **namespace}
    (exercise,) = [e for e in assignment.exercises if e.number == number]
    for call in exercise.tests:
        feedback = eval(call, scope)
        if not feedback:
            return feedback.message
    raise AssertionError(f"{assignment.name}: the wrong answer {wrong!r} passes its checks")


def test_the_grading_round(course, monkeypatch):
    """Full marks, zero and the expected partial marks, exported to CSV."""
    folder, built = course
    expected = {}
    for assignment in built:
        full = sum(e.points for e in assignment.exercises if available(e))
        assert assignment.number in WRONG, f"add a wrong answer for {assignment.name} to WRONG"
        number, wrong = WRONG[assignment.number]
        (lost,) = [e.points for e in assignment.exercises if e.number == number]
        submit(folder, "reference", assignment, answered(folder, assignment))
        submit(folder, "unchanged", assignment, released(folder, assignment))
        submit(folder, "one_wrong", assignment, answered(folder, assignment, {number: wrong}))
        expected |= {(assignment.name, "reference"): full, (assignment.name, "unchanged"): 0,
                     (assignment.name, "one_wrong"): full - lost}
    outcomes, grades = grade.grade(folder, [], grade.Limits(time_limit=300),
                                   ["reference", "unchanged", "one_wrong"])
    assert all(o.graded for o in outcomes), [o for o in outcomes if not o.graded]
    rows = {(r["assignment"], r["student_id"]): r for r in csv.DictReader(grades.open())}
    scores = {key: float(row["score"]) for key, row in rows.items()}
    assert scores == expected
    for assignment in built:
        assert float(rows[assignment.name, "reference"]["max_score"]) == assignment.points
        number, wrong = WRONG[assignment.number]
        page = (folder / "feedback" / "one_wrong" / assignment.name /
                f"{assignment.name}.html").read_text()
        message = expected_feedback(assignment, number, wrong, monkeypatch)
        assert html.escape(message, quote=False) in page or message in page, assignment.name


def hostile(folder: Path, assignment, student: str, code: str) -> None:
    """A submission whose first answer cell runs ``code``; the rest are right."""
    book = answered(folder, assignment)
    first = assignment.exercises[0].number
    cell = next(c for c in book.cells
                if c.metadata["nbgrader"]["grade_id"] == f"exercise-{first}-answer")
    cell.source = code + "\n" + cell.source
    submit(folder, student, assignment, book)


@pytest.mark.skipif(sandbox.landlock_abi() < 1, reason="no Landlock on this system: graded "
                    "code is not kept from writing elsewhere (grade in a container)")
def test_hostile_submissions_are_graded_without_harm(course, tmp_path):
    folder, built = course
    (assignment,) = [a for a in built if a.name == "lesson01"]
    sentinel = tmp_path / "sentinel.txt"
    sentinel.write_text("the instructor's file")
    relative = "../" * 12 + str(sentinel).lstrip("/")
    hostile(folder, assignment, "loops", "while True:\n    pass")
    hostile(folder, assignment, "imports", "import a_module_nobody_installed")
    hostile(folder, assignment, "hogs", "hoard = bytearray(3 * 2**30)")  # over the 2 GiB limit
    hostile(folder, assignment, "stubborn", "import signal, time\n"  # ignores the interrupt
                                            "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                                            "while True:\n    time.sleep(1)")
    hostile(folder, assignment, "deletes", f"import os\ntry:\n    os.remove({relative!r})\n"
                                           f"except OSError:\n    pass\n"
                                           f"os.remove({str(sentinel)!r})")
    target = folder / "submitted" / "garbled" / assignment.name
    target.mkdir(parents=True)
    (target / f"{assignment.name}.ipynb").write_text('{"cells": [ this is not JSON')
    outcomes, grades = grade.grade(folder, [assignment.name],
                                   grade.Limits(time_limit=60, cell_timeout=5, memory_mb=2048),
                                   ["loops", "imports", "hogs", "stubborn", "deletes", "garbled"])
    rows = {r["student_id"]: float(r["score"]) for r in csv.DictReader(grades.open())
            if r["assignment"] == assignment.name}
    first = assignment.exercises[0].points
    assert rows["loops"] == rows["imports"] == rows["hogs"] == rows["deletes"] == \
        assignment.points - first
    assert rows["garbled"] == rows["stubborn"] == 0
    notes = {o.student: o.note for o in outcomes}
    assert "not a valid notebook" in notes["garbled"]
    assert "timed out" in notes["stubborn"]
    assert sentinel.read_text() == "the instructor's file"


def test_a_slow_submission_is_stopped_at_the_time_limit(course):
    """Cells each within their timeout, the whole past the submission's time limit: the
    grader kills the kernel, and the submission is graded zero."""
    folder, built = course
    (assignment,) = [a for a in built if a.name == "lesson01"]
    hostile(folder, assignment, "slow", "import time\ntime.sleep(300)")
    outcomes, grades = grade.grade(folder, [assignment.name],
                                   grade.Limits(time_limit=8, cell_timeout=600), ["slow"])
    (slow,) = [o for o in outcomes if o.student == "slow"]
    assert not slow.graded and "time limit" in slow.note
    rows = {r["student_id"]: float(r["score"]) for r in csv.DictReader(grades.open())
            if r["assignment"] == assignment.name}
    assert rows["slow"] == 0


def test_a_question_without_points_is_refused(tmp_path, monkeypatch):
    lesson = ROOT / "lessons" / "00-tour.md"
    edited = tmp_path / lesson.name
    edited.write_text(lesson.read_text().replace("1. **(2 points)** Build", "1. Build"))
    with pytest.raises(assignments.AssignmentError, match=r"00-tour.md:\d+: exercise 1 has "
                                                            "no points"):
        assignments.read_questions(edited)


def test_a_grading_call_to_an_unknown_name_is_refused(tmp_path, monkeypatch):
    solution = ROOT / "lessons" / "solutions" / "00_tour.py"
    monkeypatch.setattr(assignments, "SOLUTIONS", tmp_path)
    (tmp_path / solution.name).write_text(solution.read_text().replace(
        "check_fc_count(lesson_net(), FC_COUNT)", "check_fc_count(lesson_net(), FC_CONUT)"))
    with pytest.raises(assignments.AssignmentError, match="FC_CONUT"):
        assignments.read_assignment(ROOT / "lessons" / "00-tour.md")


def test_a_missing_answer_cell_is_refused(tmp_path, monkeypatch):
    solution = ROOT / "lessons" / "solutions" / "00_tour.py"
    monkeypatch.setattr(assignments, "SOLUTIONS", tmp_path)
    (tmp_path / solution.name).write_text(solution.read_text().replace("# %% Exercise 2\n", ""))
    with pytest.raises(assignments.AssignmentError, match=r"answer cells .* \[1, 3\]"):
        assignments.read_assignment(ROOT / "lessons" / "00-tour.md")


def test_the_source_notebooks_keep_solutions_and_hidden_tests(course):
    folder, built = course
    (assignment,) = [a for a in built if a.name == "lesson04"]
    source = (folder / "source" / "lesson04" / "lesson04.ipynb").read_text()
    assert "BEGIN HIDDEN TESTS" in source and "check_tree_sum(total, n=13)" in source
    assert json.loads(source)["cells"][0]["metadata"]["nbgrader"]["locked"]
