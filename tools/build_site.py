"""Build the course as a static website, offline: `make site` -> site/index.html.

What this tool keeps true
-------------------------
The published course is the executed notebooks in ``notebooks/`` (outputs, PNGs and saved
widget state included), converted by nbconvert's HTML exporter. Widgets come back
"live-looking" from their saved state through Jupyter's HTML widget manager
(``@jupyter-widgets/html-manager``) and ``require.js``; formulas through MathJax 2.
nbconvert would load all three from a CDN; here they are *vendored*: fetched once from the
npm registry with ``npm pack`` into ``build/site-vendor/`` (git-ignored: the widget manager
alone is several MB) and copied
into ``site/_static/``, so the built site opens with no network at all.

Each page gets the course's navigation: a table of contents, previous / next links, and a
link to download the notebook. ``api.html`` is the API reference, generated from the
docstrings of the modules a student reads (pydoc).

    python3 tools/build_site.py [--out site]
"""

from __future__ import annotations

import argparse
import html
import json
import os
import pydoc
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
VENDOR = ROOT / "build" / "site-vendor"
# (npm package, file inside its tarball, name in _static/)
ASSETS = [("@jupyter-widgets/html-manager@1.0.15", "package/dist/embed-amd.js", "embed-amd.js"),
          ("requirejs@2.3.8", "package/require.js", "require.js")]
# MathJax 2 (lesson 07's formulas): only what the TeX-AMS_CHTML configuration loads.
MATHJAX = ("mathjax@2.7.9", ("MathJax.js", "config/", "extensions/", "jax/input/TeX/",
                             "jax/output/CommonHTML/", "jax/element/",
                             "fonts/HTML-CSS/TeX/woff/"))
API_MODULES = ["hybridlab.engine", "hybridlab.ndarray", "hybridlab.symbol",
               "hybridlab.autograd", "hybridlab.graph.ir", "hybridlab.graph.passes",
               "hybridlab.graph.codegen", "hybridlab.graph.cached_op", "hybridlab.gluon.block",
               "hybridlab.gluon.parameter", "hybridlab.viz.stepper", "hybridlab.viz.gantt",
               "hybridlab.viz.graph", "hybridlab.viz.bundle", "hybridlab.viz.palette"]
STYLE = """<style>
.hl-nav{font:14px/1.5 system-ui,sans-serif;background:#f4f4f4;border-bottom:1px solid #ddd;
padding:8px 16px;display:flex;gap:16px;flex-wrap:wrap;align-items:center}
.hl-nav a{color:#0072b2;text-decoration:none}.hl-nav .hl-here{font-weight:bold}
.hl-page{max-width:960px;margin:24px auto;font:15px/1.6 system-ui,sans-serif}
</style>"""


def npm_pack(package: str) -> Path:
    """``npm pack`` one package into the vendor folder; return the tarball."""
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("site: needs `npm` once, to fetch the widget manager, require.js and "
                         "MathJax from the npm registry (apt-get install npm)")
    print(f"site: fetching {package} with npm pack")
    result = subprocess.run([npm, "pack", package, "--silent"], cwd=VENDOR,
                            capture_output=True, text=True)
    if result.returncode != 0:
        said = (result.stderr.strip() or result.stdout.strip()
                or f"no message (exit status {result.returncode})")
        raise SystemExit(f"site: npm pack {package} failed: {said}\n"
                         f"site: the first build fetches it from the npm registry once "
                         f"(offline? connect and run `make site` again; later builds use "
                         f"{VENDOR.relative_to(ROOT)}/ and need no network)")
    return VENDOR / result.stdout.strip().splitlines()[-1]


def vendor_assets(static: Path) -> None:
    """Copy the widget manager, require.js and MathJax into ``static``, fetched once."""
    static.mkdir(parents=True, exist_ok=True)
    VENDOR.mkdir(parents=True, exist_ok=True)
    for package, member, name in ASSETS:
        cached = VENDOR / name
        if not cached.exists():
            tarball = npm_pack(package)
            with tarfile.open(tarball) as archive:
                data = archive.extractfile(member)
                if data is None:
                    raise SystemExit(f"site: {member} is missing from {tarball.name}")
                partial = cached.with_suffix(".partial")
                partial.write_bytes(data.read())
                os.replace(partial, cached)
            tarball.unlink()
        shutil.copy(cached, static / name)
    mathjax = VENDOR / "mathjax"
    if not (mathjax / "MathJax.js").exists():
        package, wanted = MATHJAX
        tarball, partial = npm_pack(package), VENDOR / "mathjax.partial"
        shutil.rmtree(partial, ignore_errors=True)
        with tarfile.open(tarball) as archive:
            extract_files(archive, wanted, partial)
        shutil.rmtree(mathjax, ignore_errors=True)
        os.replace(partial, mathjax)
        tarball.unlink()
    shutil.copytree(mathjax, static / "mathjax", dirs_exist_ok=True)


