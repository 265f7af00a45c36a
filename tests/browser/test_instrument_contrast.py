"""Browser test: every text the instruments and code views draw is readable in both of
JupyterLab's themes -- a contrast of at least 4.5:1 (WCAG AA) against what is behind it.

The palette's own test (tests/test_saved_widgets.py) checks the fills against INK; this
one checks what the page really shows: each element's computed colour against the first
background painted behind it, in the light theme and again in the dark one.
"""

from __future__ import annotations

import pytest
from gallery import CELLS
from labtools import WIDGET_SECONDS, Lab, open_and_run, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

# Every element with text of its own, inside an output: its colour and what is behind it.
LOW_CONTRAST = """() => {
    const rgba = text => (text.match(/[\\d.]+/g) || []).map(Number);
    const luminance = ([r, g, b]) => [r, g, b].map(c => c / 255)
        .map(c => c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4)
        .reduce((sum, c, i) => sum + c * [0.2126, 0.7152, 0.0722][i], 0);
    const behind = element => {
        for (let node = element; node; node = node.parentElement) {
            const colour = rgba(getComputedStyle(node).backgroundColor);
            if (colour.length === 3 || (colour.length === 4 && colour[3] > 0.5)) return colour;
        }
        return rgba(getComputedStyle(document.body).backgroundColor);
    };
    const found = [];
    for (const element of document.querySelectorAll(".jp-OutputArea-output *")) {
        if (element.closest("svg") || element.offsetParent === null) continue;
        const own = [...element.childNodes].filter(n => n.nodeType === 3)
            .map(n => n.textContent.trim()).join(" ").trim();
        if (!own) continue;
        const fg = rgba(getComputedStyle(element).color), bg = behind(element);
        const [light, dark] = [luminance(fg), luminance(bg)].sort((a, b) => b - a);
        const ratio = (light + 0.05) / (dark + 0.05);
        if (ratio < 4.5) {
            found.push(`${ratio.toFixed(2)}:1 ${element.tagName} "${own.slice(0, 40)}"`);
        }
    }
    return found;
}"""
ALL_RAN = """() => window.jupyterapp.shell.currentWidget.content.widgets
    .filter(cell => cell.model.type === "code")
    .every(cell => cell.model.executionCount !== null)"""


def test_instrument_and_code_view_text_is_readable_in_both_themes(page, lab: Lab) -> None:
    open_and_run(page, lab, write_notebook(lab, "gallery.ipynb", CELLS))
    page.wait_for_function(ALL_RAN, timeout=WIDGET_SECONDS * 4000)
    page.locator(".hybridlab-allreduce-explorer, .hybridlab-speedup").first.wait_for(
        timeout=WIDGET_SECONDS * 1000)
    page.wait_for_timeout(2000)
    errors = page.locator(".jp-OutputArea-output[data-mime-type*='error']").all_inner_texts()
    assert errors == []
    for theme, light in (("JupyterLab Light", "true"), ("JupyterLab Dark", "false")):
        page.evaluate(f"() => window.jupyterapp.commands.execute('apputils:change-theme', "
                      f"{{theme: '{theme}'}})")
        page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{light}'",
                               timeout=30_000)
        page.wait_for_timeout(1000)
        low = page.evaluate(LOW_CONTRAST)
        assert low == [], f"{theme}: {low}"
