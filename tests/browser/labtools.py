"""Helpers of the browser tests: start and stop a JupyterLab, write and run notebooks.

Starting JupyterLab takes 10-20 s on a loaded 2-core machine, so the browser tests share
one server (session-scoped ``lab``) serving a temporary folder, and one headless Debian
chromium (``browser``); each test gets a fresh page (``page``) and writes its own
notebook with :func:`write_notebook`, then :func:`open_and_run` opens it and runs every
cell. Adding an instrument's browser test costs its own clicks, not another server.

Invariants
----------
* The lab runs from ``sys.executable`` with every Jupyter directory inside the temporary
  folder, so its kernel is this interpreter's ``python3`` and no user settings or saved
  workspace leak in.
* Every wait is bounded: the server's ``/api/status`` is polled while waiting on the
  process itself (a crashed server fails at once, with its log), and Playwright waits with
  explicit timeouts. The server is shut down through its API at the end of the session.
* Skipped, with the reason, only when the browser tooling is missing (chromium, Playwright,
  JupyterLab: ``make chromium`` installs chromium); a widget that does not render fails.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SERVER_START_SECONDS = 90  # JupyterLab's start-up on a loaded 2-core machine takes 10-20 s
WIDGET_SECONDS = 60  # kernel start, `import hybridlab`, the page's scripts
STEP_MS = 30_000  # any single check once the widget is up (the default 5 s is tight here)


@dataclass
class Lab:
    """A running JupyterLab server: where it listens and its log file."""

    process: subprocess.Popen
    url: str
    token: str
    log: Path
    root: Path

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")[-chars:]


def write_notebook(lab: Lab, name: str, cells: list[str]) -> str:
    """A notebook of code ``cells`` in the lab's folder (ipykernel's kernelspec, so the lab
    does not ask for a kernel); returns its name for :func:`open_and_run`."""
    import nbformat

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                       "language": "python"}
    nbformat.write(notebook, lab.root / name)
    return name


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def jupyter_env(root: Path) -> dict[str, str]:
    """This process's environment with every Jupyter directory under ``root``.

    MPLBACKEND is dropped: a non-interactive backend set for other tests would make the
    kernel print ``<Figure ...>`` instead of the inline PNG this test looks at.
    """
    env = {key: value for key, value in os.environ.items() if key != "MPLBACKEND"}
    for name, folder in (("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_DATA_DIR", "data"),
                         ("JUPYTER_RUNTIME_DIR", "runtime"),
                         ("JUPYTERLAB_SETTINGS_DIR", "settings"),
                         ("JUPYTERLAB_WORKSPACES_DIR", "workspaces")):
        env[name] = str(root / folder)
    return env


def wait_until_ready(lab: Lab, deadline: float) -> None:
    """Poll ``/api/status`` until it answers; waiting on the process between polls."""
    status = f"{lab.url}/api/status?token={lab.token}"
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(status, timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError):
            pass
        try:  # a bounded wait that also returns at once if the server died
            code = lab.process.wait(timeout=0.25)
        except subprocess.TimeoutExpired:
            continue
        pytest.fail(f"jupyter lab exited with status {code} while starting:\n{lab.log_tail()}")
    pytest.fail(f"jupyter lab did not answer {status} within {SERVER_START_SECONDS} s:\n"
                f"{lab.log_tail()}")


def stop(lab: Lab) -> None:
    """Shut down through the API (which also stops kernels); kill the group if that fails."""
    request = urllib.request.Request(f"{lab.url}/api/shutdown?token={lab.token}", method="POST")
    try:
        urllib.request.urlopen(request, timeout=10).close()
        lab.process.wait(timeout=30)
    except (urllib.error.URLError, ConnectionError, subprocess.TimeoutExpired):
        os.killpg(lab.process.pid, signal.SIGKILL)  # the server and any kernel it started
        lab.process.wait(timeout=10)


def open_notebook(page, lab: Lab, name: str) -> None:
    """Open a notebook of the lab's folder and wait for an idle kernel."""
    # a workspace of its own: the shared server would else restore the last test's tabs
    workspace = name.replace(".", "-")
    page.goto(f"{lab.url}/lab/workspaces/{workspace}/tree/{name}?reset&token={lab.token}",
              timeout=60_000)
    wait_kernel_idle(page, lab)


def wait_kernel_idle(page, lab: Lab) -> None:
    """Wait until the current notebook's kernel has handled everything sent to it (cells,
    widget messages): a state, so a loaded machine only makes the wait longer."""
    kernel_idle = """() => {
        const panel = window.jupyterapp?.shell.currentWidget;
        return panel?.sessionContext?.session?.kernel?.status === "idle";
    }"""
    try:
        page.wait_for_function(kernel_idle, timeout=WIDGET_SECONDS * 1000)
    except Exception as error:
        pytest.fail(f"the kernel never became idle ({error}); server log:\n{lab.log_tail()}")


def open_and_run(page, lab: Lab, name: str) -> None:
    """Open the notebook, wait for an idle kernel, then run all cells (JupyterLab's command)."""
    open_notebook(page, lab, name)
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")


def cell_output_text(page) -> str:
    outputs = page.locator(".jp-OutputArea-output")
    return "\n---\n".join(outputs.all_inner_texts()) or "(no cell output at all)"


def run_instrument(page, lab: Lab, name: str, cells: list[str], css_class: str, what: str):
    """Write ``cells`` as notebook ``name``, run it, and return the locator of the widget
    with ``css_class`` once it is visible; fail with the cell output and the server log
    if ``what`` (the instrument's name) never renders."""
    from playwright.sync_api import expect

    open_and_run(page, lab, write_notebook(lab, name, cells))
    widget = page.locator(f".{css_class}").first
    try:
        expect(widget).to_be_visible(timeout=WIDGET_SECONDS * 1000)
    except AssertionError:
        pytest.fail(f"{what} did not render\ncell output:\n{cell_output_text(page)}"
                    f"\nserver log:\n{lab.log_tail()}")
    return widget
