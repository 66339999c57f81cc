"""What fires each of iMIX's six mount points under Lightning (iMIX has no validation or checkpoint stage).

iMIX's engine runs ``before_train_iter``, the forward pass and ``after_train_iter`` back to back, and OptimizerHook
does backward and step inside ``after_train_iter``. When such a hook owns the step, ``before_train_iter`` fires inside the
wrapped ``training_step`` and ``after_train_iter`` right after Lightning's strategy returned from it; otherwise they fire from
the batch callbacks around Lightning's own optimisation. Like iMIX's ``finally: after_train()``, ``after_train``
also runs when training fails.
"""

from lightning_hooks.core.events import EventTable, Mount
from lightning_hooks.core.manual_step import step_conditions, step_rows
from lightning_hooks.core.triggers import ON

EVENTS = EventTable(
    "imix",
    [
        Mount(ON["on_train_start"], "before_train"),
        Mount(ON["on_train_epoch_start"], "before_train_epoch", when="by_epoch"),
        *step_rows("before_train_iter", "after_train_iter"),
        Mount(ON["on_train_epoch_end"], "after_train_epoch", when="by_epoch"),
        Mount(ON["on_train_end"], "after_train"),
        Mount(ON["on_exception"], "after_train", when="train_running"),
    ],
    conditions={
        "by_epoch": "`by_epoch=True` (iMIX's by-iteration engine has no epochs)",
        **step_conditions("OptimizerHook, Fp16OptimizerHook"),
        "train_running": "`before_train` has run and `after_train` has not",
    },
)
