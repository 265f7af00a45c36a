"""Automatic symbol names follow MXNet's NameManager / Prefix rules."""

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hybridlab as mx
from hybridlab import sym
from hybridlab.name import NameManager, Prefix


def test_counters_are_per_hint_and_user_names_are_kept():
    with NameManager():
        a = sym.var("a")
        names = [str(sym.relu(a)), str(sym.relu(a)), str(a + a), str(a * 2),
                 str(sym.relu(a, name="act")), str(a + a)]
    assert names == ["<Symbol relu0>", "<Symbol relu1>", "<Symbol _plus0>",
                     "<Symbol _mulscalar0>", "<Symbol act>", "<Symbol _plus1>"]


def test_a_fresh_manager_restarts_counting_and_restores_the_old_one():
    outer = NameManager()
    with outer:
        a = sym.var("a")
        assert sym.relu(a).name == "relu0"
        with NameManager():
            assert sym.relu(a).name == "relu0"
        assert NameManager.current is outer
        assert sym.relu(a).name == "relu1"


def test_prefix_prefixes_automatic_and_user_names_but_not_variables():
    with Prefix("hybridnet0_"):
        x = sym.var("data")
        hidden = sym.relu(x)
        named = sym.relu(hidden, name="fwd")
    assert repr(x) == "<Symbol data>"
    assert repr(hidden) == "<Symbol hybridnet0_relu0>"  # the seed's printed trace
    assert named.name == "hybridnet0_fwd"


def test_nested_prefixes_do_not_stack_and_exit_restores_on_error():
    before = NameManager.current
    with pytest.raises(RuntimeError, match="boom"):
        with Prefix("outer_"):
            with Prefix("inner_"):
                assert sym.relu(sym.var("a")).name == "inner_relu0"
            raise RuntimeError("boom")
    assert NameManager.current is before


def test_current_can_be_spelled_as_a_call_and_as_a_property():
    with NameManager() as manager:
        assert NameManager.current is manager
        assert NameManager.current() is manager
        assert mx.name.current() is manager


def test_each_thread_has_its_own_manager():
    seen = {}

    def work():
        with NameManager():
            seen["thread"] = [sym.relu(sym.var("a")).name for _ in range(2)]

    with NameManager():
        first = sym.relu(sym.var("a")).name
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
        second = sym.relu(sym.var("a")).name
    assert (first, second) == ("relu0", "relu1")
    assert seen["thread"] == ["relu0", "relu1"]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["relu", "fullyconnected", "_plus", "conv"]), max_size=20))
def test_names_are_hint_plus_the_count_of_that_hint_so_far(hints):
    manager = NameManager()
    names = [manager.get(None, hint) for hint in hints]
    expected = [f"{hint}{hints[:i].count(hint)}" for i, hint in enumerate(hints)]
    assert names == expected
    assert len(set(names)) == len(names)
