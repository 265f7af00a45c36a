"""``mx.lr_scheduler``: the learning rate as a function of the number of updates so far.

What this module teaches
------------------------
A scheduler is called with ``num_update`` (how many optimizer steps have run) and
returns the learning rate for the next one. ``Trainer(..., {'lr_scheduler': s})`` asks it
at every step, so ``trainer.learning_rate`` changes by itself. Optional warm-up: during
the first ``warmup_steps`` updates the rate climbs from ``warmup_begin_lr`` to
``base_lr`` (``'linear'``) or stays at ``warmup_begin_lr`` (``'constant'``).
"""

from __future__ import annotations

import math
from typing import Any


class LRScheduler:
    """Base class: ``scheduler(num_update) -> learning rate``."""

    def __init__(self, base_lr: float = 0.01, warmup_steps: int = 0,
                 warmup_begin_lr: float = 0.0, warmup_mode: str = "linear") -> None:
        if warmup_mode not in ("linear", "constant"):
            raise ValueError(f"warmup_mode={warmup_mode!r}: use 'linear' or 'constant'")
        if warmup_steps < 0 or (warmup_steps and warmup_begin_lr > base_lr):
            raise ValueError(f"warmup: steps={warmup_steps} must be >= 0 and warmup_begin_lr="
                             f"{warmup_begin_lr} at most base_lr={base_lr}")
        self.base_lr, self.warmup_steps = base_lr, warmup_steps
        self.warmup_begin_lr, self.warmup_final_lr = warmup_begin_lr, base_lr
        self.warmup_mode = warmup_mode

    def get_warmup_lr(self, num_update: int) -> float:
        if self.warmup_mode == "constant":
            return self.warmup_begin_lr
        step = (self.warmup_final_lr - self.warmup_begin_lr) / self.warmup_steps
        return self.warmup_begin_lr + step * num_update

    def __call__(self, num_update: int) -> float:
        raise NotImplementedError(f"{type(self).__name__} must define __call__(num_update)")


class FactorScheduler(LRScheduler):
    """Multiply the rate by ``factor`` every ``step`` updates, never below ``stop_factor_lr``."""

    def __init__(self, step: int, factor: float = 1.0, stop_factor_lr: float = 1e-8,
                 base_lr: float = 0.01, **warmup: Any) -> None:
        super().__init__(base_lr, **warmup)
        if step < 1 or factor > 1.0:
            raise ValueError(f"FactorScheduler: step={step} must be >= 1 and factor={factor} "
                             f"at most 1 (the rate only decreases)")
        self.step, self.factor, self.stop_factor_lr = step, factor, stop_factor_lr
        self.count = 0

    def __call__(self, num_update: int) -> float:
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        while num_update > self.count + self.step:  # (MXNet's rule: strictly past a step)
            self.count += self.step
            self.base_lr = max(self.base_lr * self.factor, self.stop_factor_lr)
        return self.base_lr


class MultiFactorScheduler(LRScheduler):
    """Multiply the rate by ``factor`` once past each update count in ``step`` (increasing)."""

    def __init__(self, step: list, factor: float = 1.0, base_lr: float = 0.01,
                 **warmup: Any) -> None:
        super().__init__(base_lr, **warmup)
        if not step or any(b <= a for a, b in zip(step, step[1:])) or step[0] < 1:
            raise ValueError(f"MultiFactorScheduler: step={step} must be increasing counts >= 1")
        self.step, self.factor, self.cur_step_ind, self.count = list(step), factor, 0, 0

    def __call__(self, num_update: int) -> float:
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        while self.cur_step_ind < len(self.step) and num_update > self.step[self.cur_step_ind]:
            self.count = self.step[self.cur_step_ind]
            self.cur_step_ind += 1
            self.base_lr *= self.factor
        return self.base_lr


class _Decay(LRScheduler):
    """From ``base_lr`` down to ``final_lr`` over the ``max_update`` updates after the
    warm-up, by ``_shape(fraction done)`` (1 at the start, 0 at the end); then constant."""

    def __init__(self, max_update: int, base_lr: float = 0.01, final_lr: float = 0,
                 **warmup: Any) -> None:
        super().__init__(base_lr, **warmup)
        if max_update < 1 or max_update <= self.warmup_steps:
            raise ValueError(f"{type(self).__name__}: max_update={max_update} must be >= 1 "
                             f"and more than warmup_steps={self.warmup_steps}")
        self.base_lr_orig, self.max_update, self.final_lr = base_lr, max_update, final_lr
        self.max_steps = max_update - self.warmup_steps

    def _shape(self, done: float) -> float:
        raise NotImplementedError

    def __call__(self, num_update: int) -> float:
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        if num_update <= self.max_update:
            done = (num_update - self.warmup_steps) / self.max_steps
            self.base_lr = self.final_lr + (self.base_lr_orig - self.final_lr) * self._shape(done)
        return self.base_lr


class PolyScheduler(_Decay):
    """Polynomial decay: ``final + (base - final) * (1 - done)**pwr``."""

    def __init__(self, max_update: int, base_lr: float = 0.01, pwr: float = 2,
                 final_lr: float = 0, **warmup: Any) -> None:
        super().__init__(max_update, base_lr, final_lr, **warmup)
        self.power = pwr

    def _shape(self, done: float) -> float:
        return float((1 - done) ** self.power)


class CosineScheduler(_Decay):
    """Half a cosine: ``final + (base - final) * (1 + cos(pi * done)) / 2``."""

    def _shape(self, done: float) -> float:
        return (1 + math.cos(math.pi * done)) / 2
