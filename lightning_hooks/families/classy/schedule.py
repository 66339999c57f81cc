"""VISSL's ``OPTIMIZER.param_schedulers`` applied to the optimizer Lightning steps, as VISSL's trainer applies them.

In VISSL, ``task.optimizer`` is a Classy ``ClassyOptimizer`` whose param groups hold param schedulers (``lr``,
``weight_decay``, ... per group, from ``get_optimizer_param_groups``). VISSL's trainer sets the scheduled options at
two moments: every train step calls ``optimizer.step(where=task.where)``, which sets the ``update_interval: step``
options at ``where`` before the torch step, and every train phase start calls ``optimizer.on_epoch(task.where)``
(also after a resume), which sets the ``update_interval: epoch`` options while ``where < 1``.

:class:`VisslSchedule` does the same to the torch optimizer Lightning steps, through the ``ClassyOptimizer`` the
LightningModule keeps as an attribute (its ``.optimizer`` is what ``configure_optimizers`` returned), with Classy's own
``ClassyOptimizer`` code for the values, so that every group's options per step are VISSL's bitwise.
"""

from __future__ import annotations

import sys
from typing import Any

import torch

from lightning_hooks.core.lightning_api import pl

#: What to do when no ClassyOptimizer drives the optimizer Lightning steps.
WAY_OUT = (
    "Keep VISSL's ClassyOptimizer on the LightningModule and return its torch optimizer: in configure_optimizers, "
    "self.classy_optimizer = build_optimizer(config.OPTIMIZER); self.classy_optimizer.set_param_groups("
    "get_optimizer_param_groups(...)); return self.classy_optimizer.optimizer. Or make the schedule constant in the "
    "config (config.OPTIMIZER.param_schedulers.lr.name=constant) to train with your own optimizer's options."
)


def scheduled_options(config: Any) -> list[str]:
    """The options of VISSL's ``OPTIMIZER.param_schedulers`` whose schedule is not constant (``["lr", "lr_head"]``)."""
    import vissl.optimizers.param_scheduler  # noqa: F401  (registers VISSL's own schedulers)
    from classy_vision.optim import build_optimizer_schedulers
    from classy_vision.optim.param_scheduler import ConstantParamScheduler

    optimizer = config.get("OPTIMIZER", {})
    if not optimizer.get("param_schedulers"):
        return []
    schedulers = build_optimizer_schedulers(optimizer)
    return sorted(name for name, scheduler in schedulers.items() if not isinstance(scheduler, ConstantParamScheduler))


class VisslSchedule:
    """The ``ClassyOptimizer`` of each torch optimizer Lightning steps, and VISSL's two moments of scheduling.

    :meth:`attach` finds them (at the start of ``fit``); :meth:`before_step` and :meth:`at_phase_start` set the
    scheduled options at VISSL's ``where``. ``config`` is the VISSL config (None: hooks without a config, where only a
    ClassyOptimizer found on the LightningModule is applied).
    """

    def __init__(self, config: Any) -> None:
        self.config = config
        self.classy: dict[torch.optim.Optimizer, Any] = {}

    def attach(self, trainer: pl.Trainer, vissl: bool) -> None:
        """Find the ClassyOptimizers on the LightningModule; refuse a schedule that would not be applied, or that
        a Lightning LR scheduler would fight. Without VISSL (``vissl`` False: Classy hooks), a ClassyOptimizer with
        a schedule is refused: Classy's task schedules at other moments, which the adapter does not reproduce."""
        self.classy = {}
        module = trainer.lightning_module
        owner = type(module).__name__
        stepped = list(trainer.optimizers)
        for name, value in vars(module).items():
            if not _is_classy_optimizer(value):
                continue
            if not vissl:
                _refuse_classy_schedule(f"{owner}.{name}", value)
                continue
            if not any(value.optimizer is optimizer for optimizer in stepped):
                raise ValueError(
                    f"ClassyAdapter: {owner}.{name} is a ClassyOptimizer, but its .optimizer is not an optimizer "
                    "Lightning steps, so VISSL's OPTIMIZER.param_schedulers would not reach the training: return "
                    f"self.{name}.optimizer from configure_optimizers."
                )
            if value.optimizer in self.classy:
                raise ValueError(
                    f"ClassyAdapter: {owner} holds several ClassyOptimizers of the same torch optimizer; keep one."
                )
            self.classy[value.optimizer] = value
        if self.config is not None and not self.classy:
            scheduled = scheduled_options(self.config)
            if scheduled:
                raise ValueError(
                    f"ClassyAdapter(vissl=...): the config's OPTIMIZER.param_schedulers {scheduled} are not constant, "
                    f"but {owner} holds no ClassyOptimizer whose .optimizer Lightning steps, so VISSL's schedule "
                    f"could not be applied and the run would train with another LR than VISSL. {WAY_OUT}"
                )
        for config in trainer.lr_scheduler_configs:
            if any(config.scheduler.optimizer is optimizer for optimizer in self.classy):
                raise ValueError(
                    f"ClassyAdapter: configure_optimizers returned a Lightning LR scheduler "
                    f"({type(config.scheduler).__name__}) for the optimizer of a ClassyOptimizer, whose param "
                    "schedulers (VISSL's OPTIMIZER.param_schedulers) set the same options: the two schedules would "
                    "fight. Return only the optimizer, and put the schedule in OPTIMIZER.param_schedulers."
                )

    def before_step(self, optimizer: torch.optim.Optimizer, where: float) -> None:
        """``ClassyOptimizer.step(where=...)`` before the torch step: the ``step`` options at ``where``."""
        classy = self.classy[optimizer]
        if not 0 <= where < 1:
            raise RuntimeError(
                f"ClassyAdapter: an optimizer step at task.where={where}, outside [0, 1): VISSL's schedule is over "
                "(task.num_train_phases x task.num_batches_per_phase steps). Train at most max_epochs phases of the "
                "train loader's length."
            )
        from classy_vision.optim.param_scheduler import UpdateInterval

        classy._update_schedule(classy._run_schedulers(where, UpdateInterval.STEP))

    def at_phase_start(self, where: float) -> None:
        """``ClassyOptimizer.on_epoch(where)`` at a train phase start: the ``epoch`` options while ``where < 1``."""
        for classy in self.classy.values():
            classy.on_epoch(where)


def _refuse_classy_schedule(where: str, classy: Any) -> None:
    """Classy hooks without VISSL: a ClassyOptimizer's non-constant param schedulers would not be applied."""
    from classy_vision.optim.param_scheduler import ConstantParamScheduler

    groups = classy._param_group_schedulers or []
    scheduled = sorted({k for group in groups for k, v in group.items()
                        if k != "params" and not isinstance(v, ConstantParamScheduler)})  # fmt: skip  # the comprehension's condition under its for clause
    if scheduled:
        raise ValueError(
            f"ClassyAdapter: {where} is a ClassyOptimizer with param schedulers for {scheduled}, which the adapter "
            "applies only with VISSL hooks or a VISSL config (ClassyAdapter(vissl=...)). For Classy hooks, give the "
            "ClassyOptimizer constant options and return a Lightning LR scheduler from configure_optimizers "
            "(task.optimizer.options_view shows its LR as Classy's task does)."
        )


def _is_classy_optimizer(value: Any) -> bool:
    optim = sys.modules.get("classy_vision.optim")
    return optim is not None and isinstance(value, optim.ClassyOptimizer)
