"""What fires each Classy Vision / VISSL mount point under Lightning.

Every train epoch is a train phase, every validation run (never the sanity check) and every ``trainer.test`` a test
phase. The train phase ends at its last batch, before the test phase starts, as in Classy.
"""

from lightning_hooks.core.events import EventTable, Mount

EVENTS = EventTable(
    "classy",
    [
        Mount("on_train_start", "on_start"),
        Mount("on_train_epoch_start", "on_phase_start"),
        Mount("on_train_batch_end", "on_step"),
        Mount("on_train_batch_end", "on_phase_end", when="phase_ends"),
        Mount("on_validation_epoch_start", "on_phase_start", when="real_validation"),
        Mount("on_validation_batch_end", "on_step", when="real_validation"),
        Mount("on_validation_epoch_end", "on_phase_end", when="real_validation"),
        Mount("on_train_end", "on_end"),
        Mount("on_test_start", "on_start"),
        Mount("on_test_epoch_start", "on_phase_start"),
        Mount("on_test_batch_end", "on_step"),
        Mount("on_test_epoch_end", "on_phase_end"),
        Mount("on_test_end", "on_end"),
        Mount("on_exception", "on_exception"),
    ],
    conditions={
        "phase_ends": "last train batch of the epoch (the train phase ends before the test phase)",
        "real_validation": "not during Lightning's sanity check",
    },
)
