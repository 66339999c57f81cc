"""A fit with nothing left to train (resumed from the checkpoint of a finished run): Classy's ``LocalTrainer`` still
calls the ``on_start`` and ``on_end`` hooks around its empty phase loop, while Lightning skips its fit loop; the
adapter's translation against Classy's real ``ClassificationTask`` + ``LocalTrainer``."""

from __future__ import annotations

import pytest
import real_torchvision
from classy_real import reference
from classy_testkit import lightning_run

pytestmark = pytest.mark.skipif(not real_torchvision.available(), reason="run `bash scripts/setup.sh test` (real torchvision)")


def _spec(folder, checkpoint=None) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    hooks = [{"name": "checkpoint", "checkpoint_folder": str(folder), "phase_types": ["train", "test"]}]
    lr = {"scheduler": {"name": "linear", "start_value": 0.1, "end_value": 0.01}, "interval": "epoch"}
    return {"epochs": 1, "lr": lr, "meters": {"accuracy": {"topk": [1]}}, "hooks": hooks, "checkpoint": checkpoint}


def test_resuming_a_finished_run_fires_on_start_and_on_end_as_classys_trainer(tmp_path):
    finished = tmp_path / "ref" / "model_phase-1_end.torch"  # the test phase of the one epoch ended: the run's end
    _, theirs = reference([_spec(tmp_path / "ref"), _spec(tmp_path / "ref2", checkpoint=str(finished))], tmp_path / "classy")
    ours = lightning_run(_spec(tmp_path / "pl"), tmp_path / "pl", ckpt_path=finished)

    assert theirs["phases"] == [] and theirs["start"] == theirs["end"] == (1, 0)  # Classy's empty phase loop
    assert (ours["phases"], ours["start"], ours["end"]) == (theirs["phases"], theirs["start"], theirs["end"])
