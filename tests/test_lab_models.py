"""The instruments' models (``hybridlab.lab``) work with no drawing library at all.

A subprocess blocks matplotlib, ipywidgets, graphviz and IPython from import (a meta-path
finder that raises ImportError for them), then imports every model and uses it: the list
scheduler, a schedule explorer's numbers, the queue stepper's model, the memory timeline,
the pass pipeline's stages. Any import of a blocked module fails the run.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROGRAM = textwrap.dedent('''
    import sys

    BLOCKED = ("matplotlib", "ipywidgets", "graphviz", "IPython")

    class Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"{name} is blocked: a model imported a drawing library")
            return None

    sys.meta_path.insert(0, Block())

    from hybridlab import engine, nd, sym
    from hybridlab.lab import graphs, memory, passes, queue, schedule, timing

    records = schedule.simulate(["a", "b", "c"], [[], [0], [0]], [1.0, 2.0, 3.0], 2)
    assert [r.worker for r in records] == [0, 1, 0] and max(r.end for r in records) == 4.0
    model = schedule.ScheduleModel(schedule.TaskGraph.from_dict(
        {"a": (1, []), "b": (2, ["a"]), "c": (3, ["a"])}), workers=1, cost="measured")
    numbers = model.numbers()
    assert (numbers["work"], numbers["span"], numbers["makespan"]) == (6.0, 4.0, 6.0)

    held = engine.StepEngine()
    with engine.engine_scope(held):
        x = nd.ones((2,))
        y = x + 1
        stepper = queue.QueueModel(held, lambda: {"x": x, "y": y})
        assert stepper.counts()["pending"] == 2 and stepper.sync_choices() == ["x", "y"]
        stepper.sync("y")
        assert stepper.counts()["pending"] == 0

    data = sym.var("data")
    net = sym.relu(sym.FullyConnected(data, num_hidden=4, name="fc"))
    boxes, plan = memory.timeline(net, shape={"data": (2, 3)})
    assert boxes and max(memory.live_bytes(boxes, b.first) for b in boxes) <= plan.planned
    stages = passes.PassModel(net, shape={"data": (2, 3)}).stages
    assert stages[0].name == "input graph" and stages[-1].name == "plan_memory"
    assert graphs.op_kind("relu") == "elementwise" and timing.SEED
    assert not [m for m in sys.modules if m.split(".")[0] in BLOCKED]
    print("models ok")
''')


def test_the_models_run_with_every_drawing_library_blocked() -> None:
    done = subprocess.run([sys.executable, "-c", PROGRAM], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("models ok")


def test_the_block_itself_works() -> None:
    """The blocking finder really blocks (a check that cannot fail would prove nothing)."""
    program = PROGRAM.split("from hybridlab import engine")[0] + "import matplotlib\n"
    done = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode != 0 and "matplotlib is blocked" in done.stderr
