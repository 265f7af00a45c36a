"""Guard the truth rule in lesson prose: no measured figures, right titles, right references.

What this tool keeps true
-------------------------
The truth rule (CONTRIBUTING.md, "Lessons: the truth rule"): a measured number -- a time,
a size, a ratio, a count that depends on the machine or the code -- never sits in a
lesson's prose, in digits or in words; the cell that measured it prints it (``glue`` and
``{{name}}``). This tool reads ``lessons/NN-*.md`` and reports, with file and line:

* **figure** -- digits with a unit of time, size, ratio or percent (``47.6 ms``, ``1.5 KB``,
  ``1.8x``, ``48%``), and number words next to a measured noun ("five tasks", "twice as
  fast", "a few hundred bytes", "about a millisecond", "a third of the file", "a factor
  of two", "one extra forward"), and hedged comparisons ("sometimes a little faster": a
  claim that only holds sometimes is not made);
* **title** -- a lesson whose ``# NN · ...`` title has another number than its file;
* **reference** -- a "(lesson NN)" whose clause names none of lesson NN's topics in
  ``lessons/INDEX.md`` (or a lesson the index does not list);
* **direction** -- a sentence that compares or states a direction ("faster", "fewer",
  "saves", "grows", "overlaps", ... :data:`DIRECTION`) that no ``claim(...)`` asserts.
  A sentence is asserted when it contains the text of a claim of its lesson, or carries
  ``<!-- claim: name -->`` (inside it or right after it) where a cell of the lesson calls
  ``claim(ok, text, label="name")`` -- one claim per direction, not one per section. A
  sentence that states a direction it does not measure says so: ``<!-- not measured -->``
  (a definition, a design, an argument, a model's arithmetic) or ``<!-- seed -->`` (what a
  source reports). Questions, headings, tables and the exercises' instructions are not
  statements, so they are not read.

Not figures, so never reported: code (fenced blocks, ``inline code``), math (``$...$``),
``{{name}}`` placeholders, numbers without a unit (the constants that define an experiment:
"batch 64", "512 inputs", shapes like "2 x 3"), and figures quoted from a source in a
sentence that names it and says so ("MXNet's Gluon book reports ... 0.23 s"; the sources
are :data:`SOURCES`). A fixed fact with a unit that is not measured (a float32's size) goes
in code or math.

This is a guard, not the proof: the claims a lesson makes are asserted by ``claim(...)``
in its notebook, which fails the run when one stops being true.

    python3 tools/check_lessons.py            # every lesson; exit 1 on a problem
    python3 tools/check_lessons.py 02 03      # only lessons whose name starts so
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LESSONS = ROOT / "lessons"
INDEX = LESSONS / "INDEX.md"

NUMBER_WORDS = ("one two three four five six seven eight nine ten eleven twelve thirteen "
                "fourteen fifteen sixteen seventeen eighteen nineteen twenty thirty forty "
                "fifty sixty seventy eighty ninety hundred hundreds thousand thousands million "
                "millions dozen dozens tens few several couple").split()
FRACTIONS = "half third thirds quarter quarters fifth fifths tenth tenths".split()
TIME_WORDS = r"(?:nanoseconds?|microseconds?|milliseconds?|seconds|second(?=\s+or\b|\s+per\b))"
SIZE_WORDS = r"(?:bytes?|kilobytes?|megabytes?|gigabytes?|kibibytes?|mebibytes?|gibibytes?)"
# Nouns whose count depends on the machine or the code (a count of these is a measurement).
COUNTED = (r"(?:tasks?|operations?|nodes?|allocations?|copies|kernel\s+calls?|"
           r"forwards?(?:\s+pass(?:es)?)?|recomputations?)")
COMPARATIVE = (r"(?:faster|slower|quicker|cheaper|dearer|costlier|longer|shorter|larger|smaller|"
               r"bigger|more|fewer|less|higher|lower)")
HEDGES = r"(?:sometimes|occasionally|typically|usually|often|mostly)"
NUMBER = r"[-+−]?\d+(?:[.,]\d+)*"
WORD = "(?:" + "|".join(NUMBER_WORDS) + ")"
COUNT_WORD = "(?:" + "|".join(NUMBER_WORDS[1:]) + ")"  # "one task" is a design, not a count

# (rule name, pattern, what to do instead); each finds one kind of measured figure.
FIGURE_RULES: list[tuple[str, re.Pattern[str], str]] = [
    ("a time in digits", re.compile(
        rf"(?<![\w.]){NUMBER}\s?(?:µs|us|ms|ns|s|secs?|{TIME_WORDS[3:-1]})(?![\w])"),
     "print it from the cell that timed it: glue('name', value, fmt) and {{name}}"),
    ("a size in digits", re.compile(
        rf"(?<![\w.]){NUMBER}\s?(?:B|KB|kB|KiB|MB|MiB|GB|GiB|{SIZE_WORDS[3:-1]})(?![\w])"),
     "print it from the cell that measured it: glue('name', value, fmt) and {{name}}"),
    ("a ratio in digits", re.compile(
        rf"(?<![\w.]){NUMBER}\s?[x×](?!\s*[\d(])(?![\w])|(?<![\w])(?:×\d+(?:\.\d+)?|"
        rf"x\d+\.\d+)(?![\w])"),
     "print the ratio from the cell that measured it (glue), and assert the claim (claim)"),
    ("a percentage", re.compile(rf"(?<![\w.]){NUMBER}\s?(?:%|percent\b|per\s+cent\b)"),
     "print the percentage from the cell that measured it (glue)"),
    ("a time or size in words", re.compile(
        rf"(?i)\b(?:a|an|{WORD}|fraction)\b(?:\s+(?:of|a|an|few|extra|more|or|{WORD}))*"
        rf"\s+(?:{TIME_WORDS}|{SIZE_WORDS})\b"),
     "a time or a size in words is still a measured figure: glue it"),
    ("a count in words", re.compile(
        rf"(?i)\b(?:(?:{COUNT_WORD})(?:\s+(?:more|fewer|extra|new|separate|pending|ready|waiting|"
        rf"running|done))?|one\s+(?:more|fewer|extra))\s+{COUNTED}\b"),
     "a count that depends on the code or the machine: glue the count the cell computed"),
    ("a ratio in words", re.compile(
        rf"(?i)\b(?:twice|thrice|half)\s+(?:as|the)\b|\bhalf\s+{COMPARATIVE}\b|"
        rf"\b(?:a|an|one|two|three)\s+(?:{'|'.join(FRACTIONS)})\s+of\b|\ba\s+factor\s+of\b|"
        rf"\b(?:{WORD}|\d+)[-\s]?fold\b|\b(?:{WORD})\s+times\s+(?:as\b|{COMPARATIVE})"),
     "a ratio in words is still a measured figure: glue the measured ratio"),
    ("a claim that holds only sometimes", re.compile(
        rf"(?i)\b{HEDGES}\b(?:\s+\w+){{0,3}}?\s+{COMPARATIVE}\b"),
     "assert the comparison with claim(...) and state it plainly, or drop it"),
]

# Words that compare or state a direction: a sentence holding one is a claim to assert.
DIRECTION = re.compile(
    r"(?i)\b(?:faster|slower|quicker|cheaper|costlier|dearer|fewer|larger|smaller|bigger|"
    r"longer|shorter|higher|lower|better|worse|more\s+than|less\s+than|avoids|"
    r"(?:saves|saved|saving|savings)(?!\s+(?:outputs?|state|as|files?|the\s+(?:model|scripted|"
    r"graph)|for\s+the\s+backward))|grows?|grew|growing|shrinks?|shrank|shrinking|"
    r"(?:drops?|dropped|falls?|fell|rises?|rose)\s+(?:to|from|by|below|above|as|with)|"
    r"overlap(?:s|ped|ping)?|beats?|beaten|outperforms?|speeds?\s+up|slows|slowed|slowing|"
    r"slow\s+down|halves|halved|"
    r"doubles|doubled|reduces?|reduced|increases?|increased|decreases?|decreased|exceeds?|"
    r"wins?|won|gains?|pays?\s+off|dominates?)\b")
IDIOMS = re.compile(r"(?i)\b(?:no|any)\s+longer\b")  # "no longer" compares nothing
MARKER = re.compile(r"<!--\s*(claim:\s*[\w,\s]+?|not measured|seed)\s*-->")
NOT_STATEMENTS = re.compile(r"^[ \t]*(?:#|\|).*$", re.MULTILINE)  # headings, table rows
EXERCISES = re.compile(r"^## Exercises\b.*?(?=^## |\Z)", re.MULTILINE | re.DOTALL)
CLAIM_CALL = re.compile(r"\bclaim\(")

# A figure quoted from one of these, in a sentence that says it reports it, is allowed.
SOURCES = ("MXNet's Gluon book", "the Gluon book", "Dive into Deep Learning", "d2l",
           "the seeds'", "the seed's", "the seeds report", "the seed reports")
REPORTING = re.compile(r"(?i)\b(?:reports?|reported|quotes?|quoted|according to|gives?)\b")

INLINE_CODE = re.compile(r"`[^`]+`")  # may wrap onto the next line
MATH = re.compile(r"\$\$.*?\$\$|\$[^$\n]+\$", re.DOTALL)
COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
PLACEHOLDER = re.compile(r"\{\{\s*\w+\s*\}\}")
LINK_TARGET = re.compile(r"\]\([^)]*\)")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(*`\"])|\n\s*\n")
REFERENCE = re.compile(r"\(([^()]*?)\blessons?\s+(\d\d)\b([^()]*)\)", re.IGNORECASE)
TITLE = re.compile(r"^# (\d\d) · ", re.MULTILINE)


@dataclass(frozen=True)
class Problem:
    """One thing wrong in a lesson, where it is, and how to fix it."""

    lesson: str
    line: int
    rule: str
    text: str
    fix: str

    def __str__(self) -> str:
        return f"{self.lesson}:{self.line}: {self.rule}: {self.text!r} -- {self.fix}"


def prose(markdown: str) -> str:
    """The lesson's prose, same lines as the file: front matter, fenced blocks (code
    cells too) and ``+++`` separators blanked, so line numbers stay right."""
    lines = markdown.split("\n")
    out, fence = [], None
    front = bool(lines) and lines[0].strip() == "---"
    for index, line in enumerate(lines):
        stripped = line.strip()
        if front:
            out.append("")
            front = not (index > 0 and stripped == "---")
            continue
        if fence is None and stripped[:3] in ("```", "~~~"):
            fence = stripped[:3]
            out.append("")
            continue
        if fence is not None:
            if stripped.startswith(fence) and stripped.strip(fence[0]) == "":
                fence = None
            out.append("")
            continue
        out.append("" if stripped == "+++" else line)
    return "\n".join(out)


def blank(pattern: re.Pattern[str], text: str, keep: bool = False) -> str:
    """Replace each match by spaces (newlines kept, so offsets and lines stay right);
    ``keep`` keeps the characters between the delimiters (inline code's content)."""
    def spaces(match: re.Match[str]) -> str:
        inner = match.group(0)
        if keep:
            return " " + inner[1:-1] + " "
        return re.sub(r"[^\n]", " ", inner)

    return pattern.sub(spaces, text)


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def sentence_around(text: str, start: int, end: int) -> str:
    """The sentence holding ``text[start:end]``."""
    before = [m.end() for m in SENTENCE_END.finditer(text, 0, start + 1) if m.end() <= start]
    after = SENTENCE_END.search(text, end)
    return text[before[-1] if before else 0: after.start() if after else len(text)]


def attributed(sentence: str, figure: str) -> bool:
    """Is ``figure`` quoted from a known source in ``sentence``?"""
    flat = " ".join(sentence.split())
    if not any(source.lower() in flat.lower() for source in SOURCES):
        return False
    directly = any(f"{source} {figure}".lower() in flat.lower() for source in SOURCES)
    return directly or bool(REPORTING.search(flat))


def figure_problems(name: str, text: str) -> list[Problem]:
    """Measured figures in ``text`` (prose with code, math and placeholders blanked)."""
    problems = []
    for rule, pattern, fix in FIGURE_RULES:
        for match in pattern.finditer(text):
            figure = " ".join(match.group(0).split())
            if attributed(sentence_around(text, match.start(), match.end()), figure):
                continue
            problems.append(Problem(name, line_of(text, match.start()), rule, figure, fix))
    return problems


def read_index(path: Path = INDEX) -> dict[str, list[str]]:
    """``{"05": ["pass", "pipeline", ...]}`` from the table in ``lessons/INDEX.md``."""
    topics = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and re.fullmatch(r"\d\d", cells[0]):
            topics[cells[0]] = [t.strip().lower() for t in cells[2].split(",") if t.strip()]
    return topics


def names_topic(clause: str, topics: list[str]) -> bool:
    words = " " + re.sub(r"[^\w.()'-]+", " ", clause.lower())
    return any(f" {topic}" in words for topic in topics)


def reference_problems(name: str, text: str, index: dict[str, list[str]]) -> list[Problem]:
    """"(lesson NN)" references whose clause names none of lesson NN's topics."""
    problems = []
    for match in REFERENCE.finditer(text):
        number = match.group(2)
        sentence = sentence_around(text, match.start(), match.end())
        head = sentence[:sentence.find(match.group(0))] if match.group(0) in sentence else ""
        clause = re.split(r"[;:]|--", head)[-1] + " " + match.group(1) + " " + match.group(3)
        shown = " ".join((clause.strip() + f" (lesson {number})").split())
        if number not in index:
            problems.append(Problem(name, line_of(text, match.start()), "reference", shown,
                                    f"lesson {number} is not in lessons/INDEX.md"))
        elif not names_topic(clause, index[number]):
            teachers = [n for n, topics in sorted(index.items()) if names_topic(clause, topics)]
            hint = f"; did you mean lesson {' or '.join(teachers)}?" if teachers else ""
            problems.append(Problem(
                name, line_of(text, match.start()), "reference", shown,
                f"the clause names none of lesson {number}'s topics in lessons/INDEX.md"
                f" ({', '.join(index[number][:6])}, ...){hint}"))
    return problems


def title_problems(name: str, markdown: str) -> list[Problem]:
    match = TITLE.search(markdown)
    number = name[:2]
    if match is None:
        return [Problem(name, 1, "title", "no '# NN · ...' title",
                        f"start the lesson with '# {number} · <title>'")]
    if match.group(1) != number:
        return [Problem(name, line_of(markdown, match.start()), "title",
                        match.group(0).strip(), f"the file is lesson {number}: "
                        f"'# {number} · ...'")]
    return []


def lesson_claims(markdown: str) -> tuple[set[str], list[str]]:
    """(labels, texts) of the ``claim(...)`` calls in a lesson's code cells: each label
    given as ``label="..."``, and each claim's text when it is a plain string."""
    labels, texts = set(), []
    for cell in re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", markdown, re.DOTALL):
        try:
            tree = ast.parse(re.sub(r"^\s*[%!:].*$", "", cell, flags=re.MULTILINE))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and getattr(
                    node.func, "id", getattr(node.func, "attr", None)) == "claim"):
                continue
            for keyword in node.keywords:
                if keyword.arg == "label" and isinstance(keyword.value, ast.Constant):
                    labels.add(str(keyword.value.value))
            if len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
                texts.append(str(node.args[1].value))
    return labels, texts


