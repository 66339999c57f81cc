"""What fires each Classy Vision / VISSL mount point under Lightning.

Every train epoch is a train phase, every validation run (never the sanity check) and every ``trainer.test`` a test
phase. The train phase ends at its last batch, with the model still in train mode, before the test phase starts, as
in Classy: the last train batch's ``on_train_batch_end`` fires ``on_phase_end`` after its ``on_step`` and Classy's
phase-end sync (losses averaged over ranks, meters synced). A train epoch cut short ends at ``on_train_epoch_end``, or,
when Lightning validates before stopping (``trainer.should_stop`` inside the epoch: ``max_time``, a callback), at
that validation's start, before its test phase. VISSL's mid-step mount points come from patches the
adapter installs in ``setup``: a forward hook on ``task.base_model`` (``on_forward``), a wrapper around the step
methods (``on_loss_and_meter``) and an optimizer step post-hook (``on_update``). ``LightningModule.forward`` fires
only for the first forward inside a train, validation or test step (never in the sanity check, never for forwards
that hooks run themselves).
"""

from dataclasses import dataclass
from typing import Any

from lightning_hooks.core.events import EventTable, Mount
from lightning_hooks.core.triggers import LAST_TRAIN_BATCH, ON, ModuleStep, OptimizerStep, Patch, Remove


@dataclass(frozen=True)
class ModelForward(Patch):
    """Every forward of the model hooks see (``task.base_model``: the LightningModule, or the model it holds, which a
    step may call directly); with VISSL, a pre-hook reports the start (``before=True``) for VISSL's forward timer. The
    adapter decides which forwards fire, and whether a run needs the patch at all."""

    def __str__(self) -> str:
        return "task.base_model.forward"

    def install(self, adapter: Any, trainer: Any, pl_module: Any) -> Remove:
        model = adapter.task.base_model
        # plain functions, not bound methods: a hook that deep-copies the model shares this adapter, not a copy
        after = model.register_forward_hook(lambda module, args, output: adapter.trigger(self, output=output))
        if not adapter.vissl:  # no forward timer (perf stats are VISSL's)
            return after.remove
        before = model.register_forward_pre_hook(lambda module, args: adapter.trigger(self, before=True))

        def remove() -> None:
            before.remove()
            after.remove()

        return remove


FORWARD = ModelForward()
OPTIMIZER_STEP = OptimizerStep()
#: step method -> the trigger of its rows, which fire once the step returned (the step fills ``last_batch``)
STEPS = {method: ModuleStep(method) for method in ("training_step", "validation_step", "test_step")}

EVENTS = EventTable(
    "classy",
    [
        Mount(ON["on_train_start"], "on_start"),
        Mount(ON["on_train_epoch_start"], "on_phase_start"),
        Mount(FORWARD, "on_forward"),
        Mount(STEPS["training_step"], "on_loss_and_meter"),
        Mount(ON["on_after_backward"], "on_backward"),
        Mount(OPTIMIZER_STEP, "on_update", when="in_train_loop"),
        Mount(ON["on_train_batch_end"], "on_step"),
        Mount(LAST_TRAIN_BATCH, "on_phase_end"),
        Mount(ON["on_train_epoch_end"], "on_phase_end", when="train_epoch_open"),
        Mount(ON["on_validation_start"], "on_start", when="standalone_validation"),
        Mount(ON["on_validation_epoch_start"], "on_phase_start", when="real_validation"),
        Mount(STEPS["validation_step"], "on_loss_and_meter", when="real_validation"),
        Mount(ON["on_validation_batch_end"], "on_step", when="real_validation"),
        Mount(ON["on_validation_epoch_end"], "on_phase_end", when="real_validation"),
        Mount(ON["on_validation_end"], "on_end", when="standalone_validation"),
        Mount(ON["on_train_end"], "on_end"),
        Mount(ON["on_test_start"], "on_start"),
        Mount(ON["on_test_epoch_start"], "on_phase_start"),
        Mount(STEPS["test_step"], "on_loss_and_meter"),
        Mount(ON["on_test_batch_end"], "on_step"),
        Mount(ON["on_test_epoch_end"], "on_phase_end"),
        Mount(ON["on_test_end"], "on_end"),
        Mount(ON["on_exception"], "on_exception"),
    ],
    conditions={
        "in_train_loop": "in Lightning's train loop (not an optimizer step a hook makes elsewhere)",
        "train_epoch_open": "the epoch ended early (max_steps, should_stop) before its last batch",
        "real_validation": "not during Lightning's sanity check",
        "standalone_validation": "trainer.validate(), not validation inside fit",
    },
)