def extract_files(archive: tarfile.TarFile, wanted: tuple[str, ...], folder: Path) -> None:
    """Write the plain files of ``package/`` whose names start with one of ``wanted`` into
    ``folder``. Links, devices and names with ``..`` or a leading ``/`` are never written
    (by hand: ``extractall(filter="data")`` needs Python 3.11.4, Debian 12 has 3.11.2)."""
    for member in archive.getmembers():
        name = member.name.removeprefix("package/")
        parts = Path(name).parts
        if not (member.isfile() and name.startswith(wanted)) or ".." in parts or (
                Path(name).is_absolute()):
            continue
        data = archive.extractfile(member)
        assert data is not None  # (a regular file always has data)
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data.read())


def title_of(notebook: dict, fallback: str) -> str:
    for cell in notebook["cells"]:
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return fallback


def navigation(pages: list[tuple[str, str]], index: int | None) -> str:
    """The bar on top of every page: contents, previous / next, the notebook's download."""
    links = ['<a href="index.html">Contents</a>']
    if index is not None:
        if index > 0:
            links.append(f'<a href="{pages[index - 1][0]}.html">&larr; previous: '
                         f'{html.escape(pages[index - 1][1])}</a>')
        links.append(f'<span class="hl-here">{html.escape(pages[index][1])}</span>')
        if index + 1 < len(pages):
            links.append(f'<a href="{pages[index + 1][0]}.html">next: '
                         f'{html.escape(pages[index + 1][1])} &rarr;</a>')
        links.append(f'<a href="notebooks/{pages[index][0]}.ipynb" download>download the '
                     f'notebook</a>')
    links.append('<a href="api.html">API reference</a>')
    return f'<nav class="hl-nav">{" · ".join(links)}</nav>'


def page(title: str, nav: str, body: str) -> str:
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
            f"</title>{STYLE}</head><body>{nav}<div class='hl-page'>{body}</div></body></html>")


def write(path: Path, text: str) -> None:
    partial = path.with_suffix(path.suffix + ".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def build(out: Path, only: list[str] | None = None) -> list[Path]:
    """Write the site into ``out``; return the lesson pages written."""
    from nbconvert import HTMLExporter

    sys.path.insert(0, str(ROOT))
    out.mkdir(parents=True, exist_ok=True)
    vendor_assets(out / "_static")
    (out / "notebooks").mkdir(exist_ok=True)
    sources = sorted(NOTEBOOKS.glob("[0-9][0-9]-*.ipynb"))
    if only:
        sources = [s for s in sources if any(s.name.startswith(p) for p in only)]
    notebooks = [json.loads(s.read_text(encoding="utf-8")) for s in sources]
    pages = [(s.stem, title_of(nb, s.stem)) for s, nb in zip(sources, notebooks)]
    exporter = HTMLExporter(template_name="lab", require_js_url="_static/require.js",
                            widget_renderer_url="_static/embed-amd.js",
                            mathjax_url="_static/mathjax/MathJax.js?config=TeX-AMS_CHTML-full,Safe")
    written = []
    for index, source in enumerate(sources):
        body, _ = exporter.from_filename(str(source))
        nav = navigation(pages, index)
        body = body.replace("</head>", STYLE + "</head>", 1)
        body = body.replace("<body", "<body data-hybridlab-page", 1)
        start = body.index(">", body.index("<body")) + 1
        body = body[:start] + nav + body[start:]
        target = out / f"{source.stem}.html"
        write(target, body)
        shutil.copy(source, out / "notebooks" / source.name)
        written.append(target)
        print(f"site: {target.name}")
    rows = "".join(f'<li><a href="{stem}.html">{html.escape(title)}</a> '
                   f'(<a href="notebooks/{stem}.ipynb" download>notebook</a>)</li>'
                   for stem, title in pages)
    write(out / "index.html", page("hybridlab: the course", navigation(pages, None),
                                   f"<h1>hybridlab: the course</h1><ol>{rows}</ol>"))
    write(out / "api.html", page("hybridlab: API reference", navigation(pages, None),
                                 api_reference()))
    return written


def api_reference() -> str:
    """The docstrings of the modules a student reads, as pydoc renders them."""
    import importlib

    doc, parts = pydoc.HTMLDoc(), ["<h1>API reference</h1>"]
    parts.append("<ul>" + "".join(f'<li><a href="#{m}">{m}</a></li>' for m in API_MODULES)
                 + "</ul>")
    for name in API_MODULES:
        module = importlib.import_module(name)
        parts.append(f'<section id="{name}">{doc.docmodule(module)}</section>')
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "site"), help="output folder")
    parser.add_argument("only", nargs="*", help="only lessons whose name starts so")
    args = parser.parse_args(argv)
    build(Path(args.out), args.only)
    print(f"site: open {Path(args.out) / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
