"""Build the course's nbgrader assignments from the lessons: `make assignments` -> course/.

What this tool keeps true
-------------------------
An instructor grading the course with nbgrader should not copy exercises, answers or
checks by hand: copies drift. So an assignment is *built* from the three places the
course already keeps them, and from nowhere else:

* the question and its points: the lesson's ``## Exercises`` list
  (``lessons/NN-name.md``), where every item starts with its points, ``**(2 points)**``,
  so a student reading the lesson sees them too;
* the answer: the reference solution (``lessons/solutions/NN_name.py``), a Python file in
  cells (``# %% Exercise N`` starts exercise N's answer cell; the code before the first
  such cell is given to the student) whose ``### BEGIN SOLUTION`` / ``### END SOLUTION``
  regions are what the released assignment leaves for the student to write;
* the grading: the solution's ``# %% Autograding`` cell, ``AUTOGRADE = {N: [calls]}``
  (the lesson's ``check_...`` calls each answer must pass, read with ``ast``, never
  executed here), ``HIDDEN`` (stricter calls run only when grading) and ``REQUIRES`` (an
  optional module an exercise needs, e.g. torch).

Any lesson with an exercises module (``hybridlab/exercises/lessonNN.py``) and a solution
file becomes the assignment ``lessonNN``, so a new lesson needs no change here. Each
assignment is one notebook, ``course/source/lessonNN/lessonNN.ipynb``, in nbgrader's
format: the questions and the given code locked, an answer cell per exercise, and a test
cell per exercise worth its points, calling the checks. ``nbgrader generate_assignment``
then makes the student version in ``course/release/`` (solution regions replaced by
``raise NotImplementedError()``, hidden tests removed). Timed checks are called with the
deterministic clocks of :mod:`hybridlab.exercises.clocks`, as the reference solutions'
tests call them, so a grade never depends on the grading machine's load.

    python3 tools/assignments.py               # every lesson -> course/ (and its release)
    python3 tools/assignments.py 03 05         # only lessons 03 and 05
    python3 tools/assignments.py --course DIR --no-release

Grading the submissions is ``tools/grade.py``'s job (a sandbox per submission).
"""

from __future__ import annotations

import argparse
import ast
import builtins
import importlib
import importlib.util
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LESSONS = ROOT / "lessons"
SOLUTIONS = LESSONS / "solutions"
COURSE = ROOT / "course"
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
ITEM = re.compile(r"^(\d+)\.\s+(.*)$")
POINTS = re.compile(r"^\*\*\((\d+) points?\)\*\*\s*")
CELL = re.compile(r"^# %%(.*)$")
CONFIG = '''"""nbgrader's settings for hybridlab's course (written once by tools/assignments.py:
`make assignments` keeps your edits)."""

c = get_config()  # noqa: F821 -- nbgrader's configuration object
c.CourseDirectory.course_id = "hybridlab"
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\\nraise NotImplementedError()"}
# tools/grade.py sets the kernel (a sandbox) and the limits: --cell-timeout, --time-limit,
# --memory, --cpu. Releasing and collecting through nbgrader's exchange (nbgrader
# release_assignment, nbgrader collect) needs a folder every student can write to:
# c.Exchange.root = "/srv/nbgrader/exchange"
'''


class AssignmentError(ValueError):
    """A lesson, its solutions and its grading disagree; the message says where and how."""


@dataclass
class Exercise:
    number: int
    points: int
    prompt: str  # the lesson's text of the question, without its points
    answer: str = ""  # the answer cell's source, solution regions included
    tests: list[str] = field(default_factory=list)  # check calls, each giving a Feedback
    hidden: list[str] = field(default_factory=list)  # stricter calls, run when grading
    requires: str = ""  # a module the exercise needs where it is graded ("" = none)


@dataclass
class Assignment:
    name: str  # "lesson03": nbgrader's assignment id, and the notebook's name
    number: str  # "03"
    title: str  # the lesson's title, "03 · Lazy evaluation: ..."
    lesson: Path
    solution: Path
    intro: str  # what the exercises section says before its first question
    setup: str  # the code given to the student
    exercises: list[Exercise]

    @property
    def points(self) -> int:
        return sum(exercise.points for exercise in self.exercises)


