"""One notebook showing every instrument and code view of the course, small, for the
browser tests that check them all at once (text contrast in both themes, controls that
change the drawing). Each cell is what a lesson does, at a size that runs in seconds."""

from __future__ import annotations

CELLS = [
    """from hybridlab import nd, sym
from hybridlab.gluon import nn
import hybridlab as mx
net = nn.HybridSequential()
net.add(nn.Dense(16, activation="relu"), nn.Dense(4))
net.initialize()
net.hybridize()
net(nd.ones((8, 12)))
mx.viz.draw_with_source(net)""",
    """x = sym.var("x")
y = (sym.relu(x) + sym.relu(x)) * 3.0 + 1.0
mx.viz.draw_passes(y)""",
    """from hybridlab.viz.pass_explorer import pass_explorer
pass_explorer(y, shape={"x": (2, 3)})""",
    """mlp = nn.HybridSequential()  # lesson 05's MLP: its text wraps below its drawing
mlp.add(nn.Dense(256, activation="relu"), nn.Dense(128, activation="relu"), nn.Dense(10))
mlp.initialize()
mlp.hybridize()
mlp(nd.ones((64, 512)))
pass_explorer(mlp)""",
    """from hybridlab.viz.stepper import queue_stepper
stepper = queue_stepper()
a = nd.ones((2, 2))
b = a * 2
stepper""",
    """prices = nd.full((1, 3), 2.5)  # lesson 03's bill: a queue drawing wider than the output
counts = nd.arange(1, 4).reshape((1, 3))
bill = (prices * counts).sum()
stepper""",
    """stepper.close()
from hybridlab import engine
from hybridlab.lab.schedule import TaskGraph
from hybridlab.viz.schedule import schedule_explorer
held = engine.StepEngine()
with engine.engine_scope(held):
    xs = [nd.ones((2,)) * i for i in range(8)]
    total = xs[0]
    for x_ in xs[1:]:
        total = total + x_
    graph = TaskGraph.from_tasks(held.tasks)
    held.run()
schedule_explorer(graph, workers=2)""",
    """steps = {}  # lesson 10's devices: measured durations, no chain of additions
for i in range(4):
    steps[f"matmul{i}"] = (3.0, [f"matmul{i - 1}"] if i else [], "gpu")
    steps[f"copy{i}"] = (2.0, [f"matmul{i}"], "copy")
    steps[f"post{i}"] = (1.0, [f"copy{i}"], "cpu")
schedule_explorer(steps, workers=1, cost="measured", streams="typed")""",
    """from hybridlab.viz.memory import memory_explorer
memory_explorer(net)""",
    """from hybridlab.viz.allreduce import allreduce_explorer
allreduce_explorer("ring", n=4, size=4e6, alpha=50e-6, beta=1e-9)""",
    """from hybridlab.lab import timing
from hybridlab.viz import plots
plots.speedup_widget(batch_size=1, width=16, depth=1, network_kind=timing.CUSTOM)""",
]
