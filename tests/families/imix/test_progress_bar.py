"""Lightning's default (rich) progress bar under an iMIX run bounded by ``max_steps`` alone reads the last epoch the
steps reach (README's iMIX snippet read ``Epoch 9/-2``), and Lightning's own text elsewhere."""

from __future__ import annotations

import pytest
from imix.engine.hooks import IterationTimerHook, OptimizerHook

from lightning_hooks import IMIXAdapter
from lightning_hooks.core.lightning_api import pl, rich_bar_works

pytestmark = pytest.mark.skipif(not rich_bar_works(), reason="Lightning's RichProgressBar needs a working rich")


class Descriptions(pl.Callback):
    """What the trainer's progress bar writes before each train epoch's bar."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_train_epoch_start(self, trainer, pl_module):
        self.seen.append(trainer.progress_bar_callback._get_train_description(trainer.current_epoch).strip())


@pytest.mark.parametrize(("hooks", "accumulation", "options", "expected"), [
    # 6 batches an epoch; 10 steps of 2 batches (the hook owns the step): 20 batches reach epoch 3
    ([OptimizerHook(), IterationTimerHook()], 2, dict(max_steps=10), ["Epoch 0/3", "Epoch 1/3", "Epoch 2/3", "Epoch 3/3"]),
    ([IterationTimerHook()], 1, dict(max_steps=7), ["Epoch 0/1", "Epoch 1/1"]),  # Lightning steps: 7 batches
    ([IterationTimerHook()], 1, dict(max_epochs=2), ["Epoch 0/1", "Epoch 1/1"]),  # Lightning's own description
])  # fmt: skip
def test_the_rich_bar_reads_the_epochs_the_steps_reach(module, loader, make_trainer, hooks, accumulation, options,
                                                       expected):  # fmt: skip
    record = Descriptions()
    adapter = IMIXAdapter(hooks, gradient_accumulation_steps=accumulation)
    trainer = make_trainer([adapter, record], enable_progress_bar=True, **{"max_epochs": None, **options})
    assert isinstance(trainer.progress_bar_callback, pl.callbacks.RichProgressBar)  # Lightning's default here
    trainer.fit(module, loader)
    assert record.seen == expected
    assert "_get_train_description" not in vars(trainer.progress_bar_callback)  # removed at teardown