def lessons_with_exercises(prefixes: list[str] | None = None) -> list[Path]:
    """Every ``lessons/NN-*.md`` with an exercises module and a solution file."""
    found = []
    for lesson in sorted(LESSONS.glob("[0-9][0-9]-*.md")):
        number = lesson.name[:2]
        if prefixes and not any(lesson.name.startswith(p) for p in prefixes):
            continue
        if (ROOT / "hybridlab" / "exercises" / f"lesson{number}.py").exists() and \
                solution_path(lesson) is not None:
            found.append(lesson)
    return found


def solution_path(lesson: Path) -> Path | None:
    path = SOLUTIONS / (lesson.stem.replace("-", "_") + ".py")
    return path if path.exists() else None


def read_assignment(lesson: Path) -> Assignment:
    """The assignment of one lesson, checked for consistency (:class:`AssignmentError`)."""
    solution = solution_path(lesson)
    if solution is None:
        raise AssignmentError(f"{lesson.name}: no solution file {lesson.stem.replace('-', '_')}"
                              f".py in lessons/solutions/")
    title, intro, exercises = read_questions(lesson)
    setup, answers, grading = read_solution(solution)
    number = lesson.name[:2]
    assignment = Assignment(f"lesson{number}", number, title, lesson, solution, intro, setup,
                            exercises)
    where = f"lessons/solutions/{solution.name}"
    numbers = [exercise.number for exercise in exercises]
    for name, table in (("answer cells (# %% Exercise N)", answers),
                        ("AUTOGRADE entries", grading["AUTOGRADE"])):
        if sorted(table) != numbers:
            raise AssignmentError(f"{where}: its {name} are for exercises {sorted(table)}, but "
                                  f"{lesson.name} asks exercises {numbers}; give every "
                                  "question one of each")
    for exercise in exercises:
        exercise.answer = answers[exercise.number]
        exercise.tests = list(grading["AUTOGRADE"][exercise.number])
        exercise.hidden = list(grading["HIDDEN"].get(exercise.number, []))
        exercise.requires = str(grading["REQUIRES"].get(exercise.number, ""))
    check_names(assignment)
    return assignment


def read_questions(lesson: Path) -> tuple[str, str, list[Exercise]]:
    """(title, text before the first question, the questions) of a lesson's exercises."""
    lines = lesson.read_text(encoding="utf-8").splitlines()
    title = next((line[2:].strip() for line in lines if line.startswith("# ")), lesson.stem)
    try:
        start = lines.index("## Exercises") + 1
    except ValueError:
        raise AssignmentError(f"{lesson.name}: no '## Exercises' section") from None
    intro: list[str] = []
    items: list[tuple[int, int, list[str]]] = []  # (number, line number, text lines)
    for index in range(start, len(lines)):
        line = lines[index]
        if line.startswith(("```", "## ", "Reference solutions")):
            break
        match = ITEM.match(line)
        if match:
            items.append((int(match.group(1)), index + 1, [match.group(2)]))
        elif items:
            items[-1][2].append(line.strip())
        else:
            intro.append(line)
    exercises = []
    for number, line_number, text in items:
        points = POINTS.match(text[0])
        if points is None:
            raise AssignmentError(f"{lesson.name}:{line_number}: exercise {number} has no "
                                  f"points; start it with **(N points)**")
        text[0] = text[0][points.end():]
        exercises.append(Exercise(number, int(points.group(1)), "\n".join(text).strip()))
    if not exercises:
        raise AssignmentError(f"{lesson.name}: its '## Exercises' section has no numbered "
                              "questions")
    return title, "\n".join(intro).strip(), exercises


