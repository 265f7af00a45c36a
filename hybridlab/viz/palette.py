"""The course's colours, defined once: operator kinds and task states.

What this module teaches
------------------------
A reader learns a colour once. An operator of kind ``elementwise`` has one colour in the
graph drawings, the Gantt charts and the pass explorer; a task that is ``ready`` has one
colour in the queue stepper and in every schedule. So every drawing takes its colours
from here, and draws a legend from the same tables.

Both tables are built from the Okabe-Ito palette (Okabe & Ito, "Color Universal Design",
2008), the common choice for readers with colour-vision deficiencies: its eight colours
stay distinct under protanopia, deuteranopia and tritanopia. Fills are lightened towards
white so black labels stay readable; task states also differ in line style (dashed for
waiting, bold for running, crossed for failed in the drawings that use them), so the
state never rests on colour alone.
"""

from __future__ import annotations

# Okabe-Ito, by name: orange, sky blue, bluish green, yellow, blue, vermillion, reddish
# purple, and grey for "nothing special".
OKABE_ITO = {
    "orange": "#e69f00",
    "sky_blue": "#56b4e9",
    "bluish_green": "#009e73",
    "yellow": "#f0e442",
    "blue": "#0072b2",
    "vermillion": "#d55e00",
    "reddish_purple": "#cc79a7",
    "grey": "#999999",
}


def lighten(colour: str, amount: float) -> str:
    """``colour`` (``#rrggbb``) mixed with white: 0 keeps it, 1 gives white."""
    if not 0 <= amount <= 1:
        raise ValueError(f"lighten: amount must be in [0, 1], got {amount}")
    channels = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
    mixed = [round(c + (255 - c) * amount) for c in channels]
    return "#" + "".join(f"{c:02x}" for c in mixed)


# One fill per OpDef.kind (graph drawings, Gantt bars, the pass explorer).
KIND_COLOURS = {
    "elementwise": lighten(OKABE_ITO["bluish_green"], 0.6),
    "broadcast": lighten(OKABE_ITO["sky_blue"], 0.55),
    "reduce": lighten(OKABE_ITO["orange"], 0.55),
    "opaque": lighten(OKABE_ITO["reddish_purple"], 0.55),
}
OTHER_COLOUR = "#d9d9d9"  # anything that is not a registry operator (CachedOp, copies, ...)

# One fill per kind of device, for schedules whose tasks are bound to devices; hatching
# repeats it without colour (copies are the hatched ones).
DEVICE_COLOURS = {
    "cpu": lighten(OKABE_ITO["bluish_green"], 0.5),
    "gpu": lighten(OKABE_ITO["blue"], 0.55),
    "copy": lighten(OKABE_ITO["orange"], 0.45),
}
DEVICE_HATCHES = {"cpu": "", "gpu": "", "copy": "///"}

# One fill per engine task state (the queue stepper, Gantt charts of schedules). The order
# is the life of a task, and the order legends list them in.
TASK_STATES = ("waiting", "ready", "running", "done", "failed", "skipped")
STATE_COLOURS = {
    "waiting": "#f2f2f2",
    "ready": lighten(OKABE_ITO["yellow"], 0.35),
    "running": lighten(OKABE_ITO["sky_blue"], 0.3),
    "done": lighten(OKABE_ITO["bluish_green"], 0.45),
    "failed": lighten(OKABE_ITO["vermillion"], 0.3),
    "skipped": lighten(OKABE_ITO["grey"], 0.45),
}
# Graphviz node styles that repeat the state without colour (dashed: not yet runnable).
STATE_STYLES = {
    "waiting": "filled,dashed",
    "ready": "filled,bold",
    "running": "filled,bold",
    "done": "filled",
    "failed": "filled,bold",
    "skipped": "filled,dotted",
}

# Drawings sit on this background, so they stay legible in JupyterLab's dark theme.
BACKGROUND = "#ffffff"
# Text drawn on any fill above: set explicitly wherever a fill is (an HTML chip inherits
# the theme's text colour otherwise -- white in the dark theme).
INK = "#1a1a1a"
# HTML text, in either theme. The rule: text on a fill of ours gets INK with it (CODE_STYLE,
# the chips); text on the page's own background gets no colour of ours but the theme's own
# variables (their light-theme value as the fallback: the site and GitHub have no theme).
PANEL = "#f7f7f7"  # the fill of code and IR boxes
CODE_STYLE = (f"font-size:12px;line-height:1.35;white-space:pre;overflow-x:auto;"
              f"word-break:normal;overflow-wrap:normal;background:{PANEL};color:{INK};"
              f"padding:6px 8px")
QUIET_TEXT = "color:var(--jp-ui-font-color2,#555555)"  # notes beside a drawing
ERROR_TEXT = "color:var(--jp-error-color1,#a33333)"  # an error an instrument reports


def contrast_ratio(foreground: str, background: str) -> float:
    """WCAG 2's contrast ratio of two ``#rrggbb`` colours (1 to 21; text needs 4.5)."""
    def luminance(colour: str) -> float:
        channels = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
                  for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    light, dark = sorted((luminance(foreground), luminance(background)), reverse=True)
    return (light + 0.05) / (dark + 0.05)
