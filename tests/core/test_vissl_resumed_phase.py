"""The epoch a fit resumes into from a Lightning checkpoint written inside it (the user's
``ModelCheckpoint(every_n_train_steps)``), under ``ClassyAdapter`` with VISSL's hooks: Lightning 2.6 starts it without
``on_train_epoch_start``, and the core's deferred train iterator (``LegacyHookAdapter.start_skipped_train_epoch``)
reopens the phase and makes its iterator where VISSL's trainer makes one (``recreate_data_iterator``: the sampler's
epoch set to the phase's index first), before the first batch is drawn.

VISSL lives in ``.venv/vissl-site`` (real_torchvision.py says why): one subprocess runs both fits with VISSL's own
``CheckNanLossHook`` (which makes the adapter host VISSL's trainer and does nothing on a finite loss)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import real_torchvision
import torch
from torch.utils.data import DistributedSampler

pytestmark = pytest.mark.skipif(not real_torchvision.available(), reason="run `bash scripts/setup.sh test` (VISSL)")

#: 16 samples in batches of 4; a test phase after each train phase: train phases are VISSL's phases 0, 2 and 4
SAMPLES, BATCH, EPOCHS = 16, 4, 3


def _phase_order(phase_idx: int) -> list[int]:
    """The sample ids VISSL's trainer reads in phase ``phase_idx``: its sampler at that epoch (test phases counted)."""
    from classy_data import DictData

    sampler = DistributedSampler(DictData(SAMPLES), num_replicas=1, rank=0, seed=0)
    sampler.set_epoch(phase_idx)
    return [100 + i for i in sampler]


# ------------------------------------------------------------------------------------- run in the subprocess
def child_main(out: str) -> None:
    """Fit 3 epochs, writing a checkpoint after step 6 (train phase 2's second batch), then resume from it; for each
    fit, every train iterator's sampler epoch when it was made and the sample ids each train phase read."""
    import lightning.pytorch as pl
    from classy_data import DictData
    from classy_testkit import Net, loader, make_trainer
    from classy_vision.hooks import ClassyHook
    from torch.utils.data import DataLoader
    from vissl.hooks import CheckNanLossHook

    from lightning_hooks import ClassyAdapter

    torch.set_num_threads(1)
    root, seen = Path(out), []

    class Loader(DataLoader):
        def __iter__(self) -> Any:
            seen.append(("iterator", self.sampler.epoch))
            return super().__iter__()

    class Ids(ClassyHook):
        on_start = on_phase_start = on_phase_end = on_end = on_backward = on_update = ClassyHook._noop

        def on_step(self, task: Any) -> None:
            if task.train:
                seen.append((task.phase_idx, task.last_batch.sample["id"].tolist()))

    def fit(folder: Path, callbacks: list[Any], ckpt_path: Any = None) -> list[Any]:
        seen.clear()
        data = DictData(SAMPLES)
        train = Loader(data, batch_size=BATCH, sampler=DistributedSampler(data, num_replicas=1, rank=0, seed=0))
        adapter = ClassyAdapter([CheckNanLossHook(), Ids()])
        trainer = make_trainer(folder, [adapter, *callbacks], max_epochs=EPOCHS, limit_val_batches=1,
                               enable_checkpointing=True, use_distributed_sampler=False)  # fmt: skip  # Trainer kwargs
        trainer.fit(Net(), train, loader(8, seed=1), ckpt_path=ckpt_path)
        return list(seen)

    every = pl.callbacks.ModelCheckpoint(dirpath=root / "ckpt", every_n_train_steps=6, save_top_k=-1,
                                         save_on_train_epoch_end=False)  # fmt: skip
    fresh = fit(root / "fresh", [every])
    [checkpoint] = (root / "ckpt").glob("*step=6.ckpt")
    resumed = fit(root / "resumed", [], ckpt_path=checkpoint)
    torch.save({"fresh": fresh, "resumed": resumed}, root / "results.pt")


# ------------------------------------------------------------------------------------------- the test
def test_a_phase_resumed_inside_it_from_a_lightning_checkpoint_reads_vissls_order_for_that_phase(tmp_path):
    """The uninterrupted fit reads phases 0, 2 and 4 in VISSL's orders; resumed after train phase 2's second batch,
    that phase's iterator is made with the sampler at the phase's index (not Lightning's epoch 1, nor the next phase's
    3), before its first batch (Lightning restarts the loader: its last 2 batches are the order's first 2), then phase
    4's at 4."""
    runs = real_torchvision.run_child("test_vissl_resumed_phase", tmp_path, timeout=300, folder=Path(__file__).parent)

    def batches(phase_idx: int, count: int = SAMPLES // BATCH) -> list[Any]:
        order = _phase_order(phase_idx)
        return [(phase_idx, order[i : i + BATCH]) for i in range(0, count * BATCH, BATCH)]

    assert runs["fresh"] == [("iterator", 0), *batches(0), ("iterator", 2), *batches(2), ("iterator", 4), *batches(4)]
    assert runs["resumed"] == [("iterator", 2), *batches(2, count=2), ("iterator", 4), *batches(4)]