def read_solution(path: Path) -> tuple[str, dict[int, str], dict[str, dict]]:
    """(given code, {N: answer cell}, the autograding tables) of a solution file."""
    cells: list[tuple[str, list[str]]] = [("", [])]
    for line in path.read_text(encoding="utf-8").splitlines():
        marker = CELL.match(line)
        if marker:
            cells.append((marker.group(1).strip(), []))
        else:
            cells[-1][1].append(line)
    setup, answers, grading = [], {}, None
    for title, lines in cells:
        source = "\n".join(lines).strip("\n")
        exercise = re.fullmatch(r"Exercise (\d+)", title)
        if exercise:
            answers[int(exercise.group(1))] = check_regions(source, path, title)
        elif title == "Autograding":
            grading = read_grading(source, path)
        elif title == "":
            setup.append(without_docstring(source))
        else:
            raise AssignmentError(f"{path.name}: unknown cell '# %% {title}'; cells are "
                                  "'# %% Exercise N', '# %% Autograding' or a plain '# %%'")
    if grading is None:
        raise AssignmentError(f"{path.name}: no '# %% Autograding' cell with AUTOGRADE")
    return "\n\n\n".join(part for part in setup if part.strip()), answers, grading


def check_regions(source: str, path: Path, title: str) -> str:
    begins = [line.strip() for line in source.splitlines() if line.strip() == BEGIN]
    ends = [line.strip() for line in source.splitlines() if line.strip() == END]
    if not begins or len(begins) != len(ends):
        raise AssignmentError(f"{path.name}: '# %% {title}' needs a '{BEGIN}' ... '{END}' "
                              "region around what the student writes")
    return source


def without_docstring(source: str) -> str:
    tree = ast.parse(source)
    if tree.body and isinstance(tree.body[0], ast.Expr) and \
            isinstance(tree.body[0].value, ast.Constant) and \
            isinstance(tree.body[0].value.value, str):
        return "\n".join(source.splitlines()[tree.body[0].end_lineno:]).strip("\n")
    return source


def read_grading(source: str, path: Path) -> dict[str, dict]:
    """AUTOGRADE, HIDDEN and REQUIRES as literals (``ast.literal_eval``: nothing runs)."""
    tables: dict[str, dict] = {"AUTOGRADE": {}, "HIDDEN": {}, "REQUIRES": {}}
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and
                isinstance(node.targets[0], ast.Name) and node.targets[0].id in tables):
            raise AssignmentError(f"{path.name}:{getattr(node, 'lineno', '?')}: the "
                                  "Autograding cell holds only AUTOGRADE, HIDDEN and REQUIRES")
        try:
            value = ast.literal_eval(node.value)
        except ValueError:
            raise AssignmentError(f"{path.name}:{node.lineno}: {node.targets[0].id} must be a "
                                  "literal dict") from None
        if not isinstance(value, dict):
            raise AssignmentError(f"{path.name}:{node.lineno}: {node.targets[0].id} must be "
                                  "a dict keyed by exercise number")
        tables[node.targets[0].id] = value
    return tables


def clock_names() -> set[str]:
    """The deterministic clocks a grading call may use (hybridlab.exercises.clocks)."""
    return set(importlib.import_module("hybridlab.exercises.clocks").__all__)


def check_names(assignment: Assignment) -> None:
    """Every name a test calls is a check of the lesson, a clock, or defined by the notebook."""
    module = importlib.import_module(f"hybridlab.exercises.lesson{assignment.number}")
    defined = defined_names(assignment.setup)
    for exercise in assignment.exercises:
        defined |= defined_names(strip_markers(exercise.answer))
    for exercise in assignment.exercises:
        for call in exercise.tests + exercise.hidden:
            for name in used_names(call, assignment, exercise.number):
                if not (hasattr(module, name) or name in clock_names() or name in defined or
                        hasattr(builtins, name)):
                    raise AssignmentError(
                        f"{assignment.solution.name}: AUTOGRADE[{exercise.number}] uses "
                        f"{name!r}, which neither hybridlab.exercises.lesson"
                        f"{assignment.number} nor the clocks nor the notebook define")


def used_names(call: str, assignment: Assignment, number: int) -> set[str]:
    try:
        tree = ast.parse(call, mode="eval")
    except SyntaxError as err:
        raise AssignmentError(f"{assignment.solution.name}: AUTOGRADE[{number}] is not a "
                              f"Python expression: {call!r} ({err.msg})") from None
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


