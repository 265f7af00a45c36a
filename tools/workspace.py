"""The student workspace: a working copy of the course that `make lab` opens.

What this tool keeps true
-------------------------
The tracked notebooks in ``notebooks/`` and solutions in ``lessons/solutions/`` are what
the tests compare, so a student must never edit them: autosave, a ``git pull`` and the
tests would collide. ``make lab`` therefore opens ``workspace/`` (git-ignored), made on
first use:

* a copy of every lesson notebook, trusted (signed as ``jupyter trust`` does), carrying
  this machine's kernelspec and ``language_info`` so that opening and running it marks
  nothing changed;
* ``solutions/``, a copy of ``lessons/solutions/`` (where every lesson's exercises point),
  the student's to edit like the notebooks;
* nothing else: test files (nbval's ``conftest.py``) stay out of the student's way.

``refresh`` brings in notebooks and solutions the course changed since. A file the
student edited is never overwritten: their copy moves to ``workspace/kept/<time>/`` first,
and the command says where.

Safety: every file is written to a fresh temporary (``O_EXCL``: never an existing file,
never through a link) and renamed into place; a link or a folder where a copy belongs,
a file named ``kept`` or a corrupt ``.course-versions.json`` stops with a message saying
what to move away -- nothing outside ``workspace/`` is ever written but the two lab
settings below. (Older versions made
``solutions`` a link into ``lessons/``; that link is replaced by the copy.)

It also sets up the environment's JupyterLab (:func:`install_lab_settings`) so a notebook
keeps its pictures and opens unchanged:

* ``share/jupyter/lab/settings/overrides.d/hybridlab.json`` (the environment's
  overrides, one file per package beside the user's ``overrides.json``) keeps the widget
  manager's ``saveState`` *off* (NOTE [Clean on open] in ``hybridlab/viz/bundle.py``):
  with it on, a lesson with saved widgets was marked changed the moment it opened, and
  autosave rewrote it. The widgets the course saved come back either way;
* ``etc/jupyter/jupyter_server_config.json`` (its other settings kept; the server reads
  no ``ContentsManager`` setting from a ``.d`` folder) installs
  ``hybridlab.viz.bundle.pre_save_hook``: an output whose widget model is not saved (an
  instrument the student ran again) keeps its PNG, marked "a saved snapshot", instead of
  JupyterLab's "Error displaying widget: model not found", and the saved widget state
  keeps only the models an output still shows.

    python3 tools/workspace.py            # make it if missing; print its path
    python3 tools/workspace.py --refresh  # bring in new course versions, keeping edits
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
SOLUTIONS = ROOT / "lessons" / "solutions"
WORKSPACE = ROOT / "workspace"
STAMPS = ".course-versions.json"  # which course version each copy started from


class WorkspaceError(Exception):
    """Something in workspace/ that the tool will not touch; the message says what to do."""


def local_metadata() -> dict:
    """The kernelspec and language_info a kernel of this interpreter reports."""
    version = ".".join(map(str, sys.version_info[:3]))
    return {
        "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)",
                       "language": "python"},
        "language_info": {"name": "python", "version": version,
                          "codemirror_mode": {"name": "ipython", "version": 3},
                          "file_extension": ".py", "mimetype": "text/x-python",
                          "nbconvert_exporter": "python", "pygments_lexer": "ipython3"},
    }


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_new(target: Path, content: bytes) -> None:
    """Write ``content`` to ``target`` through a fresh temporary in the same folder
    (created with O_EXCL by mkstemp, so no existing file or link is ever written)."""
    handle, partial = tempfile.mkstemp(prefix=".partial-", dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(content)
        os.chmod(partial, 0o644)
        os.replace(partial, target)
    except BaseException:
        os.unlink(partial)
        raise


def notebook_copy(source: Path) -> bytes:
    """A course notebook with this machine's metadata."""
    notebook = json.loads(source.read_text(encoding="utf-8"))
    notebook["metadata"].update(local_metadata())
    return (json.dumps(notebook, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def install_copy(source: Path, target: Path) -> None:
    """Copy one course notebook with local metadata, atomically, then trust it."""
    write_new(target, notebook_copy(source))
    trust(target)


def trust(target: Path) -> None:
    """Sign the copy as ``jupyter trust`` does, in this process (a ``jupyter`` process per
    notebook took seconds each on a loaded machine: minutes for the course)."""
    try:
        import nbformat
        from nbformat.sign import NotebookNotary

        NotebookNotary().sign(nbformat.read(target, as_version=4))
    except Exception as error:  # no nbformat, an unwritable signature store, ...
        print(f"workspace: could not trust {target.name} ({error}); graphs show as images "
              f"until you run it", file=sys.stderr)


def course_files() -> list[tuple[str, Path]]:
    """(name in workspace/, course file) for every notebook and solution."""
    files = [(p.name, p) for p in sorted(NOTEBOOKS.glob("[0-9][0-9]-*.ipynb"))]
    files += [(f"solutions/{p.name}", p) for p in sorted(SOLUTIONS.glob("*.py"))]
    return files


def check_place(path: Path) -> None:
    """A regular file or nothing may sit where a copy goes; anything else is the student's
    to move (a link is never followed, a folder never emptied)."""
    if path.is_symlink() or (path.exists() and not path.is_file()):
        kind = "a link" if path.is_symlink() else "a folder" if path.is_dir() else "not a file"
        raise WorkspaceError(f"{path.relative_to(ROOT)} is {kind}, where the course's copy "
                             f"belongs; move it away (or rename it) and run this again")


def read_stamps(path: Path) -> dict:
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise WorkspaceError(f"{path.relative_to(ROOT)} is not a plain file; remove it and "
                             f"run this again (every copy then counts as edited and is kept)")
    if not path.exists():
        return {}
    try:
        stamps = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(stamps, dict) and all(isinstance(v, dict) for v in stamps.values()):
            return stamps
    except (ValueError, UnicodeDecodeError):
        pass
    raise WorkspaceError(f"{path.relative_to(ROOT)} is corrupt; remove it and run this "
                         f"again (every copy then counts as edited, so refresh keeps it)")


def prepare_solutions(folder: Path) -> list[str]:
    """Make ``workspace/solutions/`` a real folder (replacing the old link into lessons/)."""
    if folder.is_symlink():
        folder.unlink()  # removes the link only, never what it points to
        folder.mkdir()
        return ["replaced the solutions link with your own copy"]
    if folder.exists() and not folder.is_dir():
        raise WorkspaceError(f"{folder.relative_to(ROOT)} is a file where the solutions "
                             f"folder belongs; move it away and run this again")
    folder.mkdir(exist_ok=True)
    return []


def make(refresh: bool = False) -> list[str]:
    """Create (or refresh) the workspace; return what was done, one line each."""
    if WORKSPACE.is_symlink() or (WORKSPACE.exists() and not WORKSPACE.is_dir()):
        raise WorkspaceError(f"{WORKSPACE} is not a folder; move it away and run this again")
    WORKSPACE.mkdir(exist_ok=True)
    done = prepare_solutions(WORKSPACE / "solutions")
    stamps_path = WORKSPACE / STAMPS
    stamps = read_stamps(stamps_path)
    kept_root = WORKSPACE / "kept"
    if kept_root.is_symlink() or (kept_root.exists() and not kept_root.is_dir()):
        raise WorkspaceError(f"{kept_root.relative_to(ROOT)} is not a folder (refresh keeps "
                             f"edited copies there); rename it and run this again")
    kept = kept_root / time.strftime("%Y%m%d-%H%M%S")
    files = course_files()
    notebooks = [name for name, _ in files if name.endswith(".ipynb")]
    for name, source in files:
        target, course = WORKSPACE / name, digest(source)
        check_place(target)
        stamp = stamps.get(name, {})
        if target.exists():
            if not refresh or stamp.get("course") == course:
                continue  # up to date, or not asked to refresh
            if digest(target) != stamp.get("copy"):  # the student's edits
                (kept / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(target), kept / name)
                done.append(f"kept your edited {name} in {kept.relative_to(ROOT)}")
        if name.endswith(".ipynb"):
            print(f"workspace: copying and trusting {name} ({notebooks.index(name) + 1} of "
                  f"{len(notebooks)})", file=sys.stderr, flush=True)  # the first make lab: all
            install_copy(source, target)
        else:
            write_new(target, source.read_bytes())
        stamps[name] = {"course": course, "copy": digest(target)}
        done.append(f"{'updated' if refresh else 'added'} {name}")
    write_new(stamps_path, (json.dumps(stamps, indent=1) + "\n").encode("utf-8"))
    return done


WIDGETS_PLUGIN = "@jupyter-widgets/jupyterlab-manager:plugin"


def install_lab_settings(prefix: Path = Path(sys.prefix)) -> list[Path]:
    """Write the widget settings and the save hook into the environment at ``prefix``;
    return the files written (JupyterLab's settings override, the server's config)."""
    overrides = prefix / "share" / "jupyter" / "lab" / "settings" / "overrides.d"
    config = prefix / "etc" / "jupyter" / "jupyter_server_config.json"
    settings = {WIDGETS_PLUGIN: {"saveState": False}}
    hook = json.loads(config.read_text()) if config.exists() else {}
    hook.setdefault("ContentsManager", {})["pre_save_hook"] = "hybridlab.viz.bundle.pre_save_hook"
    for path, data in ((overrides / "hybridlab.json", settings), (config, hook)):
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps(data, indent=1) + "\n")
        os.replace(partial, path)
    return [overrides / "hybridlab.json", config]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refresh", action="store_true",
                        help="bring in files the course changed, keeping your edits aside")
    args = parser.parse_args(argv)
    try:
        lines = make(args.refresh)
    except WorkspaceError as error:
        print(f"workspace: {error}", file=sys.stderr)
        return 1
    for line in lines:
        print(f"workspace: {line}")
    install_lab_settings()
    print(WORKSPACE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
