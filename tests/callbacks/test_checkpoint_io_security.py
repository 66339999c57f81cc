"""AtomicCheckpointIO loads with ``weights_only=True`` unless ``weights_only=False`` is passed: a crafted checkpoint
whose unpickling would run code is refused, through ``trainer.fit(ckpt_path=...)`` and a direct ``load_checkpoint``,
and nothing from the file runs."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pytest
import torch
from lh_testing import load_options
from lightning.pytorch.demos.boring_classes import BoringModel

from lightning_hooks.callbacks import AtomicCheckpointIO


def _write_marker(path: str) -> str:
    """The harmless function a crafted checkpoint calls while it is unpickled: it creates ``path``."""
    Path(path).write_text("code from the checkpoint ran")
    return path


class _RunsCode:
    """Unpickling this object calls ``_write_marker(marker)``: code chosen by whoever wrote the file."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return _write_marker, (self.marker,)


@pytest.fixture
def crafted(make_trainer, tmp_path) -> tuple[Path, Path]:
    """A complete Lightning checkpoint (it would resume) with one extra entry that runs code when unpickled."""
    trainer = make_trainer(max_steps=1, limit_val_batches=0)
    trainer.fit(BoringModel())
    checkpoint = trainer._checkpoint_connector.dump_checkpoint()
    marker = tmp_path / "code-ran"
    checkpoint["payload"] = _RunsCode(marker)
    path = tmp_path / "crafted.ckpt"
    torch.save(checkpoint, path)
    assert not marker.exists()  # torch.save pickles it without calling it
    return path, marker


def _assert_refused_and_no_code_ran(load, marker: Path, match: str) -> None:
    """Call ``load()``; the file's code must not have run (checked first), and the load must have been refused."""
    try:
        load()
    except pickle.UnpicklingError as err:
        error: pickle.UnpicklingError | None = err
    else:
        error = None
    assert not marker.exists(), "the crafted object was unpickled: code from the checkpoint file ran"
    assert error is not None, "the crafted checkpoint was loaded instead of refused"
    assert re.search(match, str(error), re.DOTALL), str(error)


_REFUSED = (r"AtomicCheckpointIO\.load_checkpoint: '.*crafted\.ckpt' holds pickled objects that weights_only=True "
            r"refuses")


@pytest.mark.parametrize("weights_only", ["default", None], ids=["default", "None"])
def test_fit_from_a_crafted_checkpoint_is_refused_and_runs_no_code(make_trainer, crafted, weights_only):
    path, marker = crafted
    trainer = make_trainer(max_steps=2, limit_val_batches=0, plugins=[AtomicCheckpointIO()])
    kwargs = {} if weights_only == "default" else load_options(weights_only)  # Lightning < 2.6: no such argument
    _assert_refused_and_no_code_ran(lambda: trainer.fit(BoringModel(), ckpt_path=path, **kwargs), marker, _REFUSED)
    assert trainer.global_step == 0


@pytest.mark.parametrize("weights_only", ["default", None, True], ids=["default", "None", "True"])
def test_load_checkpoint_of_a_crafted_file_is_refused_and_runs_no_code(crafted, weights_only):
    path, marker = crafted
    kwargs = {} if weights_only == "default" else {"weights_only": weights_only}
    load = lambda: AtomicCheckpointIO().load_checkpoint(path, **kwargs)
    _assert_refused_and_no_code_ran(load, marker, _REFUSED + r".*_write_marker.*weights_only=False\)")


def test_weights_only_false_by_name_loads_the_trusted_file(crafted):
    path, marker = crafted
    checkpoint = AtomicCheckpointIO().load_checkpoint(path, weights_only=False)
    assert checkpoint["payload"] == str(marker) and marker.exists()  # the user said they trust it
