"""A file given as a checkpoint that is not one is a :class:`CheckpointFileError` of ours naming the file and what is
wrong with it (empty, another format, cut short, not there), torch's error as its cause and without torch's advice
to load with ``weights_only=False`` (wrong for a file that is no checkpoint at all): read by our loader, checked
before a library's loader, or recorded on the error of a fit given ``ckpt_path`` (Lightning's loader)."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from lightning_hooks import adapt
from lightning_hooks.core.checkpoint_files import check_checkpoint_file, checkpoint_error, load_checkpoint_file
from lightning_hooks.core.errors import CheckpointFileError


def _files(folder: Path) -> dict[str, tuple[Path, str]]:
    good = folder / "good.pth"
    torch.save({"state_dict": {"w": torch.randn(1000)}}, good)
    contents = {
        "truncated": (good.read_bytes()[: os.path.getsize(good) // 2], "is truncated"),
        "random": (bytes(range(7, 250)) * 8, "is not a PyTorch checkpoint (it starts with bytes b'\\x07\\x08"),
        "empty": (b"", "is empty"),
    }
    out = {}
    for kind, (content, problem) in contents.items():
        (folder / f"{kind}.pth").write_bytes(content)
        out[kind] = (folder / f"{kind}.pth", problem)
    return out


@pytest.mark.parametrize("kind", ["truncated", "random", "empty"])
def test_check_checkpoint_file_names_the_file_and_what_is_wrong(tmp_path, kind):
    path, problem = _files(tmp_path)[kind]
    with pytest.raises(CheckpointFileError) as raised:
        check_checkpoint_file(path, owner="--resume-from")
    assert str(raised.value).startswith(f"--resume-from: {str(path)!r} {problem}")
    assert "weights_only" not in str(raised.value)


def test_check_checkpoint_file_passes_a_checkpoint_and_a_url_and_names_a_missing_file(tmp_path):
    _files(tmp_path)
    check_checkpoint_file(tmp_path / "good.pth", owner="load_from")
    check_checkpoint_file("open-mmlab://resnet50_caffe", owner="load_from")
    with pytest.raises(CheckpointFileError, match=r"load_from: '.*nothere.pth' does not exist\. Check the path"):
        check_checkpoint_file(tmp_path / "nothere.pth", owner="load_from")


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_check_checkpoint_file_tells_torchs_legacy_format_from_another_pickle(tmp_path, protocol):
    # torch.save's legacy format is a pickle that starts with torch's magic number; a plain pickle is no checkpoint
    legacy, plain = tmp_path / "legacy.pth", tmp_path / "plain.pkl"
    torch.save({"w": torch.ones(3)}, legacy, _use_new_zipfile_serialization=False, pickle_protocol=protocol)
    plain.write_bytes(pickle.dumps({"w": [1.0, 1.0, 1.0]}, protocol=protocol))
    check_checkpoint_file(legacy, owner="runner.resume")
    assert torch.load(legacy, weights_only=False)["w"].sum() == 3  # what passes loads (a file this test wrote)
    with pytest.raises(CheckpointFileError, match=r"runner\.resume: '.*plain\.pkl' \(\d+ bytes\) is truncated or "
                       r"corrupt and cannot be read as a PyTorch checkpoint \(a pickle without torch\.save's magic"):  # fmt: skip
        check_checkpoint_file(plain, owner="runner.resume")
    with pytest.raises(Exception, match="magic number"):
        torch.load(plain, weights_only=False)  # torch cannot read it either


def test_load_checkpoint_file_keeps_torchs_error_as_the_cause_without_its_advice(tmp_path):
    garbage = tmp_path / "garbage.pth"
    garbage.write_bytes(b"\x80\x02garbage" * 4)  # a pickle header, then nothing torch can read
    with pytest.raises(CheckpointFileError) as raised:
        load_checkpoint_file(garbage, owner="runner.load_checkpoint")
    message = str(raised.value)
    assert message.startswith(f"runner.load_checkpoint: {str(garbage)!r} (36 bytes) is truncated or corrupt")
    assert "(UnpicklingError: Unsupported operand 103)" in message and "weights_only" not in message
    assert isinstance(raised.value.__cause__, pickle.UnpicklingError)
    assert "weights_only" in str(raised.value.__cause__)  # torch's own message, kept as the cause
    assert isinstance(raised.value, ValueError)  # what callers caught before


class Regression(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


@pytest.mark.parametrize("kind", ["truncated", "random", "empty"])
def test_a_fit_given_a_ckpt_path_that_is_no_checkpoint_records_our_error(tmp_path, kind):
    from mmengine.hooks import EMAHook

    path, problem = _files(tmp_path)[kind]
    data = DataLoader(TensorDataset(torch.randn(8, 4), torch.randn(8, 1)), batch_size=4)
    trainer = pl.Trainer(max_epochs=1, callbacks=adapt([EMAHook()], work_dir=str(tmp_path / "work")),
                         default_root_dir=tmp_path, logger=False, enable_progress_bar=False)  # fmt: skip
    with pytest.raises(BaseException) as raised:  # Lightning's loader: torch's error, with our note
        trainer.fit(Regression(), data, ckpt_path=str(path))
    ours = checkpoint_error(raised.value)
    assert isinstance(ours, CheckpointFileError) and ours.__cause__ is raised.value
    assert str(ours).startswith(f"the checkpoint given as ckpt_path, {str(path)!r}, {problem}")
    assert "weights_only" not in str(ours)


def test_checkpoint_error_finds_ours_in_the_chain_and_nothing_else():
    ours = CheckpointFileError("x")
    try:
        try:
            raise ours
        except CheckpointFileError as err:
            raise RuntimeError("wrapped") from err
    except RuntimeError as wrapped:
        assert checkpoint_error(wrapped) is ours
    assert checkpoint_error(RuntimeError("unrelated")) is None
