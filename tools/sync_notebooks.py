"""Turn each lesson (MyST Markdown) into an executed notebook, or check they agree.

What this tool keeps true
-------------------------
``lessons/NN-name.md`` is the source a reviewer reads; ``notebooks/NN-name.ipynb`` is what
a student opens and what nbval validates. The notebook is *generated*: jupytext converts
the lesson, nbclient executes it in a fresh kernel running this very interpreter
(working directory ``notebooks/``), and the outputs are stored. Timestamps are
dropped, cell ids and widget model ids are numbered, prints to one stream are joined and
bare object addresses dropped (``stable_outputs``), so a rebuild of an unchanged lesson
changes only measured numbers and the file stays diff-able. What the timestamps measured
is kept, once, as each code cell's run time (``metadata.hybridlab.cell_seconds``), which
``tools/pacing.py`` adds to the reading time of the README's minutes.

Widget state is *kept* (``metadata.widgets``): with it, a notebook opened without running
it -- in a trusted JupyterLab, or on the course's static site -- draws every widget as it
was saved. The kernelspec is ipykernel's own (``python3``, "Python 3 (ipykernel)") and
``language_info`` carries no Python version, so opening a notebook on another machine does
not mark it changed.

    python3 tools/sync_notebooks.py            # regenerate every notebook
    python3 tools/sync_notebooks.py 02         # only lessons whose name starts with 02
    python3 tools/sync_notebooks.py --check    # fail if a lesson and its notebook differ
    python3 tools/sync_notebooks.py --prose 03 # only the prose changed: keep the outputs

``--check`` compares cell types and sources only (never outputs), so it is fast and is
run by ``tests/test_lessons.py``.

Measured figures in the prose (the truth rule, CONTRIBUTING.md)
---------------------------------------------------------------
A lesson never types a measured number: it writes ``{{name}}`` in its text, and the code
cell that measured the figure calls ``hybridlab.exercises.glue("name", value, fmt)``,
whose output carries the mime type ``application/vnd.hybridlab.glue+json``
(``{"name", "text"}``). After executing a notebook, :func:`fill_glue` replaces each
``{{name}}`` in its markdown cells by ``<!--glue:name-->TEXT<!--/glue-->``: the comments are
invisible in JupyterLab and on the site, the text is this run's figure. A placeholder whose
name no cell glued, or one name glued twice, is an error naming the lesson and the name.
``--check`` turns every filled value back into ``{{name}}`` before comparing, so it still
compares the notebook with its source, whatever the figures were.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LESSONS = ROOT / "lessons"
NOTEBOOKS = ROOT / "notebooks"
KERNEL = "python3"
KERNELSPEC = {"name": KERNEL, "display_name": "Python 3 (ipykernel)", "language": "python"}
# What ipykernel reports, less the version (which differs between machines).
LANGUAGE_INFO = {"name": "python", "codemirror_mode": {"name": "ipython", "version": 3},
                 "file_extension": ".py", "mimetype": "text/x-python",
                 "nbconvert_exporter": "python", "pygments_lexer": "ipython3"}
GLUE_MIME = "application/vnd.hybridlab.glue+json"  # hybridlab.exercises.glue.GLUE_MIME
PLACEHOLDER = re.compile(r"\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}")
FILLED = re.compile(r"<!--glue:([A-Za-z_][A-Za-z0-9_]*)-->.*?<!--/glue-->", re.DOTALL)


class GlueError(ValueError):
    """A lesson's ``{{name}}`` placeholders and its ``glue(...)`` calls do not match."""


class MissingFrameworkError(RuntimeError):
    """A lesson has cells starting ``%%requires <module>`` and that module is not installed."""


REQUIRES = "%%requires"  # hybridlab.exercises.requires.MAGIC (a tool does not import hybridlab)


def required_modules(notebook) -> list[str]:
    """The modules named by the ``%%requires <module> ...`` first lines of a notebook's
    cells (as ``hybridlab.exercises.requires.required_modules`` reads them)."""
    found = set()
    for cell in notebook.cells:
        words = cell.source.lstrip().split("\n", 1)[0].split() if cell.cell_type == "code" else []
        found |= set(words[1:]) if words[:1] == [REQUIRES] else set()
    return sorted(found)