def words(text: str) -> str:
    return " ".join(re.sub(r"[^\w%]+", " ", text.lower()).split())


def direction_problems(name: str, text: str, markdown: str) -> list[Problem]:
    """Sentences stating a direction that no claim asserts and no marker excuses.
    ``text`` is the prose with code, math and placeholders blanked and the comments kept."""
    labels, texts = lesson_claims(markdown)
    claimed = [words(t) for t in texts if len(words(t)) > 3]
    markers = [(m.start(), m.end(), m.group(1)) for m in MARKER.finditer(text)]
    problems = [Problem(name, line_of(text, start), "unknown claim label", label,
                        f"no cell of this lesson calls claim(..., label={label!r})")
                for start, _, found in markers if found.startswith("claim:")
                for label in re.split(r"[,\s]+", found[6:].strip()) if label not in labels]
    flat = blank(COMMENT, text)
    flat = blank(NOT_STATEMENTS, blank(EXERCISES, blank(IDIOMS, flat)))
    bounds = [0] + [m.end() for m in SENTENCE_END.finditer(flat)] + [len(flat)]
    for start, end in zip(bounds, bounds[1:]):
        sentence = flat[start:end]
        found = [m.group(0) for m in DIRECTION.finditer(sentence)]
        if not found or sentence.strip().endswith("?"):
            continue
        covered = [kind for first, _, kind in markers if start <= first < end]
        if covered or any(c in words(sentence) for c in claimed):
            continue
        shown = " ".join(sentence.split())
        problems.append(Problem(
            name, line_of(flat, start + len(sentence) - len(sentence.lstrip())),
            "an unasserted direction", f"{', '.join(found)}: {shown[:120]}",
            "assert it -- claim(ok, text, label='name') in the cell that measured, and "
            "<!-- claim: name --> after the sentence -- or say what it is: <!-- not measured "
            "--> (a definition, design or argument) or <!-- seed --> (a source reports it)"))
    return problems


