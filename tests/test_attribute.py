"""mx.AttrScope and the per-thread scopes MXNet lets a program set (AttrScope.current,
NameManager.current), and the small helpers of mx.base and mx.util."""

from __future__ import annotations

import os
import threading

import pytest

import hybridlab as mx
from hybridlab import base, sym, util
from hybridlab.name import NameManager


def test_a_scope_gives_its_attributes_to_the_variables_made_inside():
    with mx.AttrScope(group="4", note="outer"):
        with mx.AttrScope(note="inner"):
            inner = sym.var("inner")
        outer = sym.var("outer", attr={"group": "1"}, lr_mult=2)
    plain = sym.var("plain")
    assert (inner.attr("group"), inner.attr("note")) == ("4", "inner")
    assert (outer.attr("group"), outer.attr("note")) == ("1", "outer")  # the call's own win
    assert outer.attr("lr_mult") == outer.attr("__lr_mult__") == "2"  # hidden key, both ways
    assert plain.attr("group") is None
    with pytest.raises(ValueError, match="must be strings"):
        mx.AttrScope(group=4)


def test_hidden_keys_are_stored_with_underscores_and_listed_both_ways():
    x = sym.var("x", attr={"wd_mult": "0.5", "mood": "calm"})
    assert x.list_attr()["__wd_mult__"] == x.list_attr()["wd_mult"] == "0.5"
    assert "__mood__" not in x.list_attr() and x.attr("mood") == "calm"


def test_an_operator_keeps_its_attributes_and_gives_them_to_the_weights_it_creates():
    with mx.AttrScope(__group__="4"):
        conv = sym.Convolution(sym.var("data"), name="conv", kernel=(1, 1), num_filter=1,
                               attr={"__mood__": "calm"}, lr_mult=2)
        act = sym.Activation(conv, act_type="relu", wd_mult=0)  # a composite takes them too
    assert conv.attr("__group__") == "4" and conv.attr("__mood__") == "calm"
    assert conv.attr("lr_mult") == conv.attr("__lr_mult__") == "2"
    assert conv.attr("kernel") == "(1, 1)"  # the operator's own parameters still listed
    weights = conv.attr_dict()["conv_weight"]
    assert weights["__lr_mult__"] == "2" and weights["__mood__"] == "calm"  # MXNet copies
    assert act.list_attr()["wd_mult"] == "0" and act.attr("__group__") == "4"
    again = sym.load_json(act.tojson())  # kept by the JSON file, and the kernel never saw them
    assert again.attr_dict() == act.attr_dict()
    out = act.eval(data=mx.nd.ones((1, 1, 2, 2)), conv_weight=mx.nd.ones((1, 1, 1, 1)),
                   conv_bias=mx.nd.zeros((1,)))
    assert out[0].asnumpy().tolist() == [[[[1.0, 1.0], [1.0, 1.0]]]]


def test_a_file_may_give_a_variable_any_attribute_but_a_misspelled_shape():
    x = sym.var("x", attr={"mood": "calm"})
    assert sym.load_json(x.tojson()).attr("mood") == "calm"
    with pytest.raises(mx.base.MXNetError, match="must be spelled __shape__"):
        sym.load_json(x.tojson().replace('"mood"', '"shape"'))


def _in_thread(function):
    results = []
    thread = threading.Thread(target=lambda: results.append(function()))
    thread.start()
    thread.join()
    return results[0]


def test_attr_scope_and_name_manager_are_set_per_thread():
    mx.AttrScope.current = mx.AttrScope(y="main")
    NameManager.current = NameManager()
    NameManager.current.get(None, "main_thread")
    try:
        def elsewhere():
            seen = (dict(mx.AttrScope.current._attr), dict(NameManager.current._counter))
            mx.AttrScope.current = mx.AttrScope(x="spawned")
            NameManager.current = NameManager()
            return seen, mx.AttrScope.current._attr
        (attrs, counters), set_there = _in_thread(elsewhere)
        assert attrs == {} and "main_thread" not in counters  # a new thread starts fresh
        assert set_there == {"x": "spawned"}
        assert mx.AttrScope.current._attr == {"y": "main"}  # this thread's are untouched
        assert "main_thread" in NameManager.current._counter
    finally:
        mx.AttrScope.current = mx.AttrScope()
        NameManager.current = NameManager()


def test_base_and_util_helpers(monkeypatch, tmp_path):
    monkeypatch.setenv("MXNET_HOME", str(tmp_path))
    assert base.data_dir() == str(tmp_path)
    monkeypatch.delenv("MXNET_HOME")
    assert base.data_dir() == os.path.join(os.path.expanduser("~"), ".mxnet")
    assert base.py_str(b"caf\xc3\xa9") == "café" and base._as_list((1,)) == [(1,)]
    util.setenv("HYBRIDLAB_TEST_VARIABLE", "7")
    assert util.getenv("HYBRIDLAB_TEST_VARIABLE") == "7"
    util.setenv("HYBRIDLAB_TEST_VARIABLE", None)
    assert util.getenv("HYBRIDLAB_TEST_VARIABLE") is None
