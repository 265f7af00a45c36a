"""The README's minutes are computed (tools/pacing.py), at rates fixed in the tool, and no
lesson's core path is longer than the limit."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import pacing  # noqa: E402 -- a tool script, not a package

LESSON = """---
jupytext: {}
---

# 02 · A lesson

One two three four five. <!-- not measured --> {{figure}}

```{code-cell} ipython3
# NBVAL_IGNORE_OUTPUT
x = 1

y = 2
```

## Exercises

Six seven.

## Going further

Eight nine ten.

```{code-cell} ipython3
:tags: [requires-torch]
z = 3
```
"""


def test_the_rates_are_the_fixed_ones():
    assert (pacing.WORDS_PER_MINUTE, pacing.LINES_PER_MINUTE) == (130, 20)


def test_words_code_lines_and_run_time_add_up_per_part(tmp_path):
    lesson = tmp_path / "02-a-lesson.md"
    lesson.write_text(LESSON)
    pace = pacing.pace(lesson, seconds=[30.0, 6.0])
    # core: "02 A lesson", five words, "Exercises Six seven"; two code lines; 30 s
    assert (pace.core.code_lines, pace.core.run_seconds) == (2, 30.0)
    assert pace.core.words == 11
    assert pace.core.minutes == pytest.approx(11 / 130 + 2 / 20 + 0.5)
    assert (pace.further.words, pace.further.code_lines, pace.further.run_seconds) == (5, 1, 6)
    assert pace.cell() == "1 + 0 going further"


def test_run_times_that_do_not_match_the_cells_count_as_none(tmp_path):
    lesson = tmp_path / "02-a-lesson.md"
    lesson.write_text(LESSON)
    assert pacing.pace(lesson, seconds=[1.0]).core.run_seconds == 0


def test_the_readme_row_is_rewritten_with_the_computed_minutes():
    readme = "| lesson | minutes | what |\n|---|---|---|\n| `02-a-lesson` | 45 | a lesson |\n"
    pace = pacing.Pace("02-a-lesson", pacing.Part(1300, 40, 120), pacing.Part(130, 0, 0))
    assert "| `02-a-lesson` | 14 + 1 going further | a lesson |" in pacing.with_minutes(
        readme, [pace])
    assert pacing.problems([pace], readme)[0].startswith("README.md: 02-a-lesson says '45'")


def test_a_core_path_over_the_limit_is_a_problem():
    long = pacing.Pace("02-a-lesson", pacing.Part(130 * 60, 0, 0), None)
    assert any("more than 55" in p for p in pacing.problems([long], ""))


def test_the_readme_minutes_are_the_computed_ones_and_every_core_path_fits():
    paces = [pacing.pace(path) for path in pacing.lessons()]
    assert pacing.problems(paces, pacing.README.read_text(encoding="utf-8")) == []
