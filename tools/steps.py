"""Run the steps of `make test` one after another, each to its end, and time them.

    python3 tools/steps.py "line budgets=python3 tools/sz.py" "ruff=ruff check hybridlab" ...

Each argument is ``NAME=COMMAND``: COMMAND runs in a shell from the current folder, with
its output passing straight through. Every step runs even when an earlier one failed, so
a red pytest no longer hides what nbval would have said; the exit status is 1 when any
step failed (2 for arguments that are not ``NAME=COMMAND``). At the end a table names
each step, whether it passed and how long it took -- wall-clock time, and the CPU time
of everything the step ran (its processes and theirs, user + system) -- and the totals:
the numbers to quote when a change makes the suite slower. The CI budget is 20 minutes
on a quiet two-core machine; on a busy one the wall-clock time mostly measures the other
programs, and the CPU time is the steadier figure (a step that keeps one core busy takes
about its CPU time on a quiet machine).

With ``--summary FILE`` the same table is also written to FILE (atomically), for a CI
page to show.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Step:
    name: str
    command: str


@dataclass(frozen=True)
class Result:
    step: Step
    status: int
    seconds: float  # wall-clock
    cpu: float = 0.0  # user + system seconds of the step's processes

    @property
    def passed(self) -> bool:
        return self.status == 0


def parse(argument: str) -> Step:
    name, sep, command = argument.partition("=")
    if not sep or not name.strip() or not command.strip():
        raise ValueError(f"a step is NAME=COMMAND, got {argument!r}; e.g. "
                         f"\"ruff=.venv/bin/ruff check hybridlab\"")
    return Step(name.strip(), command.strip())


def run(step: Step) -> Result:
    """Run one step to its end (Ctrl-C still stops everything)."""
    print(f"\n== {step.name}: {step.command}", flush=True)
    start, cpu = time.perf_counter(), _children_cpu()
    status = subprocess.run(step.command, shell=True, check=False).returncode
    return Result(step, status, time.perf_counter() - start, _children_cpu() - cpu)


def _children_cpu() -> float:
    """CPU seconds of every finished child process (and their waited-for children)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def summary(results: list[Result]) -> str:
    width = max([len(r.step.name) for r in results] + [len("total")])
    lines = [f"{'step':<{width}}  {'result':<10}  {'wall':>9}  {'CPU':>9}"]
    for r in results:
        verdict = "passed" if r.passed else f"FAILED ({r.status})"
        lines.append(f"{r.step.name:<{width}}  {verdict:<10}  {_minutes(r.seconds):>9}  "
                     f"{_minutes(r.cpu):>9}")
    failed = [r.step.name for r in results if not r.passed]
    lines.append(f"{'total':<{width}}  {'':<10}  {_minutes(sum(r.seconds for r in results)):>9}  "
                 f"{_minutes(sum(r.cpu for r in results)):>9}")
    lines.append(f"failed: {', '.join(failed)}" if failed else "every step passed")
    return "\n".join(lines)


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}m{seconds % 60:04.1f}s"


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False,
                                     prefix=f".{path.name}.") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(handle.name, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("steps", nargs="+", metavar="NAME=COMMAND")
    parser.add_argument("--summary", type=Path, help="also write the table to this file")
    args = parser.parse_args(argv)
    try:
        steps = [parse(argument) for argument in args.steps]
    except ValueError as error:
        parser.error(str(error))
    results = [run(step) for step in steps]
    table = summary(results)
    print(f"\n== time per step\n{table}", flush=True)
    if args.summary is not None:
        _write_atomically(args.summary, table + "\n")
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
