"""The browser tests' shared fixtures: one JupyterLab server and one chromium per test
session (``lab``, ``browser``), a fresh page per test (``page``). See ``labtools.py``."""

from __future__ import annotations

import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from labtools import (
    CHROMIUM,
    SERVER_START_SECONDS,
    Lab,
    free_port,
    jupyter_env,
    stop,
    wait_until_ready,
)


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """``jupyter lab`` from this interpreter, serving an (initially empty) folder."""
    pytest.importorskip("jupyterlab", reason="JupyterLab is not installed (the notebooks extra)")
    tmp_path = tmp_path_factory.mktemp("lab")
    # Draw every cell: JupyterLab 4 renders only the cells in view by default, and the
    # tests count what a whole notebook shows.
    tracker = tmp_path / "settings" / "@jupyterlab" / "notebook-extension"
    tracker.mkdir(parents=True)
    (tracker / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    # The environment's settings as `make lab` installs them (tools/workspace.py): widget
    # state saved with the notebook, and the pre-save hook; here in a folder of their own.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
    import workspace

    overrides, server_config = workspace.install_lab_settings(tmp_path / "env")
    port, token, log = free_port(), secrets.token_hex(16), tmp_path / "lab.log"
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
               "--ip=127.0.0.1", f"--port={port}", "--ServerApp.port_retries=0",
               f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={tmp_path}",
               "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=None",
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
               f"--LabApp.app_settings_dir={overrides.parent.parent}"]
    env = jupyter_env(tmp_path)
    env["JUPYTER_CONFIG_PATH"] = str(server_config.parent)
    with open(log, "wb") as log_file:
        process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env=env,
                                   cwd=tmp_path, start_new_session=True)
    server = Lab(process, f"http://127.0.0.1:{port}", token, log, tmp_path)
    try:
        wait_until_ready(server, time.monotonic() + SERVER_START_SECONDS)
        yield server
    finally:
        stop(server)


@pytest.fixture(scope="session")
def browser() -> Iterator:
    """Headless Debian chromium (Playwright never downloads a browser here)."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no chromium at {CHROMIUM}: run `make chromium` "
                    "(or apt-get install chromium) to run the browser tests")
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="Playwright is not installed (the test extra)")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, timeout=60_000,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"])
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser) -> Iterator:
    """A fresh page for one test (its own cookies and storage)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    new_page = context.new_page()
    new_page.set_default_timeout(30_000)
    try:
        yield new_page
    finally:
        context.close()
