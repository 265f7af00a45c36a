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


@pytest.mark.parametrize("build, expected", [
    (lambda x: x + 1, "_plusscalar0"), (lambda x: 1 + x, "_plusscalar0"),
    (lambda x: x - 1, "_minusscalar0"), (lambda x: 1 - x, "_rminusscalar0"),
    (lambda x: x * 2, "_mulscalar0"), (lambda x: -x, "_mulscalar0"),
    (lambda x: x / 2, "_divscalar0"), (lambda x: 2 / x, "_rdivscalar0"),
    (lambda x: x ** 2, "_powerscalar0"), (lambda x: 2 ** x, "_rpower_scalar0"),
    (lambda x: x % 2, "_modscalar0"), (lambda x: 2 % x, "_rmodscalar0"),
    (lambda x: x == 1, "_equal_scalar0"), (lambda x: x != 1, "_not_equal_scalar0"),
    (lambda x: x > 1, "_greater_scalar0"), (lambda x: x >= 1, "_greater_equal_scalar0"),
    (lambda x: x < 1, "_lesser_scalar0"), (lambda x: x <= 1, "_lesser_equal_scalar0"),
    (lambda x: x - x, "_minus0"), (lambda x: x > x, "_greater0"),
])
def test_operator_names_are_mxnets(build, expected):
    """MXNet 1.x named ``a + 1`` after ``_internal._PlusScalar`` but ``a > 1`` after
    ``_greater_scalar``: the automatic name is that function's name in lower case."""
    with NameManager():
        assert build(sym.var("x")).name == expected


@pytest.mark.parametrize("build, expected", [
    (lambda x: sym.Activation(x, act_type="relu"), "activation0"),
    (lambda x: sym.softmax(x), "softmax0"),
    (lambda x: sym.log_softmax(x), "log_softmax0"),
    (lambda x: sym.Dropout(x, p=0.5), "dropout0"),
    (lambda x: sym.softrelu(x), "softrelu0"),
    (lambda x: sym.maximum(x, 1), "maximum0"),
])
def test_composites_are_named_as_one_operator(build, expected):
    with NameManager():
        x = sym.var("x")
        out = build(x)
        assert out.name == expected
        helpers = [n.name for n in out.to_graph().nodes if n.kind == "call"][:-1]
        assert all(h.startswith(expected + "_") for h in helpers), helpers
        assert sym.exp(x).name == "exp0"  # helpers did not take the user's counters
    with NameManager(), Prefix("net_"):
        assert build(sym.var("x")).name == "net_" + expected
        assert sym.Activation(sym.var("x"), act_type="tanh", name="act").name == "net_act"


def test_composite_errors_name_the_composite_and_its_arguments():
    from hybridlab import errors, nd
    with pytest.raises(errors.ShapeError, match=r"^stack: cannot join .* \(in its concat step\)"):
        nd.stack(nd.ones(2), nd.ones(3))
    with pytest.raises(TypeError, match=r"softrelu: unknown argument 'beta' \(it takes data\)"):
        nd.softrelu(nd.ones(2), beta=2)


def test_layer_operator_errors_name_the_layer_operator():
    from hybridlab import errors, nd
    with pytest.raises(errors.ShapeError, match=r"^log_softmax: axis 4 is out of range"):
        nd.log_softmax(nd.ones((2, 3)), axis=4)
    with pytest.raises(TypeError, match=r"Dropout: unknown attribute 'prob' \(known attributes: "
                                        r"axes, cudnn_off, mode, p\)"):
        nd.Dropout(nd.ones(2), prob=0.2)
    with pytest.raises(errors.AttributeValueError, match=r"Activation: missing required "
                                                         r"attribute\(s\) \['act_type'\]"):
        sym.Activation(sym.var("x"))
