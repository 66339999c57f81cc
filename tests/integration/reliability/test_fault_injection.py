"""Fault-injection tier: a full disk, ``kill -9`` during each family's checkpoint write, an exception in every mount
point of every family, a corrupt file in every load path. Nothing already written may be lost or corrupted, and no
half-written file may be left under a final name (except where the upstream library writes in place: asserted as such).
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from reliability_kit import fit
from reliability_resume_run import Net, loader

from lightning_hooks import ClassyAdapter, IMIXAdapter, MMEngineAdapter
from lightning_hooks.callbacks import AtomicCheckpointIO
from lh_testing import DDP_LAUNCH_VARIABLES, subprocess_env

ROOT = Path(__file__).resolve().parents[3]
HERE = ROOT / "tests" / "helpers"  # the scripts the tests run


# ------------------------------------------------------------------------------------------------- disk full
@pytest.fixture
def full_disk(tmp_path, monkeypatch):
    """``(folder, fill)``: a folder on a small tmpfs when this process may mount one (root), else a plain folder
    whose writes through ``AtomicCheckpointIO`` get ENOSPC once ``fill()`` was called (an injected full disk)."""
    folder = tmp_path / "disk"
    folder.mkdir()
    mounted = os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(folder)], capture_output=True
    ).returncode == 0  # fmt: skip
    if mounted:

        def fill() -> None:
            try:
                with open(folder / "filler", "wb", buffering=0) as f:
                    while True:
                        f.write(b"\0" * 4096)
            except OSError as err:
                assert err.errno == errno.ENOSPC

        yield folder, fill
        subprocess.run(["umount", str(folder)], check=True)
        return
    from lightning_hooks.callbacks import checkpoint_io

    full = []

    class _FullFile(io.FileIO):
        def write(self, data: Any) -> int:
            if full:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return super().write(data)

    monkeypatch.setattr(checkpoint_io, "open", lambda path, mode: _FullFile(path, mode), raising=False)
    yield folder, lambda: full.append(True)


def _no_temp_files(folder: Path) -> None:
    assert not [p for p in os.listdir(folder) if ".tmp-" in p or ".old-" in p], os.listdir(folder)


def test_fault_full_disk_atomic_checkpoint_io_says_so_and_keeps_the_previous_file(full_disk):
    folder, fill = full_disk
    io_ = AtomicCheckpointIO()
    io_.save_checkpoint({"w": torch.arange(1000.0)}, folder / "last.ckpt")
    fill()
    with pytest.raises(OSError, match=rf"AtomicCheckpointIO: could not write '{re.escape(str(folder))}/last\.ckpt': "
                                      r"no space left on device\. The temporary file was removed and any previous "
                                      r"'last\.ckpt' is unchanged") as err:  # fmt: skip
        io_.save_checkpoint({"w": torch.arange(2000.0)}, folder / "last.ckpt")
    assert err.value.errno == errno.ENOSPC
    torch.testing.assert_close(torch.load(folder / "last.ckpt", weights_only=True)["w"], torch.arange(1000.0))
    _no_temp_files(folder)


def test_fault_full_disk_mmengine_checkpoint_hook_with_the_default_io_keeps_earlier_files(tmp_path, full_disk):
    from mmengine.hooks import CheckpointHook

    folder, fill = full_disk
    adapter = MMEngineAdapter([CheckpointHook(interval=1)], work_dir=folder)

    class FillAfterEpoch0(pl.Callback):
        def on_train_epoch_start(self, trainer, pl_module):
            if trainer.current_epoch == 1:
                fill()

    with pytest.raises(OSError, match=r"could not write '.*epoch_2\.pth': no space left on device"):
        fit(tmp_path, [FillAfterEpoch0(), adapter], max_epochs=2)  # no plugins: Lightning's default IO
    assert torch.load(folder / "epoch_1.pth", weights_only=True)["meta"]["epoch"] == 1
    assert not (folder / "epoch_2.pth").exists()
    _no_temp_files(folder)


# -------------------------------------------------------------------------- kill -9 during a checkpoint write
def _killed_during_save(out: Path, family: str) -> None:
    env = subprocess_env(HERE)
    proc = subprocess.run([sys.executable, str(HERE / "reliability_kill_family_save.py"), str(out), family], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == -9, proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.mark.parametrize("family", ["mmengine", "classy", "imix"])
def test_fault_kill_9_during_each_familys_checkpoint_write(tmp_path, family):
    _killed_during_save(tmp_path, family)
    files = sorted(f for f in os.listdir(tmp_path) if (tmp_path / f).is_file())  # not MMEngine's log folder
    if family == "mmengine":  # runner.save_checkpoint writes atomically: the final names hold complete files
        written = [f for f in files if not f.startswith(".") and not f.endswith(".py")]  # not the dumped config
        assert written == ["epoch_1.pth", "last_checkpoint"]
        assert torch.load(tmp_path / "epoch_1.pth", weights_only=True)["meta"]["epoch"] == 1
        assert (tmp_path / "last_checkpoint").read_text().endswith("epoch_1.pth")
        assert [re.sub(r"-\w+$", "", f) for f in files if f.startswith(".")] == [".epoch_2.pth.tmp"]  # delete it
        return
    # Upstream: Classy's save_checkpoint and iMIX's Checkpointer open the final name with "wb" and write in place.
    # Earlier files are intact; the file being written is left truncated under its final name.
    earlier, partial = {
        "classy": ("model_phase-0_end.torch", "checkpoint.torch"),
        "imix": ("net_epoch0(6iters)_model.pth", "net_epoch1(12iters)_model.pth"),
    }[family]
    torch.load(tmp_path / earlier, weights_only=True)
    with pytest.raises(RuntimeError, match="failed finding central directory"):
        torch.load(tmp_path / partial, weights_only=True)


# ------------------------------------------------------------------- an exception in every mount point
class _Evaluated(Net):
    def test_step(self, batch, batch_idx):
        return self.validation_step(batch, batch_idx)


def _raising_hook(family: str, mount: str) -> Any:
    def boom(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError(f"boom in {mount}")

    if family == "mmengine":
        from mmengine.hooks import Hook

        return type("Boom", (Hook,), {mount: boom})()
    if family == "classy":
        from classy_vision.hooks import ClassyHook

        noop = {m: ClassyHook._noop for m in ("on_start", "on_phase_start", "on_step", "on_phase_end", "on_end")}
        return type("Boom", (ClassyHook,), {**noop, mount: boom})()
    from imix.engine.hooks import HookBase

    return type("Boom", (HookBase,), {mount: boom})()


def _mounts(adapter: type) -> list[tuple[str, str]]:
    # on_exception runs while another error propagates: its own errors only warn (tests/core)
    return [(adapter.family, m) for m in adapter.events.mount_points() if m != "on_exception"]


@pytest.mark.parametrize(("family", "mount"), [*_mounts(MMEngineAdapter), *_mounts(ClassyAdapter), *_mounts(IMIXAdapter)])
def test_fault_an_exception_in_every_mount_point_is_located_and_loses_no_checkpoint(tmp_path, family, mount):
    from lightning.pytorch.callbacks import ModelCheckpoint

    adapter = {"mmengine": MMEngineAdapter, "classy": ClassyAdapter, "imix": IMIXAdapter}[family]
    hook = _raising_hook(family, mount)
    ckpt_dir = tmp_path / "ckpt"

    def run() -> None:
        """fit (with validation and a checkpoint), test, validate, then resume: stops at the first failure."""
        callbacks = [adapter([hook]), ModelCheckpoint(dirpath=ckpt_dir, save_last=True)]
        trainer = fit(tmp_path, callbacks, model=_Evaluated(), enable_checkpointing=True,
                      plugins=[AtomicCheckpointIO()])  # fmt: skip
        trainer.test(trainer.lightning_module, loader(8, 1, False), verbose=False)
        trainer.validate(trainer.lightning_module, loader(8, 1, False), verbose=False)
        fit(tmp_path, [adapter([hook])], model=_Evaluated(), max_epochs=2, ckpt_path=ckpt_dir / "last.ckpt")

    with pytest.raises(RuntimeError, match=f"boom in {mount}") as err:
        run()
    notes = getattr(err.value, "__notes__", [])
    assert any(re.match(rf"\[lightning-hooks\] raised by {family} hook .*Boom in mount point '{mount}' ", n)
               for n in notes), notes  # fmt: skip
    if ckpt_dir.exists():  # every checkpoint written before the failure is complete
        _no_temp_files(ckpt_dir)
        for name in os.listdir(ckpt_dir):
            torch.load(ckpt_dir / name, weights_only=True)


# ----------------------------------------------------------------------------- a corrupt file in every load path
def _corrupt_files(folder: Path) -> dict[str, tuple[Path, str]]:
    """Truncated, random and empty files next to a good checkpoint, with the message each must give."""
    good = folder / "good.ckpt"
    torch.save({"state_dict": Net().state_dict(), "global_step": 0}, good)
    data = good.read_bytes()
    files = {
        "truncated": (data[: len(data) // 2], r"\(\d+ bytes\) is truncated or corrupt and cannot be read as a "
                                              r"PyTorch checkpoint"),
        "random": (os.urandom(4096).replace(b"PK", b"QK").lstrip(b"\x80") or b"x", r"is not a PyTorch checkpoint "
                                                                                     r"\(it starts with bytes"),
        "empty": (b"", r"is empty\. Pass the path of a file written by torch\.save"),
    }  # fmt: skip
    out = {}
    for kind, (content, message) in files.items():
        path = folder / f"{kind}.ckpt"
        path.write_bytes(content)
        out[kind] = (path, message)
    return out


def test_fault_corrupt_file_in_every_load_path_names_it(tmp_path):
    from mmengine.hooks import EMAHook

    adapter = MMEngineAdapter([EMAHook()])
    fit(tmp_path, [adapter])
    for path, message in _corrupt_files(tmp_path).values():
        before = path.read_bytes()
        with pytest.raises(ValueError, match=rf"runner\.load_checkpoint: '{re.escape(str(path))}' {message}"):
            adapter.runner.load_checkpoint(str(path))
        owner = rf"AtomicCheckpointIO\.load_checkpoint: '{re.escape(str(path))}' {message}"
        with pytest.raises(ValueError, match=owner):  # trainer.fit(ckpt_path=...) with the plugin
            fit(tmp_path, [], max_epochs=2, ckpt_path=path, plugins=[AtomicCheckpointIO()])
        with pytest.raises(ValueError, match=owner):  # ... given as a callback
            fit(tmp_path, [AtomicCheckpointIO()], max_epochs=2, ckpt_path=path)
        assert path.read_bytes() == before  # nothing was written to it


# ------------------------------------------------------------- kill -9 of one rank during a checkpoint write
@pytest.mark.parametrize("strategy", ["ddp", "ddp_spawn"])
def test_fault_kill_9_of_rank_0_during_a_checkpoint_write_then_resume_on_two_ranks(tmp_path, strategy):
    """Rank 0 dies halfway through writing ``epoch_2.pth``; the files already written stay complete and the two
    ranks resume from ``epoch_1.pth`` to the end."""
    env = subprocess_env(HERE, drop=DDP_LAUNCH_VARIABLES)
    script = [sys.executable, str(HERE / "reliability_kill_ddp_save.py"), str(tmp_path), strategy]
    # rank 0 dies; under ddp the surviving rank waits in a collective forever, so the whole session is ended
    proc = subprocess.Popen([*script, "kill"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)  # fmt: skip
    try:
        output, _ = proc.communicate(timeout=240 if strategy == "ddp" else 300)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode != 0, output[-3000:]
    written = sorted(f for f in os.listdir(tmp_path) if (tmp_path / f).is_file() and not f.endswith(".py"))
    assert [f for f in written if not f.startswith(".")] == ["epoch_1.pth", "last_checkpoint"], output[-3000:]
    assert [re.sub(r"-\w+$", "", f) for f in written if f.startswith(".")] == [".epoch_2.pth.tmp"]
    assert torch.load(tmp_path / "epoch_1.pth", weights_only=True)["meta"]["epoch"] == 1
    assert (tmp_path / "last_checkpoint").read_text().endswith("epoch_1.pth")

    resumed = subprocess.run([*script, "resume"], env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    seen = json.loads((tmp_path / "resumed.json").read_text())
    assert seen == {"start": [1, 1, 2], "end": [3, 6]}  # 2 batches per rank and epoch
    assert torch.load(tmp_path / "epoch_3.pth", weights_only=True)["meta"]["epoch"] == 3
