"""AtomicCheckpointIO: round trips compared with plain torch.save, and injected write failures."""

import errno
import os

import fsspec
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.demos.boring_classes import BoringModel

from lightning_hooks.callbacks import AtomicCheckpointIO


def _assert_same(a, b):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _assert_same(a[k], b[k])
    elif isinstance(a, torch.Tensor):
        assert torch.equal(a, b)
    else:
        assert a == b


def test_roundtrip_with_trainer_and_model_checkpoint(make_trainer, tmp_path):
    ckpt_cb = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True, save_top_k=-1)
    model = BoringModel()
    trainer = make_trainer(max_epochs=2, limit_train_batches=2, limit_val_batches=1, enable_checkpointing=True, callbacks=[ckpt_cb], plugins=[AtomicCheckpointIO()])
    trainer.fit(model)
    names = sorted(os.listdir(tmp_path / "ckpt"))
    assert names == ["epoch=0-step=2.ckpt", "epoch=1-step=4.ckpt", "last.ckpt"]  # no temp files left
    last = torch.load(tmp_path / "ckpt" / "last.ckpt", weights_only=True)
    assert last["global_step"] == 4
    _assert_same(last["state_dict"], {k: v for k, v in model.state_dict().items()})

    # same bytes-level content as a plain torch.save of the same checkpoint
    dumped = trainer._checkpoint_connector.dump_checkpoint()
    AtomicCheckpointIO().save_checkpoint(dumped, tmp_path / "atomic.ckpt")
    torch.save(dumped, tmp_path / "plain.ckpt")
    _assert_same(torch.load(tmp_path / "atomic.ckpt", weights_only=True), torch.load(tmp_path / "plain.ckpt", weights_only=True))

    # resume through the plugin's (inherited) loader
    resumed = make_trainer(max_epochs=3, limit_train_batches=2, limit_val_batches=1, plugins=[AtomicCheckpointIO()])
    resumed.fit(BoringModel(), ckpt_path=tmp_path / "ckpt" / "last.ckpt")
    assert resumed.global_step == 6


@pytest.fixture
def previous(tmp_path):
    """A directory holding a valid previous checkpoint ``model.ckpt``."""
    d = tmp_path / "dir"
    d.mkdir()
    path = d / "model.ckpt"
    torch.save({"version": 1, "w": torch.arange(10.0)}, path)
    return path, path.read_bytes()


def _assert_previous_intact(previous):
    path, content = previous
    assert path.read_bytes() == content
    assert os.listdir(path.parent) == [path.name]  # no temp file left behind
    assert torch.load(path, weights_only=True)["version"] == 1


def test_failure_during_write_keeps_previous(previous, monkeypatch):
    real_save = torch.save

    def partial_save(obj, f, *args, **kwargs):  # f: the temporary file, open for writing
        f.write(b"PK\x03\x04 truncated")
        raise RuntimeError("disk full (injected)")

    monkeypatch.setattr(torch, "save", partial_save)
    with pytest.raises(RuntimeError, match="injected"):
        AtomicCheckpointIO().save_checkpoint({"version": 2, "w": torch.zeros(10)}, previous[0])
    monkeypatch.setattr(torch, "save", real_save)
    _assert_previous_intact(previous)


def test_unpicklable_object_keeps_previous(previous):
    with pytest.raises(Exception, match="pickle|Can't"):
        AtomicCheckpointIO().save_checkpoint({"version": 2, "fn": lambda: 0}, previous[0])
    _assert_previous_intact(previous)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root can write to read-only directories")
def test_read_only_directory_keeps_previous(previous):
    path = previous[0]
    os.chmod(path.parent, 0o555)
    try:
        with pytest.raises(PermissionError, match="AtomicCheckpointIO: cannot create a file in"):
            AtomicCheckpointIO().save_checkpoint({"version": 2}, path)
    finally:
        os.chmod(path.parent, 0o755)
    _assert_previous_intact(previous)


def test_unwritable_directory_error_keeps_previous(previous, monkeypatch):
    """Runs as root too: the OS refusal is simulated where the temp file is created."""
    real_open = os.open

    def refusing_open(p, flags, *args, **kwargs):
        if flags & os.O_CREAT and os.path.dirname(os.fspath(p)) == str(previous[0].parent):
            raise PermissionError(errno.EACCES, "Permission denied", p)
        return real_open(p, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing_open)
    with pytest.raises(PermissionError, match=r"AtomicCheckpointIO: cannot create a file in .*make the directory writable"):
        AtomicCheckpointIO().save_checkpoint({"version": 2}, previous[0])
    monkeypatch.setattr(os, "open", real_open)
    _assert_previous_intact(previous)


def test_parent_is_a_file_is_a_clear_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(OSError, match="AtomicCheckpointIO: cannot create a file in"):
        AtomicCheckpointIO().save_checkpoint({"a": 1}, tmp_path / "file" / "model.ckpt")


def test_storage_options_rejected(tmp_path):
    with pytest.raises(TypeError, match="AtomicCheckpointIO: `storage_options`"):
        AtomicCheckpointIO().save_checkpoint({}, tmp_path / "x.ckpt", storage_options={"a": 1})


def test_non_local_paths_use_fsspec():
    AtomicCheckpointIO().save_checkpoint({"w": torch.ones(3)}, "memory://bucket/x.ckpt")
    with fsspec.open("memory://bucket/x.ckpt", "rb") as f:
        assert torch.equal(torch.load(f, weights_only=True)["w"], torch.ones(3))


def test_overwrite_replaces_content_and_leaves_no_extra_files(previous):
    io = AtomicCheckpointIO()
    for version in (2, 3):
        io.save_checkpoint({"version": version, "w": torch.full((10,), float(version))}, previous[0])
    io.teardown()  # waits for the background deletion of the previous file's extra link
    assert os.listdir(previous[0].parent) == ["model.ckpt"]
    loaded = torch.load(previous[0], weights_only=True)
    assert loaded["version"] == 3 and torch.equal(loaded["w"], torch.full((10,), 3.0))


def test_file_url_is_written_to_its_local_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a path mistaken for relative would land under ./file:/
    target = tmp_path / "dir" / "x.ckpt"
    AtomicCheckpointIO().save_checkpoint({"w": torch.ones(3)}, f"file://{target}")
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == ["dir", "dir/x.ckpt"]
    assert torch.equal(torch.load(target, weights_only=True)["w"], torch.ones(3))


@pytest.mark.skipif(os.name != "posix", reason="directories are fsynced on POSIX only")
def test_file_is_fsynced_before_the_rename_and_directory_after(previous, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        st = os.fstat(fd)
        events.append(("fsync", (st.st_dev, st.st_ino)))
        real_fsync(fd)

    def replace(src, dst, *args, **kwargs):
        events.append(("replace", os.path.basename(dst)))
        real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    path = previous[0]
    AtomicCheckpointIO().save_checkpoint({"version": 2}, path)
    new_file, directory = os.stat(path), os.stat(path.parent)  # the new file keeps the temp file's inode
    assert events == [
        ("fsync", (new_file.st_dev, new_file.st_ino)),
        ("replace", "model.ckpt"),
        ("fsync", (directory.st_dev, directory.st_ino)),
    ]