def defined_names(source: str) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        else:
            names |= {target.id for target in ast.walk(node) if isinstance(target, ast.Name)
                      and isinstance(target.ctx, ast.Store)}
    return names


def strip_markers(source: str) -> str:
    """The answer as a student writes it: the solution, without the region's markers."""
    return "\n".join(line for line in source.splitlines() if line.strip() not in (BEGIN, END))


def ordered_names(source: str) -> list[str]:
    """The names an answer cell defines at its top level, in order (what a test reads)."""
    names: list[str] = []
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            found = [node.name]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        else:
            found = []
        names += [name for name in found if name not in names]
    return names


def test_source(assignment: Assignment, exercise: Exercise, defined: set[str]) -> str:
    """The autograded test cell: import the checks, call each, print and assert its
    feedback (a wrong answer fails with the check's explanation)."""
    module = importlib.import_module(f"hybridlab.exercises.lesson{assignment.number}")

    def imports(calls: list[str], skip: set[str]) -> list[str]:
        names = set().union(*(used_names(c, assignment, exercise.number) for c in calls))
        names -= defined | skip  # the student's own definitions are what is graded
        checks = sorted(n for n in names if hasattr(module, n) and n not in clock_names())
        clocks = sorted(n for n in names if n in clock_names())
        return ([f"from hybridlab.exercises.lesson{assignment.number} import "
                 f"{', '.join(checks)}"] if checks else []) + \
               ([f"from hybridlab.exercises.clocks import {', '.join(clocks)}"] if clocks
                else [])

    def calls(texts: list[str]) -> list[str]:
        return [line for call in texts for line in
                (f"feedback = {call}", "print(feedback)", "assert feedback, feedback.message")]

    plural = "s" if exercise.points > 1 else ""
    lines = [f"# Exercise {exercise.number} ({exercise.points} point{plural}): the checks "
             "that grade your answer", *imports(exercise.tests, set()), "",
             *calls(exercise.tests)]
    if exercise.hidden:
        visible = set().union(*(used_names(c, assignment, exercise.number)
                                for c in exercise.tests))
        lines += ["### BEGIN HIDDEN TESTS", *imports(exercise.hidden, visible),
                  *calls(exercise.hidden), "### END HIDDEN TESTS"]
    return "\n".join(lines)


def nbgrader_cell(kind: str, source: str, grade_id: str, points: int = 0):
    """A cell with nbgrader's metadata: ``kind`` is "markdown" or "given" (locked),
    "answer" (a solution cell) or "test" (an autograded cell worth ``points``)."""
    import nbformat

    maker = nbformat.v4.new_markdown_cell if kind == "markdown" else nbformat.v4.new_code_cell
    cell = maker(source)
    cell.id = grade_id
    meta = {"grade": kind == "test", "grade_id": grade_id, "locked": kind != "answer",
            "schema_version": 3, "solution": kind == "answer", "task": False}
    if kind == "test":
        meta["points"] = points
    cell.metadata["nbgrader"] = meta
    if kind != "answer":
        cell.metadata["deletable"] = cell.metadata["editable"] = False
    return cell


