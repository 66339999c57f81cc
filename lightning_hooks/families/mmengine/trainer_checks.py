"""Checks of the Lightning ``Trainer``'s loop settings against the MMEngine loop the hooks expect: refuse a Trainer
that would run another loop than ``train_cfg``'s, warn where Lightning's loop differs from the one the settings
suggest."""

from __future__ import annotations

from typing import Any

from lightning_hooks.core.adapter import warn_if_last_epoch_unvalidated
from lightning_hooks.core.lightning_api import pl, rank_zero_warn
from lightning_hooks.families.mmengine.iter_based import EpochLoopConfig, IterLoopConfig


def check_trainer(trainer: pl.Trainer, loop_cfg: IterLoopConfig | EpochLoopConfig) -> None:
    """Refuse a Trainer whose loop settings differ from ``train_cfg``'s (``loop_cfg.trainer_kwargs()``).

    Example::

        check_trainer(trainer, parse_train_cfg(dict(type="IterBasedTrainLoop", max_iters=8000)))
    """
    expected = loop_cfg.trainer_kwargs()
    actual = {k: getattr(trainer, k) for k in expected}
    if isinstance(loop_cfg, IterLoopConfig):
        expected.update(accumulate_grad_batches=1, limit_train_batches=1.0)
        actual.update(accumulate_grad_batches=trainer.accumulate_grad_batches,
                      limit_train_batches=trainer.limit_train_batches)  # fmt: skip  # arguments aligned under the call
    wrong = {k: v for k, v in actual.items() if v != expected[k]}
    if wrong:
        raise ValueError(
            f"MMEngineAdapter(train_cfg={loop_cfg}) runs that loop with Trainer({_kwargs(expected)}), "
            f"but this Trainer has {_kwargs(wrong)}. Build it with Trainer(**adapter.trainer_kwargs(), ...)"
            + (" and accumulate gradients with MMEngine's OptimWrapper(accumulative_counts=...) in the "
               "LightningModule (manual optimization), not Lightning's accumulate_grad_batches"
               if "accumulate_grad_batches" in wrong else "") + "."
        )


def warn_loop_differences(trainer: pl.Trainer, max_iters: int) -> None:
    """Warn where Lightning's loop will not run the hooks as the epoch-based MMEngine loop the settings suggest
    would (``max_iters``: the run's train iterations, ``runner.max_iters``)."""
    iters, batches, every = max_iters, trainer.num_training_batches, trainer.check_val_every_n_epoch
    max_epochs = -1 if trainer.max_epochs is None else trainer.max_epochs  # None: unbounded, as Lightning's -1
    if trainer.max_steps >= 0 and (max_epochs < 0 or iters < max_epochs * batches):
        if batches == float("inf"):
            where = "from a train loader without a length"
        else:
            epochs, rest = divmod(iters, batches)
            where = f", {rest} batches into epoch {epochs + 1}" if rest else f", {epochs} epochs"
            where += f" of {batches} batches"
        rank_zero_warn(
            f"MMEngineAdapter: Trainer(max_steps={trainer.max_steps}) ends training after {iters} iterations{where}. "
            "Hooks run MMEngine's epoch-based loop, not IterBasedTrainLoop: every pass over the data is an epoch "
            "(before/after_train_epoch, batch_idx from 0, runner.epoch + 1), and an epoch that max_steps cuts "
            "short ends without validation. IterBasedTrainLoop would run one epoch, pass the global iteration as "
            "batch_idx and validate at max_iters: for that loop, give the adapter "
            "train_cfg=dict(type='IterBasedTrainLoop', max_iters=..., val_interval=...) and build the Trainer with "
            "Trainer(**adapter.trainer_kwargs(), ...) (docs/migration-mmengine.md)."
        )
    else:
        warn_if_last_epoch_unvalidated(
            trainer, "MMEngineAdapter", f"while MMEngine's EpochBasedTrainLoop(val_interval={every}) also validates "
            "at max_epochs, no after_val_epoch sees the final weights (CheckpointHook(save_best=...), EarlyStoppingHook)"
        )


def _kwargs(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in values.items())
