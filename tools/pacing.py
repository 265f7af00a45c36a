"""How long each lesson takes, computed from the lesson itself -- never estimated by hand.

What this tool keeps true
-------------------------
The README's table gives each lesson's minutes: its *core path* (everything before its
"Going further" part) and the going-further part apart. They are computed, at rates fixed
here and not tuned to a result:

* prose is read at :data:`WORDS_PER_MINUTE` (130) words a minute -- every word of the
  markdown outside code, HTML comments and MyST markup;
* code is read at :data:`LINES_PER_MINUTE` (20) lines a minute -- every non-blank line of a
  code cell but the cell's own markers (``# NBVAL_...``, ``:tags:``);
* and each code cell's run time is added, as the last ``make notebooks`` measured it
  (``tools/sync_notebooks.py`` stores it in the notebook, ``metadata.hybridlab.cell_seconds``).

A lesson's core path is held to :data:`CORE_LIMIT` minutes (``tests/test_pacing.py``);
the course aims at about 45.

    python3 tools/pacing.py            # print the table
    python3 tools/pacing.py --write    # write the minutes into README.md's table
    python3 tools/pacing.py --check    # fail if README.md's minutes differ (make test)
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LESSONS = ROOT / "lessons"
NOTEBOOKS = ROOT / "notebooks"
README = ROOT / "README.md"

WORDS_PER_MINUTE = 130
LINES_PER_MINUTE = 20
CORE_LIMIT = 55  # minutes: no lesson's core path may take longer

CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
FURTHER = re.compile(r"^##\s+(?:\d+\.\s+)?Going further\b", re.MULTILINE | re.IGNORECASE)
FRONT_MATTER = re.compile(r"\A---\n.*?\n---\n", re.DOTALL)
MARKUP = re.compile(r"<!--.*?-->|\{\{\s*\w+\s*\}\}|^\+\+\+\s*$", re.DOTALL | re.MULTILINE)
CELL_MARKERS = re.compile(r"^\s*(?:# NBVAL_\w+|:tags:.*)$")


@dataclass(frozen=True)
class Part:
    """What one part of a lesson asks of a student."""

    words: int
    code_lines: int
    run_seconds: float

    @property
    def minutes(self) -> float:
        return (self.words / WORDS_PER_MINUTE + self.code_lines / LINES_PER_MINUTE
                + self.run_seconds / 60)


@dataclass(frozen=True)
class Pace:
    lesson: str
    core: Part
    further: Part | None

    def cell(self) -> str:
        """The README's minutes cell: ``45`` or ``45 + 20 going further``."""
        core = round(self.core.minutes)
        if self.further is None:
            return f"{core}"
        return f"{core} + {round(self.further.minutes)} going further"


def cell_seconds(lesson: Path) -> list[float] | None:
    """Run time of each code cell, from the lesson's notebook (None: not recorded)."""
    notebook = NOTEBOOKS / (lesson.stem + ".ipynb")
    if not notebook.exists():
        return None
    recorded = json.loads(notebook.read_text(encoding="utf-8")).get("metadata", {}).get(
        "hybridlab", {}).get("cell_seconds")
    return None if recorded is None else [float(s) for s in recorded]


def part(markdown: str, seconds: list[float]) -> Part:
    """Words, code lines and run time of one stretch of a lesson (``seconds``: its cells')."""
    code = CELL.findall(markdown)
    prose = MARKUP.sub(" ", CELL.sub(" ", markdown))
    lines = sum(1 for cell in code for line in cell.splitlines()
                if line.strip() and not CELL_MARKERS.match(line))
    return Part(len(re.findall(r"[\w'’-]+", prose)), lines, sum(seconds))


def pace(lesson: Path, seconds: list[float] | None = None) -> Pace:
    """A lesson's core and going-further parts; ``seconds`` defaults to the recorded run
    times (a lesson whose notebook recorded none counts its cells as taking no time)."""
    markdown = FRONT_MATTER.sub("", lesson.read_text(encoding="utf-8"))
    seconds = cell_seconds(lesson) if seconds is None else seconds
    cells = len(CELL.findall(markdown))
    seconds = seconds if seconds is not None and len(seconds) == cells else [0.0] * cells
    split = FURTHER.search(markdown)
    if split is None:
        return Pace(lesson.stem, part(markdown, seconds), None)
    core_cells = len(CELL.findall(markdown[:split.start()]))
    return Pace(lesson.stem, part(markdown[:split.start()], seconds[:core_cells]),
                part(markdown[split.start():], seconds[core_cells:]))


def lessons() -> list[Path]:
    return sorted(LESSONS.glob("[0-9][0-9]-*.md"))


ROW = re.compile(r"^\| `(\d\d-[\w-]+)` \| ([^|]*?) \|", re.MULTILINE)


def readme_minutes(text: str) -> dict[str, str]:
    return {match.group(1): match.group(2).strip() for match in ROW.finditer(text)}


def with_minutes(text: str, paces: list[Pace]) -> str:
    cells = {p.lesson: p.cell() for p in paces}
    return ROW.sub(lambda m: f"| `{m.group(1)}` | {cells.get(m.group(1), m.group(2))} |", text)


def problems(paces: list[Pace], readme: str) -> list[str]:
    """What is wrong: README minutes that are not the computed ones, missing run times,
    core paths over the limit."""
    found = []
    written = readme_minutes(readme)
    for p in paces:
        if written.get(p.lesson) != p.cell():
            found.append(f"README.md: {p.lesson} says {written.get(p.lesson)!r} minutes, "
                         f"computed {p.cell()!r}: run `python3 tools/pacing.py --write`")
        if p.core.minutes > CORE_LIMIT:
            found.append(f"{p.lesson}: its core path takes {p.core.minutes:.0f} minutes, more "
                         f"than {CORE_LIMIT}: move material into its 'Going further' part")
    missing = [path.stem for path in lessons() if cell_seconds(path) is None]
    found += [f"{name}: its notebook records no cell run times: run `make notebooks`"
              for name in missing]
    return found


def table(paces: list[Pace]) -> str:
    rows = [f"{'lesson':34s} {'words':>6s} {'lines':>6s} {'run s':>6s} {'minutes':>8s}"]
    for p in paces:
        for label, stretch in (("core", p.core), ("going further", p.further)):
            if stretch is not None:
                rows.append(f"{p.lesson + ' ' + label:34s} {stretch.words:6d} "
                            f"{stretch.code_lines:6d} {stretch.run_seconds:6.0f} "
                            f"{stretch.minutes:8.1f}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write README.md's minutes")
    parser.add_argument("--check", action="store_true", help="fail if README.md differs")
    args = parser.parse_args(argv)
    paces = [pace(path) for path in lessons()]
    readme = README.read_text(encoding="utf-8")
    if args.write:
        README.write_text(with_minutes(readme, paces), encoding="utf-8")
        readme = README.read_text(encoding="utf-8")
    print(table(paces))
    if args.check or args.write:
        found = problems(paces, readme)
        print("\n".join(found) or "README.md's minutes are the computed ones")
        return 1 if found else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
