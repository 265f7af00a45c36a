"""Autograde the course's submissions with nbgrader, each in a sandbox, and export the grades.

What this tool keeps true
-------------------------
``course/submitted/<student>/<assignment>/`` holds what students handed in (``nbgrader
collect``, ``nbgrader zip_collect``, or copied there by hand). For every submission this
tool runs nbgrader's autograder (its Python API, in this one process, which keeps the
gradebook), whose kernel -- the child process that runs the student's code -- is started by
``tools/sandbox.py``: a time limit, a memory limit, a temporary working directory and
``HOME``, and, where the system has Landlock, no write access outside that directory. So a
submission that loops forever is stopped, one that imports something missing or raises
loses the points of what failed, one that is not a notebook is graded zero, and none can
delete or change a file of the course or of the instructor. Then it writes each student's
feedback (``course/feedback/``: every test's output, a wrong answer's being its check's
explanation) and the grades (``course/grades.csv``, nbgrader's CSV export, written
atomically), and prints a table with the reason of every zero.

A submission that fails to grade (not valid JSON, past its time limit) keeps no grade in
the gradebook -- never a stale one from an earlier run -- so the export counts it as zero.

    python3 tools/grade.py                       # every assignment with submissions
    python3 tools/grade.py lesson03 --time-limit 300 --cell-timeout 60 --memory 4096
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import assignments
import sandbox

KERNEL = "hybridlab-sandbox"


@dataclass
class Outcome:
    assignment: str
    student: str
    graded: bool
    note: str = ""  # why it was not graded, or what was stopped
    seconds: float = 0.0


@dataclass
class Limits:
    time_limit: float = 600.0  # seconds for a whole submission
    cell_timeout: int = 120  # seconds for one cell, then it is interrupted
    memory_mb: int = 4096  # the kernel's address space
    cpu_seconds: int = 600  # the kernel's CPU time


def install_kernel(run_root: Path, limits: Limits) -> None:
    """A kernelspec whose kernel starts in tools/sandbox.py, found first on JUPYTER_PATH."""
    spec = run_root / "jupyter" / "kernels" / KERNEL
    spec.mkdir(parents=True)
    argv = [sys.executable, str(Path(sandbox.__file__).resolve()), "--memory",
            str(limits.memory_mb), "--cpu", str(limits.cpu_seconds), "--", "--log-level=ERROR",
            "-f", "{connection_file}"]  # (ipykernel's warning on a local TCP port: noise)
    (spec / "kernel.json").write_text(json.dumps(
        {"argv": argv, "display_name": "hybridlab (sandboxed grading)", "language": "python"}))
    os.environ["JUPYTER_PATH"] = os.pathsep.join(
        filter(None, [str(run_root / "jupyter"), os.environ.get("JUPYTER_PATH")]))


def submissions(course: Path, names: list[str], students: list[str] | None = None
                ) -> list[tuple[str, str]]:
    """(assignment, student) of every submission, for the assignments ``names`` and the
    ``students`` (all when empty)."""
    found = []
    for folder in sorted((course / "submitted").glob("*/*")):
        if folder.is_dir() and (not names or folder.name in names) and \
                (not students or folder.parent.name in students):
            found.append((folder.name, folder.parent.name))
    return found


def unreadable(folder: Path) -> str:
    """Why the notebooks of a submission cannot be graded ("" when they can)."""
    import nbformat

    notebooks = sorted(folder.glob("*.ipynb"))
    if not notebooks:
        return "no notebook handed in"
    for path in notebooks:
        try:
            nbformat.validate(nbformat.read(path, as_version=4))
        except Exception as err:  # any reason a file is not a notebook
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            return f"{path.name} is not a valid notebook ({first[:120]})"
    return ""


# What a submission's own code causes; any other failure is nbgrader's (a database or
# interpreter hiccup), and the submission is graded once more before it counts as zero.
SUBMISSION_FAILURES = ("CellTimeoutError", "DeadKernelError", "UnresponsiveKernelError")


def grade_one(api, course: Path, assignment: str, student: str, limits: Limits,
              run_root: Path) -> Outcome:
    """Autograde one submission under the time limit; write its feedback."""
    start = time.monotonic()
    reason = unreadable(course / "submitted" / student / assignment)
    if reason:
        forget(api, assignment, student)
        return Outcome(assignment, student, False, reason)
    retried = ""
    for attempt in (1, 2):
        result, stopped = autograde_once(api, assignment, student, limits, run_root)
        log = result.get("log", "") + result.get("error", "")
        if result["success"] or stopped or attempt == 2 or \
                any(name in log for name in SUBMISSION_FAILURES):
            break
        retried = f"graded again after nbgrader failed: {last_error(log)}"
    seconds = time.monotonic() - start
    if stopped or not result["success"]:
        forget(api, assignment, student)
        if stopped:
            return Outcome(assignment, student, False,
                           f"stopped at the time limit ({limits.time_limit:g} s)", seconds)
        assignments.write_text(course / "grading-logs" / f"{student}-{assignment}.log", log)
        return Outcome(assignment, student, False, "autograding failed: " + last_error(log) +
                       f" (grading-logs/{student}-{assignment}.log)", seconds)
    feedback = api.generate_feedback(assignment, student, force=True)
    note = "" if feedback["success"] else "no feedback: " + last_error(feedback.get("log", ""))
    return Outcome(assignment, student, True, "; ".join(filter(None, [retried, note])), seconds)


def autograde_once(api, assignment: str, student: str, limits: Limits,
                   run_root: Path) -> tuple[dict, bool]:
    """nbgrader's autograde of one submission, its kernels killed at the time limit;
    (nbgrader's result, whether the time limit stopped it)."""
    root = Path(tempfile.mkdtemp(prefix=f"{student}-{assignment}-", dir=run_root))
    os.environ[sandbox.ROOT_VARIABLE] = str(root)
    stopped: list[int] = []
    timer = threading.Timer(limits.time_limit, lambda: stopped.extend(sandbox.kill_kernels(root)))
    timer.start()
    try:
        result = api.autograde(assignment, student, force=True, create=True)
    finally:
        timer.cancel()
        sandbox.kill_kernels(root)  # nothing it started outlives its grading
    return result, bool(stopped)


def last_error(log: str) -> str:
    """The last exception nbgrader's log names ("CellTimeoutError: A cell timed out ..."),
    else its last line."""
    raised = [found for found in re.findall(r"^\s*(?:\w+\.)*(\w+(?:Error|Exception): .+)$",
                                            log, re.MULTILINE)
              if not found.startswith("NbGraderException")]  # "see the traceback above"
    lines = log.strip().splitlines()
    return (raised[-1] if raised else lines[-1] if lines else "no log")[:200]


def forget(api, assignment: str, student: str) -> None:
    """No grade for a submission that could not be graded (the export counts a zero)."""
    from nbgrader.api import MissingEntry

    with api.gradebook as gradebook:
        gradebook.update_or_create_student(student)
        try:
            gradebook.remove_submission(assignment, student)
        except MissingEntry:
            pass


def export(api, target: Path) -> None:
    """nbgrader's CSV export, written atomically."""
    from nbgrader.plugins import CsvExportPlugin

    partial = target.with_name(target.name + ".partial")
    with api.gradebook as gradebook:
        CsvExportPlugin(to=str(partial)).export(gradebook)
    os.replace(partial, target)


def grade(course: Path, names: list[str], limits: Limits, students: list[str] | None = None
          ) -> tuple[list[Outcome], Path]:
    """Grade every submission of the assignments ``names`` by the ``students`` (all when
    empty); return the outcomes and the CSV file (every grade in the gradebook)."""
    abi = sandbox.landlock_abi()
    if abi < 1:
        print("grade: this system has no Landlock: graded code may write anywhere the "
              "instructor can. Grade in a container (nbgrader's advice).", file=sys.stderr)
    run_root = Path(tempfile.mkdtemp(prefix="hybridlab-grading-"))
    saved = {key: os.environ.get(key) for key in ("JUPYTER_PATH", sandbox.ROOT_VARIABLE)}
    try:
        install_kernel(run_root, limits)
        os.environ["PATH"] = assignments.tool_env()["PATH"]
        api = assignments.course_api(course, {"Execute": {"kernel_name": KERNEL,
                                                          "timeout": limits.cell_timeout}})
        outcomes = [grade_one(api, course, assignment, student, limits, run_root)
                    for assignment, student in submissions(course, names, students)]
        export(api, course / "grades.csv")
    finally:
        for key, value in saved.items():
            os.environ.pop(key, None) if value is None else os.environ.update({key: value})
        shutil.rmtree(run_root, ignore_errors=True)
    return outcomes, course / "grades.csv"


def report(outcomes: list[Outcome], grades: Path) -> str:
    rows = {(r["assignment"], r["student_id"]): r for r in csv.DictReader(grades.open())}
    lines = [f"{'assignment':12} {'student':16} {'score':>11}  note"]
    for outcome in outcomes:
        row = rows.get((outcome.assignment, outcome.student), {})
        score = f"{float(row.get('score', 0)):g} / {float(row.get('max_score', 0)):g}"
        lines.append(f"{outcome.assignment:12} {outcome.student:16} {score:>11}  "
                     f"{outcome.note or 'graded'} ({outcome.seconds:.0f} s)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("assignments", nargs="*", help="only these assignments (lesson03)")
    parser.add_argument("--course", type=Path, default=assignments.COURSE)
    parser.add_argument("--student", action="append", default=[],
                        help="only this student's submissions (repeat for several)")
    parser.add_argument("--time-limit", type=float, default=Limits.time_limit,
                        help="seconds for one submission")
    parser.add_argument("--cell-timeout", type=int, default=Limits.cell_timeout)
    parser.add_argument("--memory", type=int, default=Limits.memory_mb, help="MB per kernel")
    parser.add_argument("--cpu", type=int, default=Limits.cpu_seconds, help="CPU s per kernel")
    args = parser.parse_args(argv)
    if not (args.course / "submitted").is_dir():
        print(f"grade: no {args.course}/submitted/ folder: collect the submissions first "
              "(nbgrader collect, or copy them to submitted/<student>/<assignment>/)",
              file=sys.stderr)
        return 1
    limits = Limits(args.time_limit, args.cell_timeout, args.memory, args.cpu)
    outcomes, grades = grade(args.course.resolve(), args.assignments, limits, args.student)
    print(report(outcomes, grades))
    print(f"grade: {len(outcomes)} submission(s); grades in {grades}, feedback in "
          f"{args.course / 'feedback'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
