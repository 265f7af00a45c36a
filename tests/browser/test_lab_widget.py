"""Browser test: lesson 02's speed-up widget works in a real JupyterLab.

A unit test can call :func:`hybridlab.viz.plots.speedup_callback`, but only a browser shows
that the sliders render (ipywidgets' JavaScript extension is installed and matches the kernel's
ipywidgets) and that moving one makes the kernel redraw the plot. So this test starts
``jupyter lab`` from this interpreter on a free port, opens a tiny notebook in Debian's
chromium with Playwright, runs it, presses an arrow key on the depth slider and checks that
the slider's readout, the widget's text and its image all change.

Invariants
----------
* The lab runs from ``sys.executable`` with every Jupyter directory inside a temporary
  folder, so its kernel is this interpreter's ``python3`` (checked: the notebook prints
  ``sys.executable``) and no user settings or saved workspace leak in.
* Every wait is bounded: the server's ``/api/status`` is polled while waiting on the
  process itself (a crashed server fails at once, with its log), and Playwright waits with
  explicit timeouts. The server is shut down through its API in a ``finally``.
* Skipped, with the reason, only when the browser tooling is missing (chromium, Playwright,
  JupyterLab: ``make chromium`` installs chromium); a widget that does not render fails.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SERVER_START_SECONDS = 90  # JupyterLab's start-up on a loaded 2-core machine takes 10-20 s
WIDGET_SECONDS = 60  # kernel start, `import hybridlab`, one measurement, the page's scripts
STEP_MS = 30_000  # any single check once the widget is up (the default 5 s is tight here)
NOTEBOOK = "widget.ipynb"
# The smallest network the sliders allow, so each redraw measures in well under a second.
CELL = """import sys
print(sys.executable)
from hybridlab.viz import plots
plots.speedup_widget(batch_size=1, width=16, depth=1)"""

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]


@dataclass
class Lab:
    """A running JupyterLab server: where it listens and its log file."""

    process: subprocess.Popen
    url: str
    token: str
    log: Path

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")[-chars:]


def write_notebook(path: Path) -> None:
    """One code cell, with the ``python3`` kernelspec so the lab does not ask for a kernel."""
    import nbformat

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(CELL)])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    nbformat.write(notebook, path)


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


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    """``jupyter lab`` from this interpreter, serving a folder with the widget notebook."""
    pytest.importorskip("jupyterlab", reason="JupyterLab is not installed (the notebooks extra)")
    write_notebook(tmp_path / NOTEBOOK)
    port, token, log = free_port(), secrets.token_hex(16), tmp_path / "lab.log"
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
               "--ip=127.0.0.1", f"--port={port}", "--ServerApp.port_retries=0",
               f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={tmp_path}",
               "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=None",
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    with open(log, "wb") as log_file:
        process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env=jupyter_env(tmp_path),
                                   cwd=tmp_path, start_new_session=True)
    server = Lab(process, f"http://127.0.0.1:{port}", token, log)
    try:
        wait_until_ready(server, time.monotonic() + SERVER_START_SECONDS)
        yield server
    finally:
        stop(server)


@pytest.fixture
def page() -> Iterator:
    """A page of headless Debian chromium (Playwright never downloads a browser here)."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no chromium at {CHROMIUM}: run `make chromium` "
                    "(or apt-get install chromium) to run the browser tests")
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="Playwright is not installed (the test extra)")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=["--no-sandbox"], timeout=60_000)
        try:
            new_page = browser.new_page(viewport={"width": 1400, "height": 1000})
            new_page.set_default_timeout(30_000)
            yield new_page
        finally:
            browser.close()


def open_and_run(page, lab: Lab) -> None:
    """Open the notebook, wait for an idle kernel, then run all cells (JupyterLab's command)."""
    page.goto(f"{lab.url}/lab/tree/{NOTEBOOK}?token={lab.token}", timeout=60_000)
    kernel_idle = """() => {
        const panel = window.jupyterapp?.shell.currentWidget;
        return panel?.sessionContext?.session?.kernel?.status === "idle";
    }"""
    try:
        page.wait_for_function(kernel_idle, timeout=WIDGET_SECONDS * 1000)
    except Exception as error:
        pytest.fail(f"the notebook's kernel never became idle ({error}); server log:\n"
                    f"{lab.log_tail()}")
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")


def cell_output_text(page) -> str:
    outputs = page.locator(".jp-OutputArea-output")
    return "\n---\n".join(outputs.all_inner_texts()) or "(no cell output at all)"


def test_depth_slider_redraws_the_plot(page, lab: Lab) -> None:  # page first: skips early
    from playwright.sync_api import expect

    open_and_run(page, lab)
    depth = page.locator(".widget-hslider", has_text="depth")
    try:
        expect(depth).to_be_visible(timeout=WIDGET_SECONDS * 1000)
    except AssertionError:
        pytest.fail("the speed-up widget's sliders did not render in JupyterLab (is ipywidgets "
                    "installed in the kernel and its lab extension in the server's environment?)"
                    f"\ncell output:\n{cell_output_text(page)}\nserver log:\n{lab.log_tail()}")
    kernel_python = page.locator(".jp-OutputArea-output", has_text=sys.executable)
    expect(kernel_python, "the kernel is not this interpreter").to_have_count(1, timeout=STEP_MS)
    readout, output = depth.locator(".widget-readout"), page.locator(".widget-output")
    expect(readout).to_have_text("1", timeout=STEP_MS)
    expect(output).to_contain_text("depth=1:", timeout=STEP_MS)
    image = output.locator("img").last
    expect(image).to_have_attribute("src", re.compile(r"^data:image/png;base64,"), timeout=STEP_MS)
    before = image.get_attribute("src")

    depth.locator(".noUi-handle").press("ArrowRight")  # one step: depth 1 -> 2

    expect(readout).to_have_text("2", timeout=STEP_MS)
    expect(output).to_contain_text("depth=2:", timeout=WIDGET_SECONDS * 1000)  # kernel redrew
    expect(output).not_to_contain_text("depth=1:", timeout=STEP_MS)
    expect(image).not_to_have_attribute("src", before, timeout=STEP_MS)
