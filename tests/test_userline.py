"""The one user-line finder (hybridlab.userline), used by the engine, the IR and tracing."""

import os
import sys

import hybridlab
from hybridlab import engine, exercises, nd, userline
from hybridlab.graph import ir

PACKAGE = os.path.dirname(hybridlab.__file__)


def test_user_code_is_outside_the_package_or_in_its_exercises():
    assert userline.is_user_code(__file__)
    assert userline.is_user_code(os.path.join(PACKAGE, "exercises", "lesson06.py"))
    assert not userline.is_user_code(os.path.join(PACKAGE, "engine.py"))
    assert not userline.is_user_code(os.path.join(PACKAGE, "graph", "ir.py"))
    assert not userline.is_user_code("<hybridlab-generated-7>")  # code hybridlab compiled


def test_one_format_for_the_ir_and_tracing():
    here = userline.user_line()
    assert here == "test_userline.py:22 `here = userline.user_line()`"
    origin = ir.user_origin()
    assert origin == "test_userline.py:24 `origin = ir.user_origin()`"


def test_the_engine_records_the_users_line_of_a_push():
    records = []
    with engine.Callback(push=lambda task: records.append(task.origin)):
        line = sys._getframe().f_lineno + 1
        (nd.ones((2,)) + 1).wait_to_read()
    assert records and all(r == (__file__, line) for r in records)


def test_an_exercises_block_error_names_its_line_not_an_unknown_one():
    """Lesson 06's SignGate is code the exercise hands the student: the error says where."""
    feedback = str(exercises.check_sign_gate(exercises.SignGate))
    assert "<unknown line>" not in feedback
    assert "at lesson06.py:" in feedback and "`if x.sum() > 0:`" in feedback


def test_tracing_inspects_only_code_outside_the_package():
    """The exercises' blocks name their lines in errors, but tracing does not report on or
    refuse them (their planned behaviour stays): the narrower rule."""
    lesson = os.path.join(PACKAGE, "exercises", "lesson02.py")
    assert userline.is_user_code(lesson) and not userline.is_outside_package(lesson)
    assert userline.is_outside_package(__file__)
