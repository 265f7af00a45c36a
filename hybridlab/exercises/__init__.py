"""Self-check functions for the lesson exercises.

What this module teaches
------------------------
Each lesson ends with exercises; each exercise has a ``check_...`` function here that
runs the student's answer, compares it with what hybridlab actually does, and says
*why* an answer is wrong (not only that it is). A check returns a :class:`Feedback`,
which prints as a sentence and is truthy only when the answer is right, so a notebook
cell can ``print(check(...))`` and a test can ``assert check(...)``.

Invariants
----------
* The expected answers are computed by running hybridlab, never typed in here, so a
  check stays right when the engine changes.
* A check never raises on a wrong answer; it explains it (exceptions from the student's
  code are reported in the message).
* Imported in IPython (every lesson's first cell does), it registers the ``%%requires``
  cell magic (:mod:`hybridlab.exercises.requires`).
"""

from typing import Any

from hybridlab.exercises._common import Feedback
from hybridlab.exercises.glue import ClaimError, claim, glue
from hybridlab.exercises.lesson00 import check_fc_count, check_speedup_guess, check_tour_mlp
from hybridlab.exercises.lesson01 import (
    check_dense_from_primitives,
    check_fancy_func_nodes,
    check_held_bytes,
    check_symbol_program,
    fancy_func,
)
from hybridlab.exercises.lesson02 import (
    broken_block,
    check_arena_bytes,
    check_export_roundtrip,
    check_hybridizable,
    check_print_count,
)
from hybridlab.exercises.lesson03 import (
    BARRIER_CHOICES,
    SYNC_CANDIDATES,
    check_barrier,
    check_barrier_ratio,
    check_bounded_loop,
    check_ready_after_two_steps,
    check_sync_points,
)
from hybridlab.exercises.lesson04 import (
    check_enough_workers,
    check_makespan,
    check_span,
    check_speedup,
    check_tree_sum,
)
from hybridlab.exercises.lesson05 import (
    check_biggest_stage,
    check_cse_count,
    check_liveness_bound,
    check_times_one_pass,
)
from hybridlab.exercises.lesson06 import (
    BLOCKS,
    block_to_fix,
    check_centre,
    check_flatten,
    check_last_column,
    check_mixed_tasks,
    check_retrace_cost,
    check_row_means,
    check_sign_gate,
    mixed_stack,
)
from hybridlab.exercises.lesson07 import (
    check_gradients,
    check_numeric_gradient,
    check_train_step,
    energy,
)
from hybridlab.exercises.lesson10 import (
    check_allreduce_time,
    check_break_even_batch,
    check_fastest_way,
    check_two_device_step,
)
from hybridlab.exercises.requires import register as _register_requires

_register_requires()  # the %%requires cell magic, for cells that need an optional framework

__all__ = [
    "AddRowMeans", "BARRIER_CHOICES", "BrokenBlock", "CentreInPlace", "ClaimError",
    "Feedback", "FlattenBlock",
    "LastColumn", "SYNC_CANDIDATES", "SignGate", "check_allreduce_time", "check_arena_bytes",
    "check_barrier", "check_break_even_batch", "check_centre", "check_fastest_way",
    "check_barrier_ratio", "check_biggest_stage", "check_bounded_loop", "check_cse_count",
    "check_dense_from_primitives", "check_enough_workers", "check_export_roundtrip",
    "check_fancy_func_nodes", "check_fc_count", "check_flatten", "check_gradients",
    "check_hybridizable", "check_last_column", "check_liveness_bound", "check_makespan",
    "check_mixed_tasks", "check_row_means", "mixed_stack",
    "check_held_bytes", "check_numeric_gradient", "check_print_count",
    "check_ready_after_two_steps", "check_retrace_cost",
    "check_sign_gate", "check_span", "check_speedup", "check_speedup_guess",
    "check_symbol_program", "check_sync_points", "check_times_one_pass", "check_tour_mlp",
    "check_train_step", "check_tree_sum",
    "check_two_device_step", "claim", "energy", "fancy_func", "glue",
]


def __getattr__(name: str) -> Any:
    """The blocks to repair are made on first access (they need hybridlab.gluon)."""
    if name == "BrokenBlock":
        return broken_block()
    if name in BLOCKS:
        return block_to_fix(name)
    raise AttributeError(f"module 'hybridlab.exercises' has no attribute {name!r}")
