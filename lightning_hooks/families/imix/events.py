"""What fires each of iMIX's six mount points under Lightning (iMIX has no validation or checkpoint stage)."""

from lightning_hooks.core.events import EventTable, Mount

EVENTS = EventTable(
    "imix",
    [
        Mount("on_train_start", "before_train"),
        Mount("on_train_epoch_start", "before_train_epoch"),
        Mount("on_train_batch_start", "before_train_iter"),
        Mount("on_train_batch_end", "after_train_iter"),
        Mount("on_train_epoch_end", "after_train_epoch"),
        Mount("on_train_end", "after_train"),
        Mount("on_exception", "on_exception", ("exception",)),
    ],
)