def check_frameworks(notebook, lesson_name: str) -> None:
    """Refuse to build a lesson whose ``%%requires`` cells could not run here: executing it would
    store errors (or no outputs) in place of the saved ones."""
    import importlib.util

    missing = [m for m in required_modules(notebook) if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingFrameworkError(
            f"{lesson_name}: cells marked %%requires {missing[0]} need {', '.join(missing)}, "
            f"which is not installed; install it (the lesson's first cell gives the command "
            f"for a CPU-only build) and run again")


def lesson_paths(prefix: str = "") -> list[Path]:
    """The lesson sources, in course order (``NN-`` prefix)."""
    return sorted(p for p in LESSONS.glob("[0-9][0-9]-*.md") if p.name.startswith(prefix))


def notebook_path(lesson: Path) -> Path:
    return NOTEBOOKS / (lesson.stem + ".ipynb")


def cell_sources(notebook) -> list[tuple[str, str]]:
    """(cell type, source) pairs: what must agree between a lesson and its notebook.
    Filled-in glue values count as their placeholder (see the module docstring)."""
    return [(cell.cell_type, unfill(cell.source).strip()) for cell in notebook.cells]


def unfill(source: str) -> str:
    """``<!--glue:name-->TEXT<!--/glue-->`` back to ``{{name}}``."""
    return FILLED.sub(lambda match: "{{" + match.group(1) + "}}", source)


def glued_values(notebook, lesson_name: str) -> dict[str, str]:
    """``{name: text}`` from the outputs of ``glue(...)`` calls in the executed notebook."""
    values: dict[str, str] = {}
    for index, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            data = output.get("data", {}).get(GLUE_MIME)
            if data is None:
                continue
            if data["name"] in values:
                raise GlueError(f"{lesson_name}: glue name {data['name']!r} is glued twice "
                                f"(again in cell {index}); give each figure its own name")
            values[data["name"]] = str(data["text"])
    return values


def fill_glue(notebook, lesson_name: str) -> int:
    """Write each glued figure into the markdown where the lesson says ``{{name}}``;
    return how many placeholders were filled."""
    values = glued_values(notebook, lesson_name)
    filled = 0
    for cell in notebook.cells:
        if cell.cell_type != "markdown":
            continue
        missing = [name for name in PLACEHOLDER.findall(cell.source) if name not in values]
        if missing:
            raise GlueError(f"{lesson_name}: the prose uses {{{{{missing[0]}}}}} but no cell "
                            f"calls glue({missing[0]!r}, ...); glued names: "
                            f"{sorted(values) or 'none'}")
        cell.source, count = PLACEHOLDER.subn(
            lambda match: f"<!--glue:{match.group(1)}-->{values[match.group(1)]}<!--/glue-->",
            unfill(cell.source))
        filled += count
    return filled


def read_lesson(lesson: Path):
    import jupytext

    return jupytext.read(lesson, fmt="md:myst")


def build(lesson: Path, timeout: int = 120) -> float:
    """Convert, execute and write one notebook; return the execution time in seconds."""
    import nbformat
    from nbclient import NotebookClient

    use_this_checkout()
    notebook = read_lesson(lesson)
    check_frameworks(notebook, lesson.name)
    for index, cell in enumerate(notebook.cells):
        cell.id = f"cell-{index:03d}"  # stable ids: random ones would churn every rebuild
    client = NotebookClient(notebook, timeout=timeout, kernel_name=KERNEL, km=current_kernel(),
                            resources={"metadata": {"path": str(NOTEBOOKS)}},
                            store_widget_state=True)
    start = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - start
    widgets = notebook.metadata.get("widgets")
    notebook.metadata = {"kernelspec": dict(KERNELSPEC), "language_info": dict(LANGUAGE_INFO),
                         "hybridlab": {"cell_seconds": cell_seconds(notebook)}}
    if widgets:
        notebook.metadata["widgets"] = widgets
    for cell in notebook.cells:
        cell.metadata.pop("execution", None)  # nbclient timestamps would churn the diff
        if cell.cell_type == "code":
            cell.outputs = stable_outputs(cell.outputs)
    fill_glue(notebook, lesson.name)
    text = stable_widget_ids(nbformat.writes(notebook))
    notebook_path(lesson).write_text(text + "\n", encoding="utf-8")
    return elapsed


def refresh_prose(lesson: Path) -> None:
    """Copy a lesson's markdown into its executed notebook, keeping every code cell and
    output byte for byte (and filling the glued figures again), when only the prose
    changed: a fixed sentence needs no re-execution. Raises ValueError when a code cell
    changed. The file is edited as JSON in its own key order, so nothing else moves."""
    import json

    import nbformat

    target = notebook_path(lesson)
    notebook = nbformat.from_dict(json.loads(target.read_text(encoding="utf-8")))
    lesson_cells = read_lesson(lesson).cells
    code = [(i, c.cell_type, c.source.strip()) for i, c in enumerate(lesson_cells)
            if c.cell_type != "markdown"]
    if len(lesson_cells) != len(notebook.cells) or code != [
            (i, c.cell_type, "".join(c.source).strip()) for i, c in enumerate(notebook.cells)
            if c.cell_type != "markdown"]:
        raise ValueError(f"{lesson.name}: its code cells changed, not only its prose; run "
                         f"tools/sync_notebooks.py {lesson.name[:2]} to execute it")
    for cell, source in zip(notebook.cells, lesson_cells):
        if cell.cell_type == "markdown":
            cell.source = source.source
    fill_glue(notebook, lesson.name)
    for cell in notebook.cells:
        if cell.cell_type == "markdown":  # stored as lines, as nbformat writes it
            cell.source = cell.source.splitlines(keepends=True)
    text = json.dumps(notebook, indent=1, ensure_ascii=False, separators=(",", ": "))
    partial = target.with_name(target.name + ".partial")
    partial.write_text(text + "\n", encoding="utf-8")
    os.replace(partial, target)
def cell_seconds(notebook) -> list[float]:
    """Each code cell's run time (nbclient's timestamps), to a tenth of a second: what
    ``tools/pacing.py`` adds to a lesson's reading time."""
    from datetime import datetime

    seconds = []
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        stamps = cell.metadata.get("execution", {})
        begin, end = stamps.get("iopub.execute_input"), stamps.get("shell.execute_reply")
        took = 0.0
        if begin and end:
            took = (datetime.fromisoformat(end.replace("Z", "+00:00"))
                    - datetime.fromisoformat(begin.replace("Z", "+00:00"))).total_seconds()
        seconds.append(round(took, 1))
    return seconds


BARE_REPR = re.compile(r"<[\w.]+(?: object)? at 0x[0-9a-fA-F]+>")


def stable_outputs(outputs: list) -> list:
    """Outputs as a rebuild gives them every time: consecutive prints to one stream are one
    output (the kernel splits them by timing), and a result that is only an object's
    address (``<matplotlib.legend.Legend at 0x...>``, a cell ending in ``ax.legend()``) is
    dropped -- it tells a student nothing and changes every run."""
    kept: list = []
    for output in outputs:
        data = output.get("data", {})
        if output.get("output_type") == "execute_result" and set(data) == {"text/plain"} and (
                BARE_REPR.fullmatch(str(data["text/plain"]).strip())):
            continue
        previous = kept[-1] if kept else None
        if (output.get("output_type") == "stream" and previous is not None
                and previous.get("output_type") == "stream"
                and previous.get("name") == output.get("name")):
            previous["text"] = "".join(previous["text"]) + "".join(output["text"])
            continue
        kept.append(output)
    return kept


def stable_widget_ids(text: str) -> str:
    """Renumber the widget models' random ids (``4f0c...``, 32 hex digits) in order of first
    appearance, so the saved widget state of an unchanged lesson is unchanged."""
    hex_id = re.compile(r"(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])")
    known, ids = set(_widget_model_ids(text)), {}
    for found in hex_id.finditer(text):
        if found.group(0) in known:
            ids.setdefault(found.group(0), f"{len(ids) + 1:032x}")
    return hex_id.sub(lambda m: ids.get(m.group(0), m.group(0)), text)


def _widget_model_ids(text: str) -> list[str]:
    import json

    state = json.loads(text).get("metadata", {}).get("widgets", {}).get(
        "application/vnd.jupyter.widget-state+json", {}).get("state", {})
    return list(state)


def current_kernel():
    """A kernel manager for this very interpreter (like nbval's ``--nbval-current-env``),
    whatever ``python3`` kernelspec happens to be installed."""
    from jupyter_client.manager import KernelManager

    manager = KernelManager(kernel_name=KERNEL)
    manager.kernel_spec.argv = [sys.executable, "-m", "ipykernel_launcher", "-f",
                                "{connection_file}"]
    return manager


def use_this_checkout() -> None:
    """Let kernels import this checkout's hybridlab even when it is not pip-installed, and
    keep the weights' layout as stored (as nbval runs them: notebooks/conftest.py), so a
    printed source never depends on a timing."""
    os.environ["HYBRIDLAB_AUTOTUNE"] = "0"
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if str(ROOT) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, paths)])


