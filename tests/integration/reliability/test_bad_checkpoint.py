"""``trainer.fit(model, ckpt_path=...)`` with an adapter, Lightning's default checkpoint IO and a file that is no
checkpoint: the failure names the file and what is wrong with it."""

from __future__ import annotations

import os
import traceback
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from lightning_hooks import adapt


class Regression(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _hooks() -> list:
    from classy_vision.hooks import LossLrMeterLoggingHook
    from mmengine.hooks import EMAHook

    return [EMAHook(), LossLrMeterLoggingHook()]


def _fit(tmp_path: Path, ckpt: Path) -> BaseException:
    data = DataLoader(TensorDataset(torch.randn(8, 4), torch.randn(8, 1)), batch_size=4)
    trainer = pl.Trainer(max_epochs=1, callbacks=adapt(_hooks(), work_dir=str(tmp_path / "work")),
                         default_root_dir=tmp_path, logger=False, enable_progress_bar=False)  # fmt: skip
    with pytest.raises(BaseException) as raised:
        trainer.fit(Regression(), data, ckpt_path=str(ckpt))
    return raised.value


@pytest.mark.parametrize("content, problem", [
    ("truncated", "is truncated"), ("random", "is not a PyTorch checkpoint"), ("empty", "is empty"),
])  # fmt: skip
def test_reliability_unreadable_ckpt_path_is_named_with_what_is_wrong(tmp_path: Path, content: str, problem: str) -> None:
    good = tmp_path / "good.ckpt"
    torch.save({"state_dict": {"w": torch.randn(1000)}}, good)
    ckpt = tmp_path / "half_written.ckpt"
    if content == "truncated":
        ckpt.write_bytes(good.read_bytes()[: os.path.getsize(good) // 2])
    elif content == "random":
        ckpt.write_bytes(os.urandom(3000))
    else:
        ckpt.write_bytes(b"")
    err = _fit(tmp_path, ckpt)
    text = "".join(traceback.format_exception(err))
    assert f"{str(ckpt)!r}, {problem}" in text
    assert "weights_only=False" not in text


def test_reliability_readable_ckpt_path_gets_no_note(tmp_path: Path) -> None:
    ckpt = tmp_path / "foreign.ckpt"
    torch.save({"not": "a lightning checkpoint"}, ckpt)  # readable: Lightning's own error stands alone
    err = _fit(tmp_path, ckpt)
    assert not any("[lightning-hooks] the checkpoint given" in note for note in getattr(err, "__notes__", []))
