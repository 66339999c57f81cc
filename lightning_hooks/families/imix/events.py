"""What fires each of iMIX's six mount points under Lightning (iMIX has no validation or checkpoint stage).

iMIX's engine runs ``before_train_iter``, the forward pass and ``after_train_iter`` back to back, and OptimizerHook
does backward and step inside ``after_train_iter``. When such a hook owns the step, the adapter wraps the
LightningModule's ``training_step`` and both iteration mount points fire from inside it; otherwise they fire from
the batch callbacks around Lightning's own optimisation. Like iMIX's ``finally: after_train()``, ``after_train``
also runs when training fails.
"""

from lightning_hooks.core.events import EventTable, Mount

EVENTS = EventTable(
    "imix",
    [
        Mount("on_train_start", "before_train"),
        Mount("on_train_epoch_start", "before_train_epoch", when="by_epoch"),
        Mount("on_train_batch_start", "before_train_iter", when="lightning_steps"),
        Mount("LightningModule.training_step:before_forward", "before_train_iter", when="hooks_step"),
        Mount("LightningModule.training_step:after_forward", "after_train_iter", when="hooks_step"),
        Mount("on_train_batch_end", "after_train_iter", when="lightning_steps"),
        Mount("on_train_epoch_end", "after_train_epoch", when="by_epoch"),
        Mount("on_train_end", "after_train"),
        Mount("on_exception", "after_train", when="training"),
    ],
    conditions={
        "by_epoch": "`by_epoch=True` (iMIX's by-iteration engine has no epochs)",
        "lightning_steps": "no hook owns the optimizer step (Lightning's automatic optimisation)",
        "hooks_step": "a hook owns the optimizer step (OptimizerHook, Fp16OptimizerHook): manual optimisation",
        "training": "`before_train` has run and `after_train` has not",
    },
)
