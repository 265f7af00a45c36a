"""The truth-rule guard (tools/check_lessons.py): every lesson passes it, and each rule
fails on a bad example -- among them every figure issue 20 found in the course's prose."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import check_lessons  # noqa: E402 -- a tool script, not a package

# Lessons still failing the guard, each to be emptied by the work that fixes its prose
# (strict: a lesson that starts passing must leave this list). Every lesson passes now.
KNOWN_TO_FAIL: set[str] = set()

INDEX = check_lessons.read_index()


def problems(prose: str, name: str = "02-example.md") -> list[check_lessons.Problem]:
    """The problems of one paragraph of lesson prose (the title is right)."""
    return check_lessons.check_text(name, f"# {name[:2]} · A lesson\n\n{prose}\n", INDEX)


def flagged(prose: str) -> list[str]:
    return [problem.rule for problem in problems(prose)]


@pytest.mark.parametrize("lesson", check_lessons.lesson_paths([]), ids=lambda p: p.name[:2])
def test_every_lesson_passes_the_guard(lesson, request):
    if lesson.name[:2] in KNOWN_TO_FAIL:
        request.applymarker(pytest.mark.xfail(strict=True, reason="prose not yet fixed"))
    found = check_lessons.check_lesson(lesson, INDEX)
    assert found == [], "\n".join(map(str, found))


def test_the_index_lists_the_planned_lessons_and_every_lesson_file():
    assert sorted(INDEX) == [f"{n:02d}" for n in range(13)]
    assert all(len(topics) >= 3 for topics in INDEX.values())
    for lesson in check_lessons.lesson_paths([]):
        assert lesson.name[:2] in INDEX, lesson.name


# Every measured figure the issue quotes from the course's prose, in words or digits.
ISSUE_20_FIGURES = [
    "Three lines of Python pushed five tasks and returned at once.",
    "above 1 means the barrier cost time (typically a factor of two or more here)",
    "sometimes a little faster",
    "4 threads took 0.59× the time",
    "the 2×1-BLAS baseline (47.6 ms) looks serial next to the engine's 29.4 ms",
    "Dask costs about a millisecond per task",
    "the notebook measured 2810 µs",
    "the intermediate results are a few hundred bytes",
    "its bookkeeping costs a microsecond or two",
    "the allocations it saves (a few hundred kilobytes per call)",
    "1.5 KB, +6.6 µs, 96 KiB",
    "the hybridized network runs below the floor (0.96×, 0.91×)",
    "one MLP at batch 1 gets 63.2, 31.0 and 25.7 µs in three cells",
    "the breakdown shows negative costs (−2.8 µs)",
    "checkpointing costs one extra forward",
    "measured 0.80–1.04× the prediction, segments of 16 cost 1.00× a normal step",
    "the headers are a third of the file",
    "the headers are 48% of the file",
    # the issue's examples of words
    "five tasks", "twice as fast", "a few hundred bytes", "about a millisecond",
    "a third of the file", "a factor of two",
]


# The issue's sentences that were not figures but false claims, in the lessons fixed here:
# each is gone from its lesson, and the lesson now asserts what is true instead (a claim
# that fails the notebook, or a glued figure). The guard cannot judge a claim; these pin
# the fixes.
ISSUE_20_CLAIMS = [
    ("03", "pushed five tasks", "pushed {{bill_tasks}} tasks"),
    ("03", "the reshape is ready", '"after _arange, the product is the one ready task"'),
    ("03", "naming the operator and the line that pushed it",
     'claim("pushed at" in stepper.model.error'),
    ("03", "reported once", '"asking again, the same synchronisation point raises again"'),
    ("03", "typically a", "took {{barrier_ratio}} the time"),
    ("01", "The first pass, constant folding",
     '"lower_operators finds nothing to lower here"'),
    ("02", "the memory planner (lesson 01)", "the memory planner (lesson 05)"),
    ("02", "consecutive calls (lesson 03)", "consecutive calls (lesson 04)"),
    ("02", "a few hundred bytes", "the arena is {{arena_1}}"),
    ("02", "a microsecond or two", '"static_alloc saves less than a quarter of the "'),
    ("02", "a few hundred kilobytes", "the arena is {{arena_64}}"),
    ("02", "a one-worker engine", "the naive engine (every timing of this lesson"),
]


# The issue-36 sentences that the direction guard cannot read (no direction word, or a
# fact about code): each is gone from its lesson, and what replaces it is asserted or
# shown. The guard cannot judge these; the pairs pin the fixes.
ISSUE_36_FIXES = [
    ("01", "`broadcast_add_out(..., out=_plus2_fused)`",
     '"elemwise_add_out(_plus2_fused, _plus1, out=_plus2_fused)" in g_view.text'),
    ("01", "check_operator_cost", "check_held_bytes"),
    ("02", "and would print again here", "a new input shape traces again, a repeated one"),
    ("02", "which saves a few percent", "the course's notebooks are built with `autotune` off"),
    ("02", "What remains at large", "products' arithmetic scales with the batch"),
    ("05", "The grouping saves only what the allocations cost",
     "the chain runs the same kernel calls"),
    ("09", "each runtime timed the same way", "one thread each"),
    ("09", "Both run the same graph", "optimize=False"),
    ("09", "within 10 % of the liveness bound", "scratch, not results"),
    ("10", "less than it seems", "{{heavy_compute}} of one process's"),
    ("10", "only as far as that lock", "the large products on two devices overlap"),
    ("11", "intra_op_parallelism_threads=1\"", "not one -- jax-ml/jax#1539"),
    ("11", "PyTorch on a CPU is synchronous -- the operator has finished when it returns --\n",
     "PyTorch on a CPU returns when the value is ready"),
    ("11", "torch.compile\n", "run_and_get_code(compiled_net, x)"),
    # found on a fresh read against the outputs: a choice kept "the faster" while the run
    # kept the slower within the margin; "little or nothing" above a full overlap; a
    # speed-up said to fall with the batch above points that rose
    ("05", "keeps the\nfaster for that signature", '"the copy was kept exactly when'),
    ("02", "keeps the faster for that signature", "only where it is\nclearly faster"),
    ("10", "Little or nothing.", "it is only an upper bound"),
    ("10", "small additions on each:", "of which the shortest counts"),
    ("02", "It falls as the batch grows", "speed-up is smaller at the large batch"),
]


@pytest.mark.parametrize("lesson, gone, instead", ISSUE_20_CLAIMS + ISSUE_36_FIXES)
def test_the_false_sentences_issues_found_are_replaced_by_checked_ones(lesson, gone, instead):
    (path,) = check_lessons.lesson_paths([lesson])
    text = path.read_text(encoding="utf-8")
    assert gone not in text and instead in text


@pytest.mark.parametrize("sentence", ISSUE_20_FIGURES)
def test_every_figure_issue_20_found_is_flagged(sentence):
    assert flagged(sentence), sentence


@pytest.mark.parametrize("sentence, rule", [
    ("each call takes 12 ms here", "a time in digits"),
    ("a run of 3.5 s", "a time in digits"),
    ("the file is 1,024 bytes", "a size in digits"),
    ("an arena of 96 KiB", "a size in digits"),
    ("a speed-up x8.3", "a ratio in digits"),
    ("hybridized is 4.4x faster", "a ratio in digits"),
    ("the headers take 12 percent", "a percentage"),
    ("about a millisecond per task", "a time or size in words"),
    ("tens of microseconds per operator", "a time or size in words"),
    ("a fraction of a microsecond", "a time or size in words"),
    ("the queue held three pending tasks", "a count in words"),
    ("it needs one more forward pass", "a count in words"),
    ("the compiler removed four nodes", "a count in words"),
    ("twice as fast", "a ratio in words"),
    ("half the time", "a ratio in words"),
    ("a quarter of the memory", "a ratio in words"),
    ("ten times faster", "a ratio in words"),
    ("a threefold gain", "a ratio in words"),
    ("it is usually faster", "a claim that holds only sometimes"),
])
def test_each_figure_rule_fails_on_a_bad_example(sentence, rule):
    assert rule in flagged(sentence), (sentence, flagged(sentence))


@pytest.mark.parametrize("sentence", [
    "Three fully connected layers: 64 inputs, two hidden layers with ReLU, 10 outputs.",
    "the seeds' MLP at batch 64 on 512 inputs",                  # constants of an experiment
    "`float32[8,128]` is an 8 x 128 array",                       # a shape
    "The elapsed time was {{elapsed}} per call.",                 # a glued figure
    "the loop takes `12 ms` in code and $t_1 + t_2$ in math",     # code and math
    "one compiled program runs as one task on the engine",        # a design, not a count
    "For comparison, MXNet's Gluon book reports this MLP at about 0.23 s per thousand calls "
    "and a 1.8x speed-up.",                                       # a quoted, attributed figure
    "Why is the speed-up larger than the seed's 1.8x?",           # attributed by possessive
    "The Cholesky factorisation exists only for a positive definite matrix.",
])
def test_what_is_not_a_measured_figure_passes(sentence):
    assert flagged(sentence) == []


def test_a_figure_without_its_attribution_fails():
    assert flagged("this MLP runs at about 0.23 s per thousand calls, a 1.8x speed-up")


def test_code_cells_and_front_matter_are_not_prose():
    lesson = ("---\njupytext: 12 ms\n---\n\n# 02 · A lesson\n\n```{code-cell} ipython3\n"
              "print('47.6 ms, five tasks')\n```\n\nNothing measured here.\n")
    assert check_lessons.check_text("02-example.md", lesson, INDEX) == []


def test_a_problem_names_the_lesson_and_the_line():
    (problem,) = problems("First line.\n\nThe loop took 47.6 ms.")
    assert (problem.lesson, problem.line, problem.text) == ("02-example.md", 5, "47.6 ms")
    assert "glue" in str(problem)


def test_a_title_with_another_number_than_its_file_fails():
    (problem,) = check_lessons.check_text("06-pitfalls.md", "# 04 · Pitfalls\n", INDEX)
    assert problem.rule == "title" and "'# 06 · ...'" in problem.fix
    assert check_lessons.check_text("06-pitfalls.md", "# 06 · Pitfalls\n", INDEX) == []
    assert [p.rule for p in check_lessons.check_text("06-x.md", "Pitfalls\n", INDEX)] == ["title"]


@pytest.mark.parametrize("sentence, wrong", [
    # the two wrong references of lesson 02 that issue 20 found
    ("a slice of one memory *arena* that the memory planner (lesson 01) laid out", "01"),
    ("with two workers, the engine may overlap consecutive calls (lesson 03), a gain", "03"),
    ("the per-operator overhead (lesson 07)", "07"),
    ("constant folding (lesson 12)", "12"),
])
def test_a_reference_to_a_lesson_that_does_not_teach_it_fails(sentence, wrong):
    found = [p for p in problems(sentence) if p.rule == "reference"]
    assert len(found) == 1 and f"(lesson {wrong})" in found[0].text


@pytest.mark.parametrize("sentence", [
    "a slice of one memory *arena* that the memory planner (lesson 05) laid out",
    "with two workers, the engine may overlap consecutive calls (lesson 04), a gain",
    "That saves the per-operator overhead (lesson 02), but",
    "the primitive it names (`relu`; lesson 05)",
    "its *workers* (lesson 04 is about them)",
])
def test_a_reference_to_the_lesson_that_teaches_it_passes(sentence):
    assert [p for p in problems(sentence) if p.rule == "reference"] == []


def test_the_reference_hint_names_the_lesson_that_teaches_it():
    (problem,) = [p for p in problems("the engine may overlap consecutive calls with two "
                                      "workers (lesson 03)") if p.rule == "reference"]
    assert "did you mean lesson 04" in problem.fix


def test_the_command_line_reports_and_fails(capsys, monkeypatch, tmp_path):
    passing = sorted(set(INDEX) - KNOWN_TO_FAIL)
    assert check_lessons.main(passing) == 0
    (tmp_path / "03-bad.md").write_text("# 04 · Bad\n\nThe loop took 47.6 ms.\n")
    monkeypatch.setattr(check_lessons, "LESSONS", tmp_path)
    assert check_lessons.main([]) == 1
    out = capsys.readouterr().out
    assert "03-bad.md:1: title" in out and "03-bad.md:3: a time in digits" in out
    assert "2 problem(s) in 1 lesson(s)" in out


# ---- directions: a sentence that compares or states a direction is asserted -------------

# The directional sentences issue 36 found with no claim behind them, some contradicted by
# the output above them: each is flagged when nothing asserts it.
ISSUE_36_DIRECTIONS = [
    "the compiled program keeps each weight in the layout the product wants, which saves a "
    "few percent",
    "What remains at large batches is memory work the imperative call does and the compiled "
    "program avoids.",
    "The grouping saves only what the allocations cost.",
    "Folding saves time.",
    "Halving each worker's compute saves less than it seems.",
    "On ops this small two streams can overlap only as far as that lock allows.",
    "Both medians may well come out close, and the tree runs faster.",
]


def direction_rules(prose: str, cells: str = "") -> list[str]:
    lesson = f"# 02 · A lesson\n\n{prose}\n\n{cells}"
    return [p.rule for p in check_lessons.check_text("02-example.md", lesson, INDEX)]


@pytest.mark.parametrize("sentence", ISSUE_36_DIRECTIONS)
def test_every_unasserted_direction_issue_36_found_is_flagged(sentence):
    assert "an unasserted direction" in direction_rules(sentence), sentence


CELL = """```{code-cell} ipython3
claim(fast < slow, "the compiled call is faster than the imperative one", label="faster")
```"""


@pytest.mark.parametrize("prose", [
    "The compiled call is faster here. <!-- claim: faster -->",          # a label, after it
    "The compiled call is faster <!-- claim: faster --> on this run.",   # a label, inside it
    "Hybridized, the compiled call is faster than the imperative one.",  # the claim's text
    "A chain of additions grows with n by definition. <!-- not measured -->",
    "The seed's MXNet runs hybridized code faster. <!-- seed -->",
    "Is the compiled call faster?",                                      # a question
    "## Why hybridizing is faster",                                      # a heading
    "| faster | slower |",                                               # a table
    "## Exercises\n\n1. Predict how much faster the call is, then measure.",
])
def test_an_asserted_or_excused_direction_passes(prose):
    assert "an unasserted direction" not in direction_rules(prose, CELL), prose


def test_a_marker_covers_its_own_sentence_only():
    rules = direction_rules("The call is faster. <!-- claim: faster --> It uses fewer tasks.",
                            CELL)
    assert rules.count("an unasserted direction") == 1


def test_a_label_no_claim_carries_fails_and_the_problem_names_it():
    prose = "The call is faster. <!-- claim: quicker -->"
    (problem,) = [p for p in check_lessons.check_text(
        "02-example.md", f"# 02 · A lesson\n\n{prose}\n\n{CELL}", INDEX)
        if p.rule == "unknown claim label"]
    assert problem.text == "quicker" and "label='quicker'" in problem.fix


def test_claims_are_read_from_the_code_cells_labels_and_texts():
    labels, texts = check_lessons.lesson_claims(
        CELL + '\n```{code-cell} ipython3\n:tags: [x]\nclaim(a, f"at batch {b}", label="b")\n'
        '%timeit f()\n```')
    assert labels == {"faster", "b"}
    assert texts == ["the compiled call is faster than the imperative one"]