def check_text(name: str, markdown: str, index: dict[str, list[str]] | None = None
               ) -> list[Problem]:
    """Every problem in one lesson's markdown (``name`` is its file name)."""
    index = read_index() if index is None else index
    text = prose(markdown)
    for pattern in (MATH, PLACEHOLDER, LINK_TARGET):
        text = blank(pattern, text)
    directions = direction_problems(name, blank(INLINE_CODE, text), markdown)
    text = blank(COMMENT, text)
    references = reference_problems(name, blank(INLINE_CODE, text, keep=True), index)
    figures = figure_problems(name, blank(INLINE_CODE, text))
    problems = title_problems(name, markdown) + figures + references + directions
    return sorted(problems, key=lambda problem: problem.line)


def check_lesson(path: Path, index: dict[str, list[str]] | None = None) -> list[Problem]:
    return check_text(path.name, path.read_text(encoding="utf-8"), index)


def lesson_paths(prefixes: list[str]) -> list[Path]:
    paths = sorted(LESSONS.glob("[0-9][0-9]-*.md"))
    return [p for p in paths if not prefixes or any(p.name.startswith(x) for x in prefixes)]


def main(argv: list[str] | None = None) -> int:
    prefixes = sys.argv[1:] if argv is None else argv
    index = read_index()
    problems = [problem for path in lesson_paths(prefixes)
                for problem in check_lesson(path, index)]
    for problem in problems:
        print(problem)
    print(f"{len(problems)} problem(s) in {len(lesson_paths(prefixes))} lesson(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