def notebook(assignment: Assignment):
    """The assignment's source notebook (solutions and hidden tests included)."""
    import nbformat

    intro = (f"# Assignment {assignment.name}: {assignment.title}\n\n"
             f"The exercises of lesson {assignment.number} "
             f"(`notebooks/{assignment.lesson.stem}.ipynb`), {assignment.points} points in "
             "all. Write each answer where its cell says `YOUR CODE HERE`, keeping the names "
             "the cell's first line gives, and check it as you go with the `check_...` "
             "function its question names: the same checks grade it. The cell after each "
             "answer is its test; run it to see whether the answer passes (grading may add "
             "hidden, stricter cases). A timed check is graded on a deterministic clock "
             "(a cost model, the same on every machine), not on the grading machine's speed. "
             "Before you submit, restart the kernel and run every cell from the top.")
    if assignment.intro:
        intro += "\n\n" + assignment.intro
    given = (f"from hybridlab import exercises\nfrom hybridlab.exercises import "
             f"lesson{assignment.number}\n\n{assignment.setup}").strip()
    cells = [nbgrader_cell("markdown", intro, "intro"),
             nbgrader_cell("given", "# Given: run this cell first.\n" + given, "given")]
    defined = defined_names(given)
    for exercise in assignment.exercises:
        defined |= defined_names(strip_markers(exercise.answer))
    for exercise in assignment.exercises:
        n, plural = exercise.number, "s" if exercise.points > 1 else ""
        needs = f" (needs {exercise.requires})" if exercise.requires else ""
        names = ", ".join(ordered_names(strip_markers(exercise.answer)))
        cells += [
            nbgrader_cell("markdown", f"## Exercise {n} · {exercise.points} point{plural}{needs}"
                                      f"\n\n{exercise.prompt}", f"exercise-{n}-question"),
            nbgrader_cell("answer", f"# Exercise {n}, your answer: {names}\n{exercise.answer}",
                          f"exercise-{n}-answer"),
            nbgrader_cell("test", test_source(assignment, exercise, defined),
                          f"exercise-{n}-test", exercise.points)]
    book = nbformat.v4.new_notebook(cells=cells)
    book.metadata = {"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                    "language": "python"},
                     "language_info": {"name": "python"}}
    return book


def write_text(path: Path, text: str) -> None:
    """Write atomically: a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def build(course: Path, lessons: list[Path]) -> list[Assignment]:
    """Write the course directory's config (once) and every lesson's source notebook."""
    import nbformat

    assignments = [read_assignment(lesson) for lesson in lessons]  # all checked first
    config = course / "nbgrader_config.py"
    if not config.exists():
        write_text(config, CONFIG)
    for assignment in assignments:
        target = course / "source" / assignment.name / f"{assignment.name}.ipynb"
        write_text(target, nbformat.writes(notebook(assignment)) + "\n")
    return assignments


def course_api(course: Path, overrides: dict | None = None):
    """nbgrader's Python API on ``course``: its ``nbgrader_config.py`` read, then
    ``overrides`` ({section: {name: value}}) applied. One import of nbgrader serves every
    assignment (each command-line call would pay several seconds to start)."""
    if importlib.util.find_spec("nbgrader") is None:
        raise AssignmentError("nbgrader is not installed: pip install -e '.[instructor]' "
                              "(make venv installs it)")
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config
    from traitlets.config.loader import PyFileConfigLoader

    config = Config()
    if (course / "nbgrader_config.py").exists():
        config.merge(PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config())
    for section, values in (overrides or {}).items():
        for name, value in values.items():
            setattr(config[section], name, value)
    config.CourseDirectory.root = str(course.resolve())
    os.environ["PATH"] = tool_env()["PATH"]  # nbgrader runs `alembic` by name
    return NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)


def tool_env(**extra: str) -> dict[str, str]:
    """The environment for nbgrader: this interpreter's scripts first on PATH (nbgrader
    runs ``alembic`` by name), and this checkout importable."""
    env = dict(os.environ, **extra)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def release(course: Path, assignments: list[Assignment]) -> None:
    """``nbgrader generate_assignment``: the student versions, in ``course/release/``."""
    api = course_api(course)
    for assignment in assignments:
        result = api.generate_assignment(assignment.name, force=True)
        if not result["success"]:
            raise AssignmentError(f"nbgrader generate_assignment {assignment.name} failed:\n"
                                  f"{(result.get('log', '') + result.get('error', ''))[-3000:]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lessons", nargs="*", help="only lessons whose name starts so (03)")
    parser.add_argument("--course", type=Path, default=COURSE, help="the course directory")
    parser.add_argument("--no-release", action="store_true",
                        help="write the source notebooks only (no nbgrader needed)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    try:
        assignments = build(args.course, lessons_with_exercises(args.lessons))
        if not args.no_release:
            release(args.course, assignments)
    except AssignmentError as err:
        print(f"assignments: {err}", file=sys.stderr)
        return 1
    for assignment in assignments:
        print(f"{assignment.name}: {len(assignment.exercises)} exercises, "
              f"{assignment.points} points")
    where = "source/ and release/" if not args.no_release else "source/"
    print(f"assignments: {len(assignments)} written to {args.course}/{where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
