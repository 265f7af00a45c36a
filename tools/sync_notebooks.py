"""Turn each lesson (MyST Markdown) into an executed notebook, or check they agree.

What this tool keeps true
-------------------------
``lessons/NN-name.md`` is the source a reviewer reads; ``notebooks/NN-name.ipynb`` is what
a student opens and what nbval validates. The notebook is *generated*: jupytext converts
the lesson, nbclient executes it in a fresh kernel running this very interpreter
(working directory ``notebooks/``), and the outputs are stored. Widget state and
timestamps are dropped and cell ids are numbered, so a rebuild of an unchanged lesson
changes only timing outputs (and the ids in saved widget state) and the file stays diff-able.

Widget state is *kept* (``metadata.widgets``): with it, a notebook opened without running
it -- in a trusted JupyterLab, or on the course's static site -- draws every widget as it
was saved. The kernelspec is ipykernel's own (``python3``, "Python 3 (ipykernel)") and
``language_info`` carries no Python version, so opening a notebook on another machine does
not mark it changed.

    python3 tools/sync_notebooks.py            # regenerate every notebook
    python3 tools/sync_notebooks.py 02         # only lessons whose name starts with 02
    python3 tools/sync_notebooks.py --check    # fail if a lesson and its notebook differ

``--check`` compares cell types and sources only (never outputs), so it is fast and is
run by ``tests/test_lessons.py``.
"""

from __future__ import annotations

import argparse
import os
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


def lesson_paths(prefix: str = "") -> list[Path]:
    """The lesson sources, in course order (``NN-`` prefix)."""
    return sorted(p for p in LESSONS.glob("[0-9][0-9]-*.md") if p.name.startswith(prefix))


def notebook_path(lesson: Path) -> Path:
    return NOTEBOOKS / (lesson.stem + ".ipynb")


def cell_sources(notebook) -> list[tuple[str, str]]:
    """(cell type, source) pairs: what must agree between a lesson and its notebook."""
    return [(cell.cell_type, cell.source.strip()) for cell in notebook.cells]


def read_lesson(lesson: Path):
    import jupytext

    return jupytext.read(lesson, fmt="md:myst")


def build(lesson: Path, timeout: int = 120) -> float:
    """Convert, execute and write one notebook; return the execution time in seconds."""
    import nbformat
    from nbclient import NotebookClient

    use_this_checkout()
    notebook = read_lesson(lesson)
    for index, cell in enumerate(notebook.cells):
        cell.id = f"cell-{index:03d}"  # stable ids: random ones would churn every rebuild
    client = NotebookClient(notebook, timeout=timeout, kernel_name=KERNEL, km=current_kernel(),
                            resources={"metadata": {"path": str(NOTEBOOKS)}},
                            store_widget_state=True)
    start = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - start
    widgets = notebook.metadata.get("widgets")
    notebook.metadata = {"kernelspec": dict(KERNELSPEC), "language_info": dict(LANGUAGE_INFO)}
    if widgets:
        notebook.metadata["widgets"] = widgets
    for cell in notebook.cells:
        cell.metadata.pop("execution", None)  # nbclient timestamps would churn the diff
    nbformat.write(notebook, notebook_path(lesson))
    return elapsed


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
    args = parser.parse_args(argv)
    lessons = lesson_paths(args.prefix)
    if args.check:
        problems = check(lessons)
        print("\n".join(problems) or f"{len(lessons)} notebook(s) in sync")
        return 1 if problems else 0
    NOTEBOOKS.mkdir(exist_ok=True)
    for lesson in lessons:
        print(f"{lesson.name}: executed in {build(lesson):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
