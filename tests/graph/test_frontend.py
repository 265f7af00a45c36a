"""graph.frontend: the F the compiler writes gradient nodes with, installed by symbol."""

import pytest

from hybridlab import sym
from hybridlab.errors import GraphError
from hybridlab.graph import autodiff, frontend


def test_symbol_installs_itself_as_the_graph_front_end():
    namespace, wrap, unwrap, symbol = frontend.current()
    assert namespace is sym
    value = sym.var("x")._outputs[0]
    assert unwrap(wrap(value)) == value
    grouped = symbol([value, value])  # what the executor hands its users: a user Symbol
    assert type(grouped) is sym.Symbol and grouped._outputs == (value, value)


def test_differentiating_without_a_front_end_says_what_to_import(monkeypatch):
    monkeypatch.setattr(frontend, "_installed", None)
    graph = sym.relu(sym.var("x", shape=(2,))).to_graph()
    with pytest.raises(GraphError, match="import hybridlab"):
        autodiff.gradient_graph(graph)
