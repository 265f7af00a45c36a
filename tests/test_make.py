"""The Makefile's newcomer paths: `make lab` and the apt-get step of a root `make test`.

Each test runs the real Makefile on a small copy of the checkout in ``tmp_path`` with a
fake ``id`` / ``apt-get`` / ``jupyter`` on a PATH of its own, so nothing is installed and
no server is started.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAKE = shutil.which("make")
pytestmark = pytest.mark.skipif(MAKE is None, reason="needs GNU make")


def _script(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


def _checkout(tmp_path: Path, uid: int) -> tuple[Path, dict[str, str]]:
    """A copy of the Makefile and tools, a stamp newer than pyproject, and a PATH holding
    only fakes: `id` says ``uid``, there is no `dot`, `apt-get` fails on the dpkg lock."""
    work = tmp_path / "checkout"
    (work / "tools").mkdir(parents=True)
    (work / "notebooks").mkdir()
    (work / "lessons" / "solutions").mkdir(parents=True)
    for name in ("Makefile", "pyproject.toml", "tools/workspace.py"):
        shutil.copy(ROOT / name, work / name)
    stamp = work / "stamp"
    stamp.touch()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _script(bin_dir / "id", f"#!/bin/sh\necho {uid}\n")
    for tool in ("tail", "sed"):
        os.symlink(shutil.which(tool), bin_dir / tool)
    _script(bin_dir / "apt-get", f"#!/bin/sh\necho \"$@\" >> {tmp_path}/apt-args\n"
            "echo 'E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by "
            "process 4242 (apt-get)' >&2\nexit 100\n")
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    return work, env


def _make(work: Path, env: dict[str, str], *args: str, **kwargs) -> subprocess.Popen:
    command = [MAKE, "--no-print-directory", *args, f"PY={sys.executable}",
               f"STAMP={work / 'stamp'}"]
    return subprocess.Popen(command, cwd=work, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **kwargs)


def test_root_apt_get_waits_for_the_dpkg_lock_and_reports_the_real_cause(tmp_path):
    work, env = _checkout(tmp_path, uid=0)
    out, _ = _make(work, env, "graphviz", "APT_LOCK_WAIT=7").communicate(timeout=60)
    assert "-o DPkg::Lock::Timeout=7 update" in (tmp_path / "apt-args").read_text()
    assert "Could not get lock /var/lib/dpkg/lock-frontend" in out
    assert "offline, or no such package" not in out
    assert "Error" in out  # `make graphviz` still stops: `make test` cannot draw without dot


def test_make_lab_checks_dot_before_pip():
    listing = subprocess.run([MAKE, "-n", "-B", "lab"], cwd=ROOT, capture_output=True,
                             text=True, timeout=60).stdout
    assert listing.index("command -v dot") < listing.index("pip install")


def test_make_lab_banner_without_root_or_dot_and_sigterm_stops_jupyterlab(tmp_path):
    work, env = _checkout(tmp_path, uid=1000)
    pid_file = tmp_path / "jupyter.pid"
    fake = _script(tmp_path / "jupyter", f"#!{sys.executable}\nimport os, sys, time\n"
                   f"open({str(pid_file)!r}, 'w').write(str(os.getpid()) + ' ' + "
                   f"' '.join(sys.argv[1:]))\ntime.sleep(120)\n")
    env.update(JUPYTER_PORT="9123", JUPYTER_TOKEN="s3cret")
    make = _make(work, env, "lab", f"JUPYTER={fake}", start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (pid_file.exists() and pid_file.read_text()):
            assert make.poll() is None, make.communicate()[0]
            assert time.monotonic() < deadline, "fake jupyter never started"
            time.sleep(0.05)
        pid, *argv = pid_file.read_text().split()
        assert argv[:2] == ["lab", "--notebook-dir=workspace"]
        assert "--allow-root" not in argv
        make.send_signal(signal.SIGTERM)
        out = make.communicate(timeout=30)[0]
    finally:
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGKILL)
    assert "sudo apt-get install -y graphviz" in out  # said how, and started anyway
    assert "http://127.0.0.1:9123/lab?token=s3cret" in out
    assert "ssh -L 9123:localhost:9123" in out
    assert "8888" not in out
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):  # JupyterLab went with make
        os.kill(int(pid), 0)
    assert (work / "workspace").is_dir()


def test_make_clean_keeps_what_would_need_the_network_again(tmp_path):
    work, env = _checkout(tmp_path, uid=1000)
    for tool in ("find", "rm"):
        os.symlink(shutil.which(tool), Path(env["PATH"]) / tool)
    for folder in ("build/venv-oldest/bin", "build/site-vendor", "build/site-oldest",
                   ".pytest_cache", "site"):
        (work / folder).mkdir(parents=True)
        (work / folder / "file").write_text("x")
    out, _ = _make(work, env, "clean").communicate(timeout=60)
    assert sorted(p.name for p in (work / "build").iterdir()) == ["site-vendor",
                                                                  "venv-oldest"], out
    assert not (work / ".pytest_cache").exists() and not (work / "site").exists()
    out, _ = _make(work, env, "distclean", "VENV=.venv").communicate(timeout=60)
    assert not (work / "build").exists(), out


def test_test_oldest_builds_the_site_without_npm_and_says_so(tmp_path):
    work, env = _checkout(tmp_path, uid=1000)
    oldest = work / "build" / "venv-oldest"
    (oldest / "bin").mkdir(parents=True)
    log = tmp_path / "oldest-args"
    _script(oldest / "bin" / "python", f"#!/bin/sh\necho \"$@\" >> {log}\n")
    (oldest / ".stamp").touch()
    out, _ = _make(work, env, "test-oldest", f"OLDEST_PYTHON={sys.executable}"
                   ).communicate(timeout=60)
    calls = log.read_text().splitlines()
    assert "no npm, so the site is built without its scripts" in out
    assert any(call.startswith("tools/build_site.py --no-vendor") for call in calls), calls


def test_make_venv_says_what_it_installs_before_pip_runs(tmp_path):
    work, env = _checkout(tmp_path, uid=1000)
    log = tmp_path / "pip-args"
    fake = _script(tmp_path / "python", f"#!/bin/sh\necho \"$@\" >> {log}\n")
    command = [MAKE, "--no-print-directory", "venv", f"PY={fake}",
               f"STAMP={tmp_path / 'no-stamp-yet'}"]
    out = subprocess.run(command, cwd=work, env={**env, "PATH": env["PATH"] + ":/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=60).stdout
    assert out.index("venv: installing hybridlab") < out.index("pip install")
    assert "--quiet" not in log.read_text()  # pip's own lines are the progress


def test_make_test_runs_every_step_then_fails_and_reports_each_steps_time(tmp_path):
    """tools/steps.py, which `make test` runs: a failing step does not stop the next one."""
    summary = tmp_path / "steps.txt"
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "steps.py"), "--summary", str(summary),
         "lint=exit 3", "tests=echo the tests ran", "notebooks=true"],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "the tests ran" in done.stdout  # ran after the failure
    table = done.stdout.split("== time per step\n")[1]
    assert table.strip() == summary.read_text().strip()
    rows = {line.split()[0]: line for line in table.splitlines()[1:4]}
    assert "FAILED (3)" in rows["lint"] and "passed" in rows["tests"]
    assert all(re.search(r"\d+m\d\d\.\ds  +\d+m\d\d\.\ds$", row) for row in rows.values())
    assert table.splitlines()[-1] == "failed: lint"


def test_steps_refuses_an_argument_that_is_not_name_equals_command():
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "steps.py"), "ruff check"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "a step is NAME=COMMAND, got 'ruff check'" in done.stderr


def test_make_test_runs_every_check_through_the_step_runner():
    listing = subprocess.run([MAKE, "-n", "test"], cwd=ROOT, capture_output=True, text=True,
                             timeout=60).stdout
    runner = listing[listing.index("tools/steps.py"):]
    for check in ("tools/sz.py", "ruff check", "lint-imports", "mypy", "-m pytest",
                  "test-notebooks", "test-oldest"):
        assert check in runner, check
