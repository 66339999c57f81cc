"""What fires each of MMEngine's 22 mount points under Lightning, in MMEngine's order."""

from lightning_hooks.core.events import EventTable, Mount
from lightning_hooks.core.triggers import LAST_TRAIN_BATCH, ON, ModuleLoadCheckpoint

_ITER = ("batch_idx", "data_batch")
_ITER_OUT = ("batch_idx", "data_batch", "outputs")

#: Fired after the module's own ``on_load_checkpoint``, before Lightning loads the weights (hooks rewrite them first).
LOAD_CHECKPOINT = ModuleLoadCheckpoint()

EVENTS = EventTable(
    "mmengine",
    [
        Mount(ON["setup"], "before_run"),
        Mount(LOAD_CHECKPOINT, "after_load_checkpoint", ("checkpoint",)),
        Mount(ON["on_train_start"], "before_train"),
        Mount(ON["on_train_epoch_start"], "before_train_epoch"),
        Mount(ON["on_train_batch_start"], "before_train_iter", _ITER),
        Mount(ON["on_train_batch_end"], "after_train_iter", _ITER_OUT),
        Mount(LAST_TRAIN_BATCH, "after_train_epoch"),
        Mount(ON["on_train_epoch_end"], "after_train_epoch", when="train_epoch_open"),
        Mount(ON["on_validation_start"], "before_val", when="real_validation"),
        Mount(ON["on_validation_epoch_start"], "before_val_epoch", when="real_validation"),
        Mount(ON["on_validation_batch_start"], "before_val_iter", _ITER, when="real_validation"),
        Mount(ON["on_validation_batch_end"], "after_val_iter", _ITER_OUT, when="real_validation"),
        Mount(ON["on_validation_end"], "after_val_epoch", ("metrics",), when="real_validation"),
        Mount(ON["on_validation_end"], "after_val", when="real_validation"),
        Mount(ON["on_save_checkpoint"], "before_save_checkpoint", ("checkpoint",), when="writes_checkpoint"),
        Mount(ON["on_train_end"], "after_train"),
        Mount(ON["on_test_start"], "before_test"),
        Mount(ON["on_test_epoch_start"], "before_test_epoch"),
        Mount(ON["on_test_batch_start"], "before_test_iter", _ITER),
        Mount(ON["on_test_batch_end"], "after_test_iter", _ITER_OUT),
        Mount(ON["on_test_end"], "after_test_epoch", ("metrics",)),
        Mount(ON["on_test_end"], "after_test"),
        Mount(ON["teardown"], "after_run"),
        Mount(ON["on_exception"], "on_exception", ("exception",)),
    ],
    conditions={
        "real_validation": "not during Lightning's sanity check",
        "train_epoch_open": "the epoch ended early (max_steps, should_stop) before its last batch",
        "writes_checkpoint": "on global rank 0, which writes the file (`Runner.save_checkpoint` is master-only)",
    },
)
