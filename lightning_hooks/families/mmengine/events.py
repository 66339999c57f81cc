"""What fires each of MMEngine's 22 mount points under Lightning, in MMEngine's order."""

from lightning_hooks.core.events import EventTable, Mount

_ITER = ("batch_idx", "data_batch")
_ITER_OUT = ("batch_idx", "data_batch", "outputs")

#: Fired from ``on_train_batch_end`` of the epoch's last batch, after ``runner.iter`` counted it and before
#: Lightning validates: MMEngine ends the train epoch before its validation.
TRAIN_EPOCH_END = "on_train_batch_end (last batch)"

EVENTS = EventTable(
    "mmengine",
    [
        Mount("setup", "before_run"),
        Mount("LightningModule.on_load_checkpoint", "after_load_checkpoint", ("checkpoint",)),
        Mount("on_train_start", "before_train"),
        Mount("on_train_epoch_start", "before_train_epoch"),
        Mount("on_train_batch_start", "before_train_iter", _ITER),
        Mount("on_train_batch_end", "after_train_iter", _ITER_OUT),
        Mount(TRAIN_EPOCH_END, "after_train_epoch"),
        Mount("on_train_epoch_end", "after_train_epoch", when="train_epoch_open"),
        Mount("on_validation_start", "before_val", when="real_validation"),
        Mount("on_validation_epoch_start", "before_val_epoch", when="real_validation"),
        Mount("on_validation_batch_start", "before_val_iter", _ITER, when="real_validation"),
        Mount("on_validation_batch_end", "after_val_iter", _ITER_OUT, when="real_validation"),
        Mount("on_validation_end", "after_val_epoch", ("metrics",), when="real_validation"),
        Mount("on_validation_end", "after_val", when="real_validation"),
        Mount("on_save_checkpoint", "before_save_checkpoint", ("checkpoint",), when="writes_checkpoint"),
        Mount("on_train_end", "after_train"),
        Mount("on_test_start", "before_test"),
        Mount("on_test_epoch_start", "before_test_epoch"),
        Mount("on_test_batch_start", "before_test_iter", _ITER),
        Mount("on_test_batch_end", "after_test_iter", _ITER_OUT),
        Mount("on_test_end", "after_test_epoch", ("metrics",)),
        Mount("on_test_end", "after_test"),
        Mount("teardown", "after_run"),
        Mount("on_exception", "on_exception", ("exception",)),
    ],
    conditions={
        "real_validation": "not during Lightning's sanity check",
        "train_epoch_open": "the epoch ended early (max_steps, should_stop) before its last batch",
        "writes_checkpoint": "on global rank 0, which writes the file (`Runner.save_checkpoint` is master-only)",
    },
)
