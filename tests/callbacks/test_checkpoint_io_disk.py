"""AtomicCheckpointIO on a real disk that fills part-way through a checkpoint (a small tmpfs, mounted as root)."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from lightning_hooks.callbacks import AtomicCheckpointIO

CKPT_BYTES = 1 << 20  # one float32 tensor of 1 MiB


def _mount(target: Path, size: int) -> bool:
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(target)],
                          capture_output=True).returncode == 0  # fmt: skip


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs with room for about 1.6 checkpoints."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if not _mount(disk, int(1.6 * CKPT_BYTES)):
        pytest.skip("mounting a tmpfs needs root and mount permission")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def test_disk_full_mid_write_raises_enospc_naming_the_file(small_disk: Path) -> None:
    io = AtomicCheckpointIO()
    path = small_disk / "last.ckpt"
    first = {"w": torch.ones(CKPT_BYTES // 4)}
    io.save_checkpoint(first, path)  # fits
    with pytest.raises(OSError) as raised:
        io.save_checkpoint({"w": torch.full((CKPT_BYTES // 4,), 2.0)}, path)  # fills the disk part-way through
    io.teardown()
    assert raised.value.errno == errno.ENOSPC
    assert f"could not write {str(path)!r}: no space left on device" in str(raised.value)
    assert sorted(p.name for p in small_disk.iterdir()) == ["last.ckpt"]  # the temporary file was removed
    assert torch.equal(torch.load(path, weights_only=True)["w"], first["w"])  # the previous file is intact