def check(lessons: list[Path]) -> list[str]:
    """Problems found: missing notebooks and cells that differ from their lesson."""
    import nbformat

    problems = []
    for lesson in lessons:
        target = notebook_path(lesson)
        if not target.exists():
            problems.append(f"{target.relative_to(ROOT)} is missing; run `make notebooks`")
            continue
        want = cell_sources(read_lesson(lesson))
        have = cell_sources(nbformat.read(target, as_version=4))
        if want != have:
            index = next((i for i, (a, b) in enumerate(zip(want, have)) if a != b),
                         min(len(want), len(have)))
            problems.append(f"{target.relative_to(ROOT)} differs from {lesson.name} "
                            f"at cell {index}; run `make notebooks`")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prefix", nargs="?", default="", help="only lessons starting so")
    parser.add_argument("--check", action="store_true", help="compare, do not execute")
    parser.add_argument("--prose", action="store_true",
                        help="update the prose only, keeping the stored outputs")
    args = parser.parse_args(argv)
    lessons = lesson_paths(args.prefix)
    if args.prose:
        try:
            for lesson in lessons:
                refresh_prose(lesson)
                print(f"{lesson.name}: prose updated, outputs kept")
        except (ValueError, GlueError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        return 0
    if args.check:
        problems = check(lessons)
        print("\n".join(problems) or f"{len(lessons)} notebook(s) in sync")
        return 1 if problems else 0
    NOTEBOOKS.mkdir(exist_ok=True)
    refused = []
    for lesson in lessons:
        try:
            print(f"{lesson.name}: executed in {build(lesson):.1f} s")
        except MissingFrameworkError as err:  # the other lessons can still be built
            print(f"error: {err} (the notebook was not written)", file=sys.stderr)
            refused.append(lesson.name)
        except GlueError as err:
            print(f"error: {err} (the notebook was not written)", file=sys.stderr)
            return 1
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
