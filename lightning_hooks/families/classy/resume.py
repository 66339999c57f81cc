"""Starting ``fit`` from Classy's or VISSL's own ``checkpoint.torch``: the checkpoint IO patch that reads it
(:class:`LoadCheckpoint`), its conversion to the Lightning checkpoint that resumes where it left off, and the
counters and schedulers set at ``on_train_start`` (:class:`LegacyStart`)."""

from __future__ import annotations

import math
import os
import pickle
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from lightning_hooks.core import lightning_api
from lightning_hooks.core.introspect import keywords
from lightning_hooks.core.lightning_api import pl, rank_zero_warn
from lightning_hooks.core.triggers import Patch, Remove
from lightning_hooks.families.classy import state
from lightning_hooks.families.classy.vissl import ends_train_phase


@dataclass(frozen=True)
class LoadCheckpoint(Patch):
    """The strategy's ``checkpoint_io.load_checkpoint``, wrapped on the instance (its class, e.g.
    ``AtomicCheckpointIO``, stays) so that it also reads Classy's or VISSL's checkpoint (or its folder).

    The file is read with ``weights_only=True`` first, and again as the caller asked only when that refuses pickled
    objects (``pickle.UnpicklingError``); what was read goes to ``adapter.legacy_start.loaded(checkpoint, path)``,
    which returns the Lightning checkpoint to restore. Not an event-table trigger: no hook fires from it.
    """

    def __str__(self) -> str:
        return "CheckpointIO.load_checkpoint"

    def install(self, adapter: Any, trainer: Any, pl_module: Any) -> Remove:
        io = trainer.strategy.checkpoint_io
        if getattr(io.load_checkpoint, "_classy_loader", False):  # another ClassyAdapter of this run reads them
            return _nothing
        load = io.load_checkpoint
        accepted = keywords(load)
        safe = {"weights_only": True} if accepted is None or "weights_only" in accepted else {}

        def load_checkpoint(path: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
            file = state.classy_file(path) if isinstance(path, (str, os.PathLike)) else path
            map_location = kwargs.get("map_location", args[0] if args else None)
            try:
                checkpoint = load(file, map_location, **safe)
            except pickle.UnpicklingError:  # weights_only refused pickled objects: read it as the caller asked
                checkpoint = load(file, *args, **kwargs)
            return adapter.legacy_start.loaded(checkpoint, str(file))

        load_checkpoint._classy_loader = True  # type: ignore[attr-defined]  # a mark on the function, read above
        io.load_checkpoint = load_checkpoint

        def remove() -> None:
            if vars(io).get("load_checkpoint") is load_checkpoint:
                del io.load_checkpoint

        return remove


def _nothing() -> None:
    pass


#: the one :class:`LoadCheckpoint` patch (in ClassyAdapter.run_patches: installed at ``setup``, after the table's)
LOAD_CHECKPOINT = LoadCheckpoint()


@dataclass(frozen=True)
class Position:
    """Where the Classy / VISSL checkpoint that ``fit`` started from left off (``source``: the file)."""

    source: str
    epochs: int  # train phases done: train_phase_idx + 1
    num_updates: int  # samples trained on
    iteration: int | None  # VISSL's train steps; None for Classy (its global_step is num_updates / batch size)
    test_phase_pending: bool = False  # the legacy run would run a test phase first: run_pending_test_phase runs it


class SavedState(Protocol):
    """What :class:`LegacyStart` reads of the adapter's own checkpoint state: its key among the callbacks' states, and
    its entry in a Lightning checkpoint (``AdapterState.checkpoint_state``)."""

    state_key: str

    def checkpoint_state(self, trainer: pl.Trainer, checkpoint: Mapping[str, Any]) -> dict[str, Any] | None: ...


class LegacyStart:
    """A ``ClassyAdapter``'s start from a Classy / VISSL checkpoint: :meth:`convert` makes the Lightning checkpoint
    (at load time), :meth:`apply` sets ``global_step`` and the schedulers (at ``on_train_start``, once the train loader
    is known), :meth:`run_pending_test_phase` runs the test phase the legacy run would run first (after the
    ``on_start`` hooks). :meth:`prepare` handles a Lightning checkpoint whose loss module holds state only hooks build.

    It is given the ``task`` facade (its Trainer, model and loss), the hooks, the family's name and the adapter's
    checkpoint state (:class:`SavedState`), not the adapter."""

    def __init__(self, task: Any, hooks: list[Any], family: str, saved: SavedState) -> None:
        self.task, self.hooks, self.family, self.saved = task, hooks, family, saved
        #: where the checkpoint ``fit`` started from left off, until ``on_train_start`` applies it
        self.position: Position | None = None
        #: the sampler of the train phase a VISSL mid-phase checkpoint resumed, until that phase ends
        self.skipping: Any = None
        #: Lightning's validation check, moved to that phase's last batch, to put back when the next phase starts
        self.moved_val_check: int | None = None

    def loaded(self, checkpoint: dict[str, Any], source: str) -> dict[str, Any]:
        """What :class:`LoadCheckpoint` read from ``source``, as the Lightning checkpoint to restore: a Classy or VISSL
        checkpoint converted (:meth:`convert`), a Lightning one prepared (:meth:`prepare`)."""
        if state.is_classy_checkpoint(checkpoint) or state.is_vissl_checkpoint(checkpoint):
            return self.convert(checkpoint, source)
        return self.prepare(checkpoint)

    def convert(self, legacy: dict[str, Any], source: str) -> dict[str, Any]:
        """Classy's or VISSL's checkpoint as the Lightning checkpoint ``trainer.fit(ckpt_path=...)`` resumes from.

        It carries what the legacy trainer restores: the weights (loaded now, in the file's layout, so heads attach
        as there), the optimizer state, and as the adapter's state the hook states, meters, counters (VISSL's
        ``iteration`` and ``iteration_num`` too), losses and the loss module's state (MoCo's queue and key encoder).
        Lightning's loops have ``train_phase_idx + 1`` epochs done, so ``max_epochs`` counts every train phase, as
        the legacy ``num_epochs``; :meth:`apply` sets ``global_step`` and the LR schedulers. A file written at the
        end of a train phase is followed by that epoch's test phase first, as in Classy (and VISSL when it tests).
        Outside ``fit``, only the weights, as Classy's test-only task loads them.
        """
        trainer = self.task._lightning_trainer()
        pl_module = trainer.lightning_module
        vissl = state.is_vissl_checkpoint(legacy)
        if vissl:
            state.check_vissl_checkpoint(legacy, source)
        task = legacy["classy_state_dict"]
        if trainer.state.fn == "fit":
            state.check_task_state(task, source)
        if vissl:
            state.load_vissl_model_state(self.task.base_model, task["base_model"], source)
        else:
            state.load_model_state(self.task.base_model, task["base_model"], source)
        if trainer.state.fn != "fit":
            return {"pytorch-lightning_version": pl.__version__,
                    "state_dict": {k: v.detach().clone() for k, v in pl_module.state_dict().items()}}
        epochs = task["train_phase_idx"] + 1
        pending = self._test_phase_pending(task, vissl)
        runs = pending and bool(trainer.enable_validation)
        self.position = Position(source, epochs, task["num_updates"], legacy["iteration"] if vissl else None, runs)
        mine = self._adapter_state(legacy, vissl, source, skipped=pending and not runs)
        return state.lightning_checkpoint(task, trainer, pl_module, epochs, (self.saved.state_key, mine), source)

    def prepare(self, lightning: dict[str, Any]) -> dict[str, Any]:
        """A Lightning checkpoint whose loss module holds state the live one lacks yet (MoCo's key encoder, which
        MoCoHook builds at ``on_start``, after Lightning loads the weights): those entries leave ``state_dict``, and
        the loss's whole state is restored with the adapter's, by the loss's own ``load_state_dict``, as VISSL's
        trainer restores it (MoCo keeps it for its hook)."""
        trainer = self.task._lightning_trainer()
        loss, pl_module = self.task._loss_object(), trainer.lightning_module
        prefix = next((f"{name}." for name, module in pl_module.named_modules() if module is loss), None)
        if prefix is None or "state_dict" not in lightning:
            return lightning
        weights = lightning["state_dict"]
        loss_state = {key[len(prefix):]: value for key, value in weights.items() if key.startswith(prefix)}
        later = set(loss_state) - set(loss.state_dict())
        if not later:
            return lightning
        mine = self.saved.checkpoint_state(trainer, lightning)
        if mine is None:
            raise ValueError(
                f"ClassyAdapter: the checkpoint holds the loss module's state ({prefix}{sorted(later)[0]}, ...) that "
                "only its hooks build, and no ClassyAdapter state of its own to restore it with; resume with the "
                "ClassyAdapter the checkpoint was written with."
            )
        for key in later:
            del weights[prefix + key]
        mine["host"]["loss"] = loss_state
        return lightning

    def _adapter_state(self, legacy: dict[str, Any], vissl: bool, source: str, skipped: bool) -> dict[str, Any]:
        """The adapter's checkpoint state from a Classy / VISSL checkpoint: hook states by ``name()``, counters,
        losses, meters and the loss module's state.

        ``skipped``: the test phase the legacy run would run next cannot run (the fit does not validate); it is
        counted as done, with a warning."""
        hooks, task = self.hooks, legacy["classy_state_dict"]
        if skipped:
            warnings.warn(
                f"ClassyAdapter: {source} was written at the end of train phase {task['train_phase_idx']}, and "
                f"{'VISSL' if vissl else 'Classy'} would run that epoch's test phase first, but this fit does not "
                "validate (no val_dataloaders, or limit_val_batches=0): it resumes at the next train epoch without "
                "it. Pass val_dataloaders to fit, or run trainer.validate() first if you need it.",
                stacklevel=1,
            )
        missing = [hook.name() for hook in hooks if hook.name() not in task["hooks"]]
        if missing:
            warnings.warn(f"ClassyAdapter: {source} holds no state for hooks {missing}; they start fresh", stacklevel=1)
        host = {
            "phase_idx": task["phase_idx"] + int(skipped),
            "train_phase_idx": task["train_phase_idx"],
            "num_updates": task["num_updates"],
            "iteration": legacy["iteration"] if vissl else task.get("iteration", 0),
            "local_iteration_num": legacy["iteration_num"] if vissl else -1,
            "batches": -1,
            "losses": list(task["losses"]),
            "meters": list(task["meters"]),
        }
        loss = legacy.get("loss") if vissl else task.get("loss")
        if loss and self.task.has_loss():
            host["loss"] = loss
        elif loss:
            keys = ", ".join(sorted(loss)[:4]) + ", ..." * (len(loss) > 4)
            warnings.warn(
                f"ClassyAdapter: {source} holds the loss module's state ({keys}), but the adapter has no loss, so it "
                "is not restored. Pass ClassyAdapter(..., loss='<LightningModule attribute>').",
                stacklevel=1,
            )
        names = {hook.name() for hook in hooks}
        return {"family": self.family, "hooks": {n: s for n, s in task["hooks"].items() if n in names},
                "host": host}  # fmt: skip  # the dict's last key under its first

    def _test_phase_pending(self, task: dict[str, Any], vissl: bool) -> bool:
        """Whether the legacy run would run a test phase next. Classy follows every train phase with one. VISSL only
        when it tests (here: when the Lightning run validates) after that phase (its ``TEST_EVERY_NUM_EPOCH``
        schedule: :func:`~lightning_hooks.families.classy.vissl.tests_after`), and not after a checkpoint written
        inside a train phase, whose counters are those of the phase before and of its test phase if it had one."""
        if not task["train"]:
            return False
        if not vissl:
            return True
        from lightning_hooks.families.classy.vissl import tests_after, tests_before

        config, phase = getattr(self.task, "config", None), task["train_phase_idx"]
        tests_done = task["phase_idx"] - phase
        return bool(self.task._lightning_trainer().enable_validation) and tests_after(config, phase) and (
            tests_done <= tests_before(config, phase))

    def apply(self, trainer: pl.Trainer) -> None:
        """At ``on_train_start`` after a start from a legacy checkpoint: ``global_step`` from VISSL's ``iteration``
        (Classy: ``num_updates`` / global batch size), the schedulers advanced to it, and the warning for a VISSL
        checkpoint written inside a train phase. For Classy, the train batches of the phases done count as done too,
        so the train steps the module logs at go on from there (``ClassyTaskModule.on_train_batch_end``), as
        TensorboardPlotHook's step count, which the checkpoint's hook state holds, goes on in Classy."""
        position, self.position = self.position, None
        if position is None:
            return
        batches = trainer.num_training_batches
        if position.iteration is None:
            steps = position.num_updates // max(self.task.get_global_batchsize(), 1)
            if math.isfinite(batches):
                lightning_api.set_train_batches_done(trainer, position.epochs * int(batches))
        else:
            steps = position.iteration
            if math.isfinite(batches) and steps != position.epochs * int(batches):
                self._skip_trained_batches(trainer, position, steps - position.epochs * int(batches))
        _resume_schedule(trainer, steps, position.epochs)
        if position.iteration is not None:
            _draw_discarded_iterator_seed(trainer)
        self.position = position if position.test_phase_pending else None

    def _skip_trained_batches(self, trainer: pl.Trainer, position: Position, start_iter: int) -> None:
        """A VISSL checkpoint written inside a train phase: that phase starts at batch ``start_iter``, as VISSL's
        trainer resumes it (``set_start_iter`` of its ``StatefulDistributedSampler``, which skips the samples of the
        batches already trained; ``DATA.TRAIN.USE_STATEFUL_DISTRIBUTED_SAMPLER``). :meth:`end_train_epoch` sets it
        back to 0, as VISSL does at the next phase. Another sampler cannot skip them: a warning says so.

        The phase then ends ``start_iter`` batches before Lightning's count of the loader (its length), after which
        Lightning checks for a validation: the check moves to the phase's last batch, so that the fit validates after
        it where it would after a whole epoch, as VISSL's trainer tests after the phase (with any LightningModule;
        ``VisslConfigModule`` sets its test schedule itself). :meth:`start_train_epoch` puts it back."""
        sampler: Any = getattr(trainer.train_dataloader, "sampler", None)
        if callable(getattr(sampler, "set_start_iter", None)):
            sampler.set_start_iter(start_iter)
            self.skipping = sampler
            if trainer.check_val_every_n_epoch is not None and trainer.val_check_interval == 1.0:
                batches = int(trainer.num_training_batches)
                lightning_api.validate_after(trainer, batches - start_iter)
                self.moved_val_check = batches
            return
        rank_zero_warn(
            f"ClassyAdapter: {position.source} was written at iteration {position.iteration}, inside train phase "
            f"{position.epochs}, and the train loader's sampler ({type(sampler).__name__}) cannot skip the batches "
            "already trained: Lightning starts that phase from its first batch. Set "
            "config.DATA.TRAIN.USE_STATEFUL_DISTRIBUTED_SAMPLER=true (VISSL's own trainer needs it too), or start "
            "from a phase checkpoint (model_phase<N>.torch)."
        )

    def ends_resumed_phase(self, trainer: pl.Trainer, batch_idx: int) -> bool:
        """Whether train batch ``batch_idx`` is the last of the phase a VISSL mid-phase checkpoint resumed: its sampler
        skips ``start_iter`` of the batches Lightning counts in the loader's length."""
        sampler = self.skipping
        return sampler is not None and ends_train_phase(trainer, batch_idx, int(sampler.start_iter))

    def end_train_epoch(self) -> None:
        """After the train phase a VISSL mid-phase checkpoint resumed: the next phases start at their first batch."""
        sampler, self.skipping = self.skipping, None
        if sampler is not None:
            sampler.set_start_iter(0)

    def start_train_epoch(self, trainer: pl.Trainer) -> None:
        """A train phase starts: after the one a VISSL mid-phase checkpoint resumed, Lightning's validation check is
        back after the epoch's last batch (:meth:`_skip_trained_batches` moved it for that phase)."""
        if self.skipping is None and self.moved_val_check is not None:
            lightning_api.validate_after(trainer, self.moved_val_check)
            self.moved_val_check = None

    def run_pending_test_phase(self, trainer: pl.Trainer) -> None:
        """After the ``on_start`` hooks of a fit started from a checkpoint written at the end of a train phase: the
        test phase the legacy run would run before training on, as a validation run of the fit (its test-phase
        hooks fire; the counters go on from the checkpoint's, as Classy's). The fit's train iterator is made after it
        (``ClassyAdapter.train_iterator_at``), as the legacy trainer makes the next phase's: loader workers draw their
        seeds and first indices after the test phase's, as there."""
        position, self.position = self.position, None
        if position is not None and position.test_phase_pending:
            lightning_api.validate_now(trainer)


def _draw_discarded_iterator_seed(trainer: pl.Trainer) -> None:
    """The random draw of the data iterator VISSL's trainer makes and discards when it loads a checkpoint.

    VISSL's ``SelfSupervisionTask._set_classy_state`` calls ``recreate_data_iterator`` (``iter(dataloader)``, whose
    ``DataLoader`` iterator draws its base seed from the loader's generator, the global one by default), and its
    trainer's first ``_advance_phase`` makes the iterator it trains on: one draw more than a fresh start, before the
    ``on_start`` hooks. The same draw here keeps the transforms' random stream (and the workers' seeds) in step."""
    loader = trainer.train_dataloader
    generator = getattr(loader, "generator", None)
    torch.empty((), dtype=torch.int64).random_(generator=generator)


def _resume_schedule(trainer: pl.Trainer, steps: int, epochs: int) -> None:
    """``global_step`` set to ``steps`` and every scheduler stepped from its start as far as an uninterrupted
    Lightning run would have (a Classy or VISSL checkpoint holds none)."""
    from torch.optim.lr_scheduler import ReduceLROnPlateau

    lightning_api.set_optimizer_steps(trainer, steps)
    for config in trainer.lr_scheduler_configs:
        scheduler = config.scheduler
        if not hasattr(scheduler, "base_lrs") or config.reduce_on_plateau or isinstance(scheduler, ReduceLROnPlateau):
            warnings.warn(
                f"ClassyAdapter: {type(scheduler).__name__} cannot be advanced to where the checkpoint left off (it "
                "depends on monitored values); it starts from its initial state.",
                stacklevel=1,
            )
            continue
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*lr_scheduler.step.*")
            for group, lr in zip(scheduler.optimizer.param_groups, scheduler.base_lrs, strict=False):
                group["lr"] = group["initial_lr"] = lr
            scheduler.last_epoch = 0
            for _ in range((steps if config.interval == "step" else epochs) // config.frequency):
                scheduler.step()
