"""CONTRIBUTING.md's recipes, each followed once: an operator, a compiler pass, an instrument.

If a recipe stops being enough (a new operator needs a file the recipe does not name, a
pass cannot be added the way the page says, an instrument's view needs more than a
model and an ``Instrument``), these tests fail and the page must change with the code.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def test_an_operator_is_one_registry_line(tmp_path: Path) -> None:
    """Recipe "Add an operator": one ``_unary`` line in ops/elementwise.py gives nd, sym,
    the tape's gradient and a hybridized block (a copy of the package, edited as a
    contributor would)."""
    package = tmp_path / "hybridlab"
    shutil.copytree(ROOT / "hybridlab", package, ignore=shutil.ignore_patterns("__pycache__"))
    elementwise = package / "ops" / "elementwise.py"
    elementwise.write_text(elementwise.read_text() + textwrap.dedent('''
        _unary("smooth_abs", lambda x: np.sqrt(x * x + 1).astype(x.dtype),
               lambda F, g, x, out: g * x / out, "sqrt(x * x + 1), a smooth |x|.")
    '''))
    program = textwrap.dedent('''
        import json
        import numpy as np
        import hybridlab as mx
        from hybridlab import autograd, nd, sym
        from hybridlab.gluon import nn

        x = nd.array([-2.0, 0.5, 3.0])
        x.attach_grad()
        with autograd.record():
            y = nd.smooth_abs(x)
        y.backward()
        v = x.asnumpy()
        assert np.allclose(y.asnumpy(), np.sqrt(v * v + 1))
        assert np.allclose(x.grad.asnumpy(), v / np.sqrt(v * v + 1))
        nodes = json.loads(sym.smooth_abs(sym.var("a")).tojson())["nodes"]
        assert [n["op"] for n in nodes] == ["null", "smooth_abs"]

        class Net(nn.HybridBlock):
            def hybrid_forward(self, F, a):
                return F.smooth_abs(a)

        net = Net()
        net.hybridize()
        assert np.allclose(net(x).asnumpy(), y.asnumpy())
        print("operator ok")
    ''')
    done = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": str(tmp_path),
                                                       "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "operator ok" in done.stdout


def test_a_pass_joins_through_hybridize_and_the_pass_explorer() -> None:
    """Recipe "Add a compiler pass": a pure function, given to ``hybridize(passes=)``, runs
    in the compiled program and is a stage of the pass explorer's model."""
    from hybridlab import nd
    from hybridlab.gluon import nn
    from hybridlab.graph.ir import rebuild, with_inputs
    from hybridlab.lab.graphs import cached_op_of
    from hybridlab.lab.passes import PassModel

    def relu_of_relu_is_relu(graph, context):
        """relu(relu(x)) -> relu(x): the outer one changes nothing."""
        changes = []

        def visit(node, inputs):
            node = with_inputs(node, inputs)
            inner = node.inputs[0].node if node.kind == "call" and node.inputs else None
            if node.op == "relu" and inner is not None and inner.op == "relu":
                changes.append(f"dropped {node.name}")
                return [node.inputs[0]]
            return node

        return rebuild(graph, visit), changes

    class Twice(nn.HybridBlock):
        def hybrid_forward(self, F, x):
            return F.relu(F.relu(x))

    net = Twice()
    net.hybridize(passes=[relu_of_relu_is_relu])
    x = nd.array([-1.0, 2.0])
    assert net(x).asnumpy().tolist() == [0.0, 2.0]
    assert cached_op_of(net).code.count("relu(") == 1
    stages = PassModel(net, passes=[relu_of_relu_is_relu]).stages
    (mine,) = [s for s in stages if s.name == "relu_of_relu_is_relu"]
    assert mine.changes and mine.changes[0].startswith("dropped")


def test_an_instrument_is_a_lab_model_and_a_viz_view() -> None:
    """Recipe "Add an instrument": a model (state, an action, its summary) and a view
    subclassing ``viz.bundle.Instrument`` give the three-form output every saved notebook
    needs: a widget, a PNG and a text."""
    import ipywidgets as widgets
    from matplotlib.figure import Figure

    from hybridlab.viz.bundle import WIDGET_VIEW, Instrument, figure_png

    class CounterModel:  # would live in hybridlab/lab/: plain Python
        def __init__(self) -> None:
            self.count = 0

        def add(self) -> None:
            self.count += 1

        def summary(self) -> str:
            return f"counted {self.count}"

    class CounterView(Instrument):  # would live in hybridlab/viz/
        def __init__(self, model: CounterModel) -> None:
            self.model = model
            self.button = widgets.Button(description="add")
            self.button.on_click(lambda _: self.model.add())
            self.widget = widgets.VBox([self.button])

        def summary(self) -> str:
            return self.model.summary()

        def snapshot_png(self) -> bytes:
            figure = Figure(figsize=(1, 1))
            figure.add_subplot().bar([0], [self.model.count])
            return figure_png(figure)

    view = CounterView(CounterModel())
    view.button.click()
    bundle = view._repr_mimebundle_()
    assert bundle["text/plain"] == "counted 1" and WIDGET_VIEW in bundle
    assert bundle["image/png"] and np.frombuffer(bundle["image/png"].encode()
                                                 if isinstance(bundle["image/png"], str)
                                                 else bundle["image/png"], np.uint8).size
