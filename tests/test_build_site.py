"""tools/build_site.py: vendoring the site's scripts safely on every supported Python."""

from __future__ import annotations

import io
import sys
import tarfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import build_site


def _tarball(path: Path) -> None:
    with tarfile.open(path, "w:gz") as archive:
        def add(name: str, data: bytes = b"x", kind: bytes = tarfile.REGTYPE, link: str = ""):
            info = tarfile.TarInfo(name)
            info.size, info.type, info.linkname = len(data), kind, link
            archive.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
        add("package/MathJax.js", b"mathjax")
        add("package/jax/input/TeX/config.js", b"tex")
        add("package/unwanted.js")
        add("package/jax/input/TeX/../../../../escape.js")
        add("package/jax/element/link.js", kind=tarfile.SYMTYPE, link="/etc/passwd")


def test_extract_files_writes_only_wanted_plain_files_inside_the_folder(tmp_path):
    _tarball(tmp_path / "m.tgz")
    out = tmp_path / "out" / "mathjax"
    with tarfile.open(tmp_path / "m.tgz") as archive:
        build_site.extract_files(archive, ("MathJax.js", "jax/"), out)
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert written == ["MathJax.js", "jax/input/TeX/config.js"]
    assert (out / "MathJax.js").read_bytes() == b"mathjax"
    assert not (tmp_path / "escape.js").exists() and not (tmp_path / "out" / "escape.js").exists()


def test_a_silent_npm_failure_says_what_happened_and_what_to_do(tmp_path, monkeypatch):
    npm = tmp_path / "npm"
    npm.write_text("#!/bin/sh\nexit 1\n")  # offline without a cache: npm may print nothing
    npm.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(build_site, "VENDOR", build_site.ROOT / "build" / "site-vendor")
    monkeypatch.setattr(build_site.subprocess, "run", _run_in(tmp_path))
    with pytest.raises(SystemExit) as failed:
        build_site.npm_pack("requirejs@2.3.8")
    message = str(failed.value)
    assert "no message (exit status 1)" in message
    assert "offline?" in message and "build/site-vendor" in message


def _run_in(folder: Path):
    """subprocess.run, but in ``folder`` (the vendor folder may not exist in a test)."""
    import subprocess

    real = subprocess.run

    def run(command, **kwargs):
        kwargs["cwd"] = folder
        return real(command, **kwargs)
    return run


def test_the_teaching_page_is_the_readmes_section():
    page = build_site.teaching()
    assert page.startswith("<h1>Teaching with hybridlab</h1>")
    assert "make assignments" in page and "tools/grade.py" in page
    assert "<h2>" not in page  # it stops before the README's next section
