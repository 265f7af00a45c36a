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
link to download the notebook (the notebook itself, inside the link as a ``data:`` URL with
a ``download`` name: a browser downloads it from disk, where it ignores ``download`` on a
plain file link and shows the JSON, as well as over HTTP). ``api.html`` is the API
reference, generated from the docstrings of the modules a student reads, linking only to
itself; ``teaching.html`` is the README's "Teaching with hybridlab" section. Every link
of the site resolves (``tests/browser/test_site.py`` crawls them all).

    python3 tools/build_site.py [--out site] [--no-vendor]
"""

from __future__ import annotations

import argparse
import base64
import html
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
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
# One font family for everything a widget writes (the widget manager's defaults mix a serif
# for HTML widgets, Arial for buttons and the drawings' Helvetica).
STYLE = """<style>
.hl-nav{font:14px/1.5 system-ui,sans-serif;background:#f4f4f4;border-bottom:1px solid #ddd;
padding:8px 16px;display:flex;gap:16px;flex-wrap:wrap;align-items:center}
.hl-nav a{color:#0072b2;text-decoration:none}.hl-nav .hl-here{font-weight:bold}
.hl-page{max-width:960px;margin:24px auto;font:15px/1.6 system-ui,sans-serif}
.hl-api{margin:1.5em 0}.hl-api h3,.hl-api h4{font-size:15px;margin:1em 0 .3em}
.hl-api-member{margin-left:2em}
.jupyter-widgets,.jupyter-widgets :not(script):not(style){font-family:system-ui,-apple-system,
"Segoe UI",Helvetica,Arial,sans-serif !important}
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


def navigation(pages: list[tuple[str, str]], index: int | None, download: str = "") -> str:
    """The bar on top of every page: contents, previous / next, the notebook's download
    (``download``: the notebook's data: URL, on a lesson's page)."""
    links = ['<a href="index.html">Contents</a>']
    if index is not None:
        if index > 0:
            links.append(f'<a href="{pages[index - 1][0]}.html">&larr; previous: '
                         f'{html.escape(pages[index - 1][1])}</a>')
        links.append(f'<span class="hl-here">{html.escape(pages[index][1])}</span>')
        if index + 1 < len(pages):
            links.append(f'<a href="{pages[index + 1][0]}.html">next: '
                         f'{html.escape(pages[index + 1][1])} &rarr;</a>')
        links.append(f'<a id="hl-download" href="{download}" '
                     f'download="{pages[index][0]}.ipynb">download the notebook</a>')
    links.append('<a href="api.html">API reference</a>')
    links.append('<a href="teaching.html">Teaching with hybridlab</a>')
    return f'<nav class="hl-nav">{" · ".join(links)}</nav>'


def page(title: str, nav: str, body: str) -> str:
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
            f"</title>{STYLE}</head><body>{nav}<div class='hl-page'>{body}</div></body></html>")


def write(path: Path, text: str) -> None:
    partial = path.with_suffix(path.suffix + ".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def build(out: Path, only: list[str] | None = None, vendor: bool = True) -> list[Path]:
    """Write the site into ``out``; return the lesson pages written. ``vendor=False``
    leaves out the scripts fetched with npm (a check that the pages convert, as `make
    test-oldest` makes where npm is missing: widgets then show their saved pictures)."""
    from nbconvert import HTMLExporter

    sys.path.insert(0, str(ROOT))
    out.mkdir(parents=True, exist_ok=True)
    if vendor:
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
        data = base64.b64encode(source.read_bytes()).decode("ascii")
        nav = navigation(pages, index, f"data:application/x-ipynb+json;base64,{data}")
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
                   f'(<a href="{stem}.html#hl-download">download on its page</a>)</li>'
                   for stem, title in pages)
    write(out / "index.html", page("hybridlab: the course", navigation(pages, None),
                                   f"<h1>hybridlab: the course</h1><ol>{rows}</ol>"))
    write(out / "api.html", page("hybridlab: API reference", navigation(pages, None),
                                 api_reference()))
    write(out / "teaching.html", page("hybridlab: teaching with hybridlab",
                                      navigation(pages, None), teaching()))
    return written


def teaching() -> str:
    """The README's "Teaching with hybridlab" section as the site's page for instructors
    (one text, so the page and the README cannot drift apart)."""
    import mistune

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("## Teaching with hybridlab")
    end = readme.find("\n## ", start)
    section = readme[start:end if end >= 0 else None]
    return str(mistune.html(section[1:]))  # "## Teaching" -> "# Teaching": the page's title


def api_reference() -> str:
    """The docstrings of the modules a student reads, as one page of text.

    Every name documented gets an anchor (``#hybridlab.engine.StepEngine``); a
    cross-reference in a docstring (``:class:`~hybridlab.engine.Var```) becomes a link
    only when its target is on this page, else plain code. No other page is linked (pydoc
    would link every imported module's page, and file: paths of the building machine).
    """
    import importlib

    modules = [importlib.import_module(name) for name in API_MODULES]
    entries = {name: [] for name in API_MODULES}  # type: dict[str, list]
    for module in modules:
        for name, obj in sorted(vars(module).items()):
            if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue
            if inspect.isclass(obj) or inspect.isfunction(obj):
                entries[module.__name__].append((name, obj))
    anchors = set(API_MODULES) | {f"{m}.{n}" for m, items in entries.items()
                                  for n, _ in items}
    for module_name, items in entries.items():
        for name, obj in items:
            if inspect.isclass(obj):
                anchors |= {f"{module_name}.{name}.{m}" for m, _ in public_methods(obj)}
    parts = ["<h1>API reference</h1>", "<ul>"]
    parts += [f'<li><a href="#{m}">{m}</a></li>' for m in API_MODULES]
    parts.append("</ul>")
    for module in modules:
        name = module.__name__
        parts.append(f'<section id="{name}"><h2>{name}</h2>'
                     f"{docstring_html(module.__doc__, anchors, name)}")
        for item, obj in entries[name]:
            parts.append(entry_html(f"{name}.{item}", item, obj, anchors, name))
        parts.append("</section>")
    return "\n".join(parts)


