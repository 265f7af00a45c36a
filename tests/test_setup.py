"""Guards on the project set-up: dependency lists, a light `import hybridlab`, line budgets.

* pyproject.toml and environment.yml must list the same packages with the same version
  bounds, so a pip user and a conda user get the same course.
* ``import hybridlab`` must stay light: it imports numpy and nothing heavy (plots, widgets
  and graphviz are imported inside the functions that draw). How long it takes is measured
  by ``benchmarks/import_time.py``.
* ``tools/sz.py`` (the code-line budgets, CONTRIBUTING.md) passes, and counts what it claims to.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# conda-forge names that differ from the PyPI name of the same package.
CONDA_TO_PIP = {"python-graphviz": "graphviz"}
# conda entries that are the toolchain, not a dependency pyproject.toml could list.
CONDA_ONLY = {"python", "pip"}

HEAVY_MODULES = ("matplotlib", "graphviz", "ipywidgets", "threadpoolctl", "IPython", "sklearn",
                 "scipy", "onnx", "pandas", "jax", "torch")


def _load_toml(path: Path) -> dict:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    return tomllib.loads(path.read_text(encoding="utf-8"))


def _split_requirement(text: str) -> tuple[str, str]:
    """``"ipywidgets>=8"`` -> ``("ipywidgets", ">=8")``; names normalised as PEP 503 does."""
    match = re.fullmatch(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*([^;]*?)\s*(;.*)?",
                         text)
    assert match, f"cannot parse requirement {text!r}"
    name = re.sub(r"[-_.]+", "-", match.group(1)).lower()
    return name, match.group(3).replace(" ", "")


def pyproject_requirements() -> dict[str, str]:
    """Core dependencies plus every extra; the self-reference ``hybridlab[...]`` is skipped."""
    project = _load_toml(ROOT / "pyproject.toml")["project"]
    entries = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        entries += extra
    pairs = [_split_requirement(entry) for entry in entries]
    return {name: spec for name, spec in pairs if name != project["name"]}


def conda_requirements(path: Path = ROOT / "environment.yml") -> dict[str, str]:
    """The conda packages of environment.yml, under their PyPI names.

    A deliberately small parser (the core must not need PyYAML): the entries are the
    ``  - name spec`` lines of the ``dependencies:`` block, stopping at its ``pip:`` list.
    """
    found: dict[str, str] = {}
    in_dependencies, item_indent = False, None
    for line in path.read_text(encoding="utf-8").splitlines():
        text = line.split("#", 1)[0].rstrip()
        if not text:
            continue
        if not text.startswith((" ", "-")):  # a top-level key
            in_dependencies = text == "dependencies:"
            continue
        item, indent = text.strip(), len(text) - len(text.lstrip())
        if not in_dependencies or not item.startswith("- "):
            continue
        item_indent = indent if item_indent is None else item_indent
        if indent > item_indent or item.endswith(":"):  # the `- pip:` list and its entries
            continue
        name, spec = _split_requirement(item[2:])
        if name not in CONDA_ONLY:
            found[CONDA_TO_PIP.get(name, name)] = spec
    return found


def test_split_requirement_parses_names_bounds_and_extras() -> None:
    assert _split_requirement("ipywidgets>=8") == ("ipywidgets", ">=8")
    assert _split_requirement("Scikit_Learn") == ("scikit-learn", "")
    assert _split_requirement("hybridlab[notebooks]") == ("hybridlab", "")
    assert _split_requirement("numpy >= 2, <3 ; python_version>'3'") == ("numpy", ">=2,<3")


def test_conda_parser_maps_names_and_skips_the_toolchain_and_pip_list(tmp_path: Path) -> None:
    env = tmp_path / "environment.yml"
    env.write_text("name: x\nchannels:\n- conda-forge\ndependencies:\n- python>=3.10\n"
                   "- numpy>=2  # core\n- python-graphviz\n- pip\n- pip:\n  - -e .\n  - extra\n"
                   "variables:\n  - not-a-package\n")
    assert conda_requirements(env) == {"numpy": ">=2", "graphviz": ""}


def test_pyproject_core_dependency_is_numpy_only() -> None:
    project = _load_toml(ROOT / "pyproject.toml")["project"]
    assert [_split_requirement(d)[0] for d in project["dependencies"]] == ["numpy"]


def test_pyproject_and_environment_yml_list_the_same_packages() -> None:
    pip_side, conda_side = pyproject_requirements(), conda_requirements()
    assert "numpy" in conda_side and "graphviz" in conda_side, conda_side
    only_pip = sorted(set(pip_side) - set(conda_side))
    only_conda = sorted(set(conda_side) - set(pip_side))
    assert not only_pip and not only_conda, (
        f"add {only_pip} to environment.yml and {only_conda} to pyproject.toml "
        f"(conda names map through CONDA_TO_PIP)")
    differing = {n: (pip_side[n], conda_side[n]) for n in pip_side if pip_side[n] != conda_side[n]}
    assert not differing, f"version bounds differ (pyproject, environment.yml): {differing}"


_IMPORT_PROBE = f"""
import json, sys
import hybridlab
print(json.dumps([name for name in {HEAVY_MODULES!r} if name in sys.modules]))
"""


def test_import_hybridlab_imports_nothing_heavy() -> None:
    # How long the import takes is a benchmark (benchmarks/import_time.py), not a test: a
    # shared CI machine makes any time limit flaky. What is checked here cannot be noise.
    done = subprocess.run([sys.executable, "-c", _IMPORT_PROBE], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, f"`import hybridlab` failed:\n{done.stderr}"
    heavy = json.loads(done.stdout.strip().splitlines()[-1])
    assert not heavy, (f"`import hybridlab` imported {heavy}; import them inside the "
                       f"functions that need them (viz/, profiler.py)")


def _load_sz():
    spec = importlib.util.spec_from_file_location("sz", ROOT / "tools" / "sz.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sz_counts_code_but_not_docstrings_comments_or_blanks() -> None:
    sz = _load_sz()
    source = '''"""Module docstring,
