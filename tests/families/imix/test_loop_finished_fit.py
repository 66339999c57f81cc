"""A fit with nothing left to train (resumed from the checkpoint of a finished run): iMIX's engine still calls
``before_train`` and ``after_train`` around its empty epoch loop (``CommonEngine.train``), while Lightning skips its
fit loop; the adapter's translation against iMIX's own ``imixEngine``."""

from __future__ import annotations

from imix_reference import config, fit, recorder, train
from lightning.pytorch.callbacks import ModelCheckpoint


def test_resuming_a_finished_run_fires_the_empty_train_as_imix_engine(tmp_path):
    first = "TinyNet_TinyData_epoch0(6iters)_model.pth"
    train(config(tmp_path / "imix-1", total_epochs=1))
    engine = train(config(tmp_path / "imix-2", total_epochs=1, resume_from=str(tmp_path / "imix-1" / first)))
    last = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True)
    fit(config(tmp_path / "lightning-1", total_epochs=1), callbacks=[last], enable_checkpointing=True)
    organizer = fit(config(tmp_path / "lightning-2", total_epochs=1), ckpt_path=str(tmp_path / "ckpt" / "last.ckpt"))[0]

    ref, mine = recorder(engine._hooks), recorder(organizer.hooks)
    assert [event for event, *_ in ref.events] == ["before_train", "after_train"]  # iMIX runs its loop, empty
    assert (mine.events, mine.history) == (ref.events, ref.history)