def public_methods(cls: type) -> list[tuple[str, object]]:
    """The public methods and properties a class defines itself (not inherited)."""
    return [(n, v) for n, v in vars(cls).items()
            if not n.startswith("_") and (inspect.isfunction(v) or isinstance(v, property))]


def signature(obj: object) -> str:
    try:
        return str(inspect.signature(obj))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "(...)"


def entry_html(anchor: str, name: str, obj: object, anchors: set[str], module: str) -> str:
    """One class (with its own methods) or function: signature and docstring."""
    kind = "class" if inspect.isclass(obj) else "def"
    parts = [f'<div class="hl-api" id="{anchor}"><h3><code>{kind} '
             f"{html.escape(name + signature(obj))}</code></h3>"
             f"{docstring_html(inspect.getdoc(obj), anchors, module)}"]
    if inspect.isclass(obj):
        for method, value in public_methods(obj):
            shown = method if isinstance(value, property) else method + signature(value)
            doc = value.__doc__ if isinstance(value, property) else inspect.getdoc(value)
            parts.append(f'<div class="hl-api-member" id="{anchor}.{method}"><h4><code>'
                         f"{html.escape(shown)}</code></h4>"
                         f"{docstring_html(doc, anchors, module)}</div>")
    parts.append("</div>")
    return "".join(parts)


ROLE = re.compile(r":[a-z]+:`(~?)([^`<]*?)(?:\s*<([^`>]+)>)?`")
LITERAL = re.compile(r"``(.+?)``")


def docstring_html(doc: str | None, anchors: set[str], module: str) -> str:
    """A docstring as HTML text, block by block (blocks are separated by blank lines): a
    heading (a line underlined with dashes), a list (lines starting ``* `` or ``- ``), an
    indented block (preformatted, as after ``::``) or a paragraph; inside them, literal
    code and cross-reference roles resolved to this page's anchors."""
    if not doc:
        return ""
    out = []
    for block in re.split(r"\n\s*\n", inspect.cleandoc(doc)):
        lines = block.splitlines()
        if len(lines) >= 2 and lines[1].strip() and set(lines[1].strip()) <= set("-=~"):
            out.append(f"<h5>{inline(lines[0].strip(), anchors, module)}</h5>")
            lines = lines[2:]
        if not lines:
            continue
        if all(line.startswith((" ", "\t")) for line in lines):
            out.append(f"<pre>{html.escape(textwrap.dedent(chr(10).join(lines)))}</pre>")
        elif lines[0].lstrip().startswith(("* ", "- ")):
            items = []  # type: list[str]
            for line in lines:
                if line.lstrip().startswith(("* ", "- ")):
                    items.append(line.lstrip()[2:])
                else:
                    items[-1] += " " + line.strip()
            out.append("<ul>" + "".join(f"<li>{inline(i, anchors, module)}</li>"
                                        for i in items) + "</ul>")
        else:
            text = " ".join(line.strip() for line in lines)
            out.append(f"<p>{inline(text, anchors, module)}</p>")
    return "".join(out)


def inline(text: str, anchors: set[str], module: str) -> str:
    """Inline markup of one paragraph: roles and double-backtick literals become code."""
    text = text.replace("::", ":")
    pieces, last = [], 0
    for match in re.finditer(f"{ROLE.pattern}|{LITERAL.pattern}", text):
        pieces.append(emphasis(text[last:match.start()]))
        last = match.end()
        if match.group(0).startswith("``"):
            pieces.append(f"<code>{html.escape(match.group(4))}</code>")
            continue
        tilde, shown, target = match.group(1), match.group(2).strip(), match.group(3)
        target = (target or shown).strip()
        label = target.rsplit(".", 1)[-1] if tilde and not match.group(3) else shown
        code = f"<code>{html.escape(label)}</code>"
        resolved = next((t for t in (target, f"{module}.{target}") if t in anchors), None)
        pieces.append(f'<a href="#{resolved}">{code}</a>' if resolved else code)
    pieces.append(emphasis(text[last:]))
    return "".join(pieces)


def emphasis(text: str) -> str:
    """Plain docstring text, escaped, with ``*word*`` as emphasis."""
    return re.sub(r"(?<![\w*])\*(\S[^*]*?)\*(?![\w*])", r"<em>\1</em>", html.escape(text))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "site"), help="output folder")
    parser.add_argument("only", nargs="*", help="only lessons whose name starts so")
    parser.add_argument("--no-vendor", action="store_true",
                        help="leave out the scripts fetched with npm (no network, no npm)")
    args = parser.parse_args(argv)
    build(Path(args.out), args.only, vendor=not args.no_vendor)
    print(f"site: open {Path(args.out) / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
