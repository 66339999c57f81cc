"""What fires each of mmcv 1.x's mount points under Lightning, in the order ``EpochBasedRunner`` and
``IterBasedRunner`` call them.

mmcv's runners call ``before_train_iter``, the model's ``train_step`` and ``after_train_iter`` back to back, and
``OptimizerHook`` does backward and step inside ``after_train_iter``. When such a hook owns the step,
``before_train_iter`` fires inside the wrapped ``training_step`` and ``after_train_iter`` right after Lightning's
strategy returned from it; otherwise they fire from the batch callbacks around Lightning's own optimisation.
``IterBasedRunner`` has no train epochs: it calls ``before_epoch`` / ``after_epoch`` once around the whole run and only
the iteration mount points of validation. Neither runner has a test loop (mmcv tests with separate scripts).
"""

from lightning_hooks.core.events import EventTable, Mount
from lightning_hooks.core.manual_step import step_conditions, step_rows
from lightning_hooks.core.triggers import LAST_TRAIN_BATCH, ON

EVENTS = EventTable(
    "mmcv",
    [
        Mount(ON["on_fit_start"], "before_run"),
        Mount(ON["on_train_start"], "before_epoch", when="iter_based"),
        Mount(ON["on_train_epoch_start"], "before_train_epoch", when="epoch_based"),
        *step_rows("before_train_iter", "after_train_iter"),
        Mount(LAST_TRAIN_BATCH, "after_train_epoch", when="epoch_based"),
        Mount(ON["on_train_epoch_end"], "after_train_epoch", when="epoch_cut_short"),
        Mount(ON["on_validation_epoch_start"], "before_val_epoch", when="epoch_validation"),
        Mount(ON["on_validation_batch_start"], "before_val_iter", when="real_validation"),
        Mount(ON["on_validation_batch_end"], "after_val_iter", when="real_validation"),
        Mount(ON["on_validation_epoch_end"], "after_val_epoch", when="epoch_validation"),
        Mount(ON["on_train_end"], "after_epoch", when="iter_based"),
        Mount(ON["on_train_end"], "after_run"),
    ],
    conditions={
        "iter_based": "`MMCVAdapter(runner='IterBasedRunner')`: once around the whole run, as that runner",
        "epoch_based": "`EpochBasedRunner` (the default)",
        "epoch_cut_short": "`EpochBasedRunner`, an epoch that ended before its last batch (`max_steps`, `should_stop`)",
        **step_conditions("`OptimizerHook` and its subclasses"),
        "real_validation": "not during Lightning's sanity check (mmcv's `workflow` `('val', 1)`)",
        "epoch_validation": "`EpochBasedRunner`, not during Lightning's sanity check",
    },
)
