"""What fires each of iMIX's six mount points under Lightning (iMIX has no validation or checkpoint stage).

iMIX's engine runs ``before_train_iter``, the forward pass and ``after_train_iter`` back to back, and OptimizerHook
does backward and step inside ``after_train_iter``. When such a hook owns the step, ``before_train_iter`` fires inside the
wrapped ``training_step`` and ``after_train_iter`` right after Lightning's strategy returned from it; otherwise they fire from
the batch callbacks around Lightning's own optimisation. Like iMIX's ``finally: after_train()``, ``after_train``
also runs when training fails.
"""

from lightning_hooks.core.events import EventTable, Mount
from lightning_hooks.core.triggers import ON, ModuleStep, StrategyTrainingStep

#: iMIX's ``before_train_iter`` right before the forward, inside the wrapped ``training_step``
BEFORE_STEP = ModuleStep("training_step", at="before")
#: iMIX's ``after_train_iter`` (backward, step) once the step returned, outside a DDP wrapper's forward
AFTER_STEP = StrategyTrainingStep()

EVENTS = EventTable(
    "imix",
    [
        Mount(ON["on_train_start"], "before_train"),
        Mount(ON["on_train_epoch_start"], "before_train_epoch", when="by_epoch"),
        Mount(ON["on_train_batch_start"], "before_train_iter", when="lightning_steps"),
        Mount(BEFORE_STEP, "before_train_iter", when="hooks_step"),
        Mount(AFTER_STEP, "after_train_iter", when="hooks_step"),
        Mount(ON["on_train_batch_end"], "after_train_iter", when="lightning_steps"),
        Mount(ON["on_train_epoch_end"], "after_train_epoch", when="by_epoch"),
        Mount(ON["on_train_end"], "after_train"),
        Mount(ON["on_exception"], "after_train", when="train_running"),
    ],
    conditions={
        "by_epoch": "`by_epoch=True` (iMIX's by-iteration engine has no epochs)",
        "lightning_steps": "no hook owns the optimizer step (Lightning's automatic optimisation)",
        "hooks_step": "a hook owns the optimizer step (OptimizerHook, Fp16OptimizerHook): manual optimisation",
        "train_running": "`before_train` has run and `after_train` has not",
    },
)
