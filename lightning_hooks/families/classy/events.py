"""What fires each Classy Vision / VISSL mount point under Lightning.

Every train epoch is a train phase, every validation run (never the sanity check) and every ``trainer.test`` a test
phase. The train phase ends at its last batch, with the model still in train mode, before the test phase starts, as
in Classy. VISSL's mid-step mount points come from triggers the adapter installs in ``setup``: a forward hook on the
LightningModule (``on_forward``), a wrapper around the step methods (``on_loss_and_meter``) and a step post-hook on
the optimizer (``on_update``). ``LightningModule.forward`` fires only for the first forward inside a train,
validation or test step (never in the sanity check, never for forwards that hooks run themselves).
"""

from lightning_hooks.core.events import EventTable, Mount

#: Fired from the last train batch's ``on_train_batch_end``, after its ``on_step`` and Classy's phase-end sync
#: (losses averaged over ranks, meters synced): the train phase ends before the test phase starts.
TRAIN_PHASE_END = "on_train_batch_end (last batch)"

EVENTS = EventTable(
    "classy",
    [
        Mount("on_train_start", "on_start"),
        Mount("on_train_epoch_start", "on_phase_start"),
        Mount("LightningModule.forward", "on_forward"),
        Mount("LightningModule.training_step", "on_loss_and_meter"),
        Mount("on_after_backward", "on_backward"),
        Mount("Optimizer.step", "on_update", when="training"),
        Mount("on_train_batch_end", "on_step"),
        Mount(TRAIN_PHASE_END, "on_phase_end"),
        Mount("on_train_epoch_end", "on_phase_end", when="train_phase_open"),
        Mount("on_validation_start", "on_start", when="standalone_validation"),
        Mount("on_validation_epoch_start", "on_phase_start", when="real_validation"),
        Mount("LightningModule.validation_step", "on_loss_and_meter", when="real_validation"),
        Mount("on_validation_batch_end", "on_step", when="real_validation"),
        Mount("on_validation_epoch_end", "on_phase_end", when="real_validation"),
        Mount("on_validation_end", "on_end", when="standalone_validation"),
        Mount("on_train_end", "on_end"),
        Mount("on_test_start", "on_start"),
        Mount("on_test_epoch_start", "on_phase_start"),
        Mount("LightningModule.test_step", "on_loss_and_meter"),
        Mount("on_test_batch_end", "on_step"),
        Mount("on_test_epoch_end", "on_phase_end"),
        Mount("on_test_end", "on_end"),
        Mount("on_exception", "on_exception"),
    ],
    conditions={
        "training": "inside a training step (the optimizer stepped on this batch)",
        "train_phase_open": "the epoch ended early (max_steps, should_stop) before its last batch",
        "real_validation": "not during Lightning's sanity check",
        "standalone_validation": "trainer.validate(), not validation inside fit",
    },
)