over two lines."""

# a comment
import os  # trailing comment


def f(x):
    """Function docstring."""
    return (x +
            1)


class C:
    attribute = 1
    """Attribute docstring."""
    text = """a string value
spanning two lines"""
'''
    # import, def, return (two lines), class, attribute, text (two lines)
    assert sz.code_lines(source) == 8
    assert sz.code_lines("") == 0
    assert sz.code_lines("x = f'{1 + 1}'\n") == 1


def test_sz_check_reports_modules_over_budget_the_total_and_stale_budgets() -> None:
    sz = _load_sz()
    budgets = {"hybridlab/a.py": 10}
    assert sz.check({"hybridlab/a.py": 10}, budgets) == []
    assert sz.check({"hybridlab/a.py": 11}, budgets)[0].startswith("hybridlab/a.py")
    assert sz.check({"hybridlab/a.py": 10, "hybridlab/unlisted.py": sz.DEFAULT_BUDGET + 1},
                    budgets) != []
    many = {f"hybridlab/m{i}.py": 100 for i in range(sz.TOTAL_BUDGET // 100 + 1)}
    assert sz.check(many, {}) == [f"total: {sum(many.values())} code lines, "
                                  f"budget {sz.TOTAL_BUDGET}"]
    # a budget for a module that does not exist (renamed, removed) is reported
    stale = sz.check({"hybridlab/a.py": 10}, {**budgets, "hybridlab/gone.py": 50})
    assert stale and stale[0].startswith("hybridlab/gone.py")
    # and the real table has none: every budget names a module
    assert not [p for p in sz.check(sz.measure()) if "no module" in p]


def test_sz_budgets_follow_the_code_down() -> None:
    """A budget far above its module's code is a violation: budgets only go down."""
    sz = _load_sz()
    assert sz.check({"hybridlab/a.py": 100}, {"hybridlab/a.py": 100 + sz.headroom(100)}) == []
    loose = sz.check({"hybridlab/a.py": 100}, {"hybridlab/a.py": 101 + sz.headroom(100)})
    assert loose and "lower it to at most 110" in loose[0]
    assert sz.headroom(20) == 8  # small modules keep a few lines of room


def test_sz_passes_on_the_package() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "sz.py")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"tools/sz.py failed:\n{done.stdout}\n{done.stderr}"
    assert "ops:" in done.stdout and "flags:" in done.stdout


def test_the_package_version_is_the_one_pyproject_declares():
    import hybridlab

    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    declared = re.search(r'^version = "([^"]+)"', text, re.MULTILINE).group(1)
    assert hybridlab.__version__ == declared


def _setuptools_major() -> int:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return int(version("setuptools").split(".")[0])
    except (PackageNotFoundError, ValueError):
        return 0


@pytest.mark.slow
def test_a_built_wheel_holds_the_package_and_nothing_else(tmp_path):
    """`pip install .` works without make: the wheel carries every subpackage (viz, ops,
    graph passes, exercises) and no tests, lessons or tools."""
    import zipfile

    # with this environment's setuptools when it meets pyproject's build requirement: an
    # isolated build fetches setuptools from the package index on every run (minutes)
    local = ["--no-build-isolation"] if _setuptools_major() >= 77 else []
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", *local, "-q",
                            "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    wheel = next(tmp_path.glob("hybridlab-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for module in ("hybridlab/__init__.py", "hybridlab/viz/stepper.py", "hybridlab/ops/linalg.py",
                   "hybridlab/graph/passes/plan_memory.py", "hybridlab/exercises/lesson03.py"):
        assert module in names, module
    assert not [n for n in names if n.startswith(("tests/", "lessons/", "tools/"))]


def test_install_hints_name_the_checkout_not_an_unpublished_package() -> None:
    # hybridlab is not on PyPI: `pip install hybridlab[...]` would fetch nothing (or a
    # stranger's package). Hints say how to install the extra from the checkout.
    unpublished = re.compile(r"pip install ['\"`]?hybridlab\[")
    found = [f"{path.relative_to(ROOT)}:{number}"
             for folder in ("hybridlab", "tools", "lessons")
             for path in sorted((ROOT / folder).rglob("*")) if path.suffix in (".py", ".md")
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if unpublished.search(line)]
    assert not found, f"say `pip install -e '.[extra]'` (in the checkout) instead: {found}"


def test_binder_environment_is_the_notebooks_set_without_a_pip_install_of_the_checkout():
    # repo2docker builds the conda environment before it copies the checkout in, so
    # `pip: [-e .]` there fails the build; .binder/postBuild installs hybridlab afterwards.
    binder = ROOT / ".binder"
    project = _load_toml(ROOT / "pyproject.toml")["project"]
    extras = project["optional-dependencies"]
    wanted = dict(_split_requirement(d) for d in
                  project["dependencies"] + extras["notebooks"] + extras["dask"]
                  + extras["frameworks"])
    wanted.pop(project["name"])
    assert conda_requirements(binder / "environment.yml") == wanted
    text = (binder / "environment.yml").read_text(encoding="utf-8")
    assert not re.search(r"^\s*-\s*(-e\s+)?\.\s*$", text, re.MULTILINE), "no `- -e .` entry"
    post = (binder / "postBuild").read_text(encoding="utf-8")
    assert "pip install --no-deps -e ." in post and "tools/workspace.py" in post
    assert (binder / "postBuild").stat().st_mode & 0o111, "postBuild must be executable"
