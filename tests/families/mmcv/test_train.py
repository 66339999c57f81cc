"""``lightning-hooks train CONFIG.py`` for OpenMMLab 1.x configs (issue #25), differential against the library's own
``train_model`` run in-process as mmcls 0.25's ``tools/train.py`` runs it: the shipped ``resnet18_8xb16_cifar10.py``
as ``_base_`` of a small derived config (a narrow ResNet, 8 generated 32x32 images, 2 epochs, EvalHook each epoch).
Same losses per iteration, json log, text log's training lines, checkpoint files and final weights, bitwise on CPU."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from mmcv_testkit import RunStopped, stub_collect_env  # skips outside .venv-mmcv1
from mmcv_train_kit import (assert_auto_resumes_alike, assert_final_weights, assert_resumed_alike,
                            assert_same_checkpoint, json_log, listing, ours_then_reference, reference_logger,
                            shipped_cifar_resnet, text_log, tiny_resnet_cifar)  # fmt: skip  # names aligned under the import

mmcls = pytest.importorskip("mmcls", reason="mmcls 0.x lives in .venv-mmcv1")

# mmcv.cnn sets mmcv's own logger up when imported (mmcv 1.7's rfsearch: a StreamHandler on the sys.stderr of that
# moment), as importing the library does first thing in tools/train.py's process: here, at collection, not in the
# first test that imports the library, whose capsys stream is closed once it ends (the next run would log into it)
import mmcv.cnn  # noqa: E402, F401
from mmcv import Config  # noqa: E402

from lightning_hooks import train as dispatcher  # noqa: E402
from lightning_hooks.core.config_kind import MMENGINE, OPENMMLAB_1X, config_kind  # noqa: E402

SHIPPED = shipped_cifar_resnet()


@pytest.fixture
def config(tmp_path, monkeypatch):
    """A derived config of the shipped CIFAR ResNet: narrow (8 base channels), tiny data, 2 epochs, step LR."""
    stub_collect_env(monkeypatch)  # mmcv.ops may be imported, with stubbed ops, by other tests
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the small convolutions are slower on more threads of a shared machine
    yield tiny_resnet_cifar(tmp_path / "tiny_resnet_cifar.py")
    torch.set_num_threads(threads)


def reference(path: Path, work_dir: Path, timestamp: str, max_epochs: int | None = None,
              resume_from: Path | None = None) -> torch.nn.Module:  # fmt: skip  # arguments aligned under the call
    """mmcls 0.25's ``tools/train.py`` main for ``--seed 0`` on CPU, in-process: the real ``train_model`` and runner
    (``--cfg-options runner.max_epochs=...``, ``--resume-from ...``)."""
    from mmcls import __version__
    from mmcls.apis import set_random_seed, train_model
    from mmcls.datasets import build_dataset
    from mmcls.models import build_classifier
    from mmcls.utils import collect_env

    cfg = Config.fromfile(str(path))
    if max_epochs is not None:
        cfg.merge_from_dict({"runner.max_epochs": max_epochs})
    if resume_from is not None:
        cfg.resume_from = str(resume_from)
    cfg.work_dir = str(work_dir)
    cfg.gpu_ids = [0]
    os.makedirs(work_dir, exist_ok=True)
    cfg.dump(str(work_dir / path.name))
    logger = reference_logger("mmcls", work_dir / f"{timestamp}.log", cfg.log_level)  # get_root_logger in a fresh process
    env_info = "\n".join(f"{k}: {v}" for k, v in collect_env().items())
    dash_line = "-" * 60 + "\n"
    logger.info("Environment info:\n" + dash_line + env_info + "\n" + dash_line)
    logger.info("Distributed training: False")
    logger.info(f"Config:\n{cfg.pretty_text}")
    cfg.device = "cpu"
    logger.info("Set random seed to 0, deterministic: False")
    set_random_seed(0)
    cfg.seed = 0
    model = build_classifier(cfg.model)
    model.init_weights()
    datasets = [build_dataset(cfg.data.train)]
    meta = dict(env_info=env_info, seed=0, mmcls_version=__version__, config=cfg.pretty_text, CLASSES=datasets[0].CLASSES)
    train_model(model, datasets, cfg, validate=True, timestamp=timestamp, device="cpu", meta=meta)
    return model


def with_workers(config: Path, lines: str) -> Path:
    """A config derived from ``config`` whose loaders have 2 persistent workers (``workers_per_gpu=2``, mmcls's
    default ``persistent_workers``), then ``lines``."""
    path = config.with_name(f"{config.stem}_workers.py")
    path.write_text(f"_base_ = [{str(config)!r}]\ndata = dict(workers_per_gpu=2, persistent_workers=True)\n{lines}")
    return path


def ours(config: Path, *flags: str) -> Callable[[Path], None]:
    """``lightning-hooks train CONFIG --seed 0 --accelerator cpu FLAGS --work-dir WORK_DIR`` as a function of the
    work dir."""
    return lambda work_dir: dispatcher.main([str(config), "--work-dir", str(work_dir), "--seed", "0",
                                             "--accelerator", "cpu", *flags])  # fmt: skip  # arguments aligned under the call


def test_lightning_hooks_train_runs_an_mmcls_config_as_tools_train_py(config, tmp_path):
    torch.manual_seed(123)  # the seed comes from --seed, whatever the state before
    sides = ours_then_reference(tmp_path, ours(config), lambda work_dir, timestamp: reference(config, work_dir, timestamp))
    names = listing(sides.ref)
    assert listing(sides.ours) == names
    assert names == sorted([f"{sides.timestamp}.log", f"{sides.timestamp}.log.json", config.name, "epoch_1.pth",
                            "epoch_2.pth", "latest.pth"])  # fmt: skip  # the list under its call
    assert os.readlink(sides.ours / "latest.pth") == "epoch_2.pth"
    records = json_log(sides.ours)
    assert records == json_log(sides.ref)
    assert [r["mode"] for r in records[1:]] == ["train", "train", "val", "train", "train", "val"]
    assert text_log(sides.ours, "mmcls") == text_log(sides.ref, "mmcls")
    assert (sides.ours / config.name).read_text() == (sides.ref / config.name).read_text()
    for name in ("epoch_1.pth", "epoch_2.pth"):
        assert sorted(torch.load(sides.ref / name, weights_only=False)) == ["meta", "optimizer", "state_dict"]
        assert_same_checkpoint(sides.ours / name, sides.ref / name)
    assert_final_weights(sides.ours / "epoch_2.pth", sides.model)


def test_the_dispatcher_tells_a_1x_config_from_an_mmengine_config(config, tmp_path):
    assert config_kind(str(config)) == config_kind(str(SHIPPED)) == OPENMMLAB_1X
    derived = tmp_path / "only_base.py"  # no decisive key of its own: the _base_ files decide
    derived.write_text(f"_base_ = [{str(SHIPPED)!r}]\nmodel = dict(head=dict(num_classes=5))\n")
    assert config_kind(str(derived)) == OPENMMLAB_1X
    mmengine_cfg = tmp_path / "mmengine_style.py"
    mmengine_cfg.write_text("train_dataloader = dict(batch_size=2)\noptim_wrapper = dict(optimizer=dict(type='SGD'))\n"
                            "train_cfg = dict(by_epoch=True, max_epochs=1)\n")  # fmt: skip
    assert config_kind(str(mmengine_cfg)) == MMENGINE
    half_migrated = tmp_path / "half_migrated.py"  # a 2.0-only key decides: Runner.from_cfg ignores lr_config
    half_migrated.write_text(mmengine_cfg.read_text() + "lr_config = dict(policy='step', step=[1])\n")
    assert config_kind(str(half_migrated)) == MMENGINE
    assert "OpenMMLab 1.x tools/train.py" in dispatcher.usage()


def test_resume_from_goes_on_as_train_model_resumed(config, tmp_path):
    """mmcls's runner trains epoch 1; its own train_model resumed from epoch_1.pth (--resume-from) and ours go on
    alike: log records (the resumed meta first), epoch_2.pth, final weights. --auto-resume from a checkpoint our
    command wrote (latest.pth in its work dir) gives the same epoch 2. With DataLoader workers (``workers_per_gpu=2``,
    persistent, mmcls's default) and a hook that turns the train pipeline's random crop and flip off in
    ``before_train_epoch`` from epoch 2 on (``mmcv_user_hooks.SwitchOffAugmentation``, as mmdet 2.x's
    ``YOLOXModeSwitchHook`` turns mosaic off for the last epochs): the resumed epoch's workers fork the dataset as the
    hook left it, as ``EpochBasedRunner.train`` makes the loader's iterator after ``before_train_epoch``."""
    config = with_workers(config, "custom_imports = dict(imports=['mmcv_tiny_cifar', 'mmcv_user_hooks'])\n"
                                  "custom_hooks = [dict(type='SwitchOffAugmentation', epoch=1)]\n")  # fmt: skip  # the string under its call
    first = tmp_path / "first"
    reference(config, first, "20260101_000000", max_epochs=1)
    torch.manual_seed(123)
    sides = ours_then_reference(tmp_path, ours(config, "--resume-from", str(first / "epoch_1.pth")),
                                lambda work_dir, timestamp: reference(config, work_dir, timestamp,
                                                                      resume_from=first / "epoch_1.pth"))  # fmt: skip  # arguments aligned under the call
    assert listing(sides.ours) == listing(sides.ref)
    assert not (sides.ours / "epoch_1.pth").exists() and os.readlink(sides.ours / "latest.pth") == "epoch_2.pth"
    records = json_log(sides.ours)
    assert records == json_log(sides.ref)
    assert [(r["mode"], r["epoch"]) for r in records[1:]] == [("train", 2), ("train", 2), ("val", 2)]
    assert text_log(sides.ours, "mmcls") == text_log(sides.ref, "mmcls")
    assert_same_checkpoint(sides.ours / "epoch_2.pth", sides.ref / "epoch_2.pth")
    assert_final_weights(sides.ours / "epoch_2.pth", sides.model)
    # our command's epoch 1, then --auto-resume in its work dir
    mine = tmp_path / "mine"
    ours(config, "--cfg-options", "runner.max_epochs=1")(mine)
    assert_same_checkpoint(mine / "epoch_1.pth", first / "epoch_1.pth")
    ours(config, "--auto-resume")(mine)
    assert_same_checkpoint(mine / "epoch_2.pth", sides.ref / "epoch_2.pth")


def test_several_processes_need_lightnings_ddp_before_anything_starts(config, tmp_path, capsys):
    """(2 processes under Lightning's DDP: test_train_ddp.py.) Another strategy is refused before a process starts,
    in one line (no traceback)."""
    with pytest.raises(SystemExit) as exit_:
        dispatcher.main([str(config), "--work-dir", str(tmp_path / "w"), "--seed", "0", "--accelerator", "cpu",
                         "--devices", "2", "--strategy", "ddp_spawn"])  # fmt: skip
    err = capsys.readouterr().err
    assert exit_.value.code == 1 and "Traceback" not in err, err[-3000:]
    assert re.fullmatch(r"lightning-hooks train: error: --strategy 'ddp_spawn': an OpenMMLab 1.x config in 2 processes "
                        r"trains under Lightning's DDP .* pass --strategy ddp, or leave it out.\n",
                        err.splitlines(True)[-1])  # fmt: skip  # one pattern continued under its first half
    assert not (tmp_path / "w").exists()


def test_resume_from_a_mid_epoch_checkpoint_goes_on_as_train_model_resumed(config, tmp_path):
    """A checkpoint written inside epoch 1 (checkpoint_config by_epoch=False: the 3rd of its 4 iterations, the run
    stopped there by a hook; mmcv's
    EpochBasedRunner names it epoch_1.pth and records meta epoch 1, iter 2, before it counts that iteration):
    mmcls's own train_model resumed from it and ours go on alike, as mmcv's runner.resume does (from the end of epoch
    1, the iteration counter at 2): log records and lines (``resumed epoch 1, iter 2``), epoch_2.pth (weights,
    optimizer state, meta), final weights. --auto-resume from that work dir (latest.pth) goes on the same way."""
    mid = tmp_path / "tiny_resnet_cifar_mid.py"
    mid.write_text(f"_base_ = [{str(config)!r}]\ndata = dict(samples_per_gpu=2)\n"
                   "checkpoint_config = dict(interval=3, by_epoch=False)\n")  # fmt: skip  # the string under its call
    stopped = tmp_path / "stopped.py"  # the run stopped after that checkpoint, as if killed
    stopped.write_text(f"_base_ = [{str(mid)!r}]\n"
                       "custom_hooks = [dict(type='StopAfterIters', iters=3, priority='LOWEST')]\n")  # fmt: skip  # the string under its call
    first = tmp_path / "first"
    with pytest.raises(RunStopped):
        reference(stopped, first, "20260101_000000")
    assert torch.load(first / "epoch_1.pth", weights_only=False)["meta"]["iter"] == 2  # written mid-epoch
    sides = ours_then_reference(tmp_path, ours(mid, "--resume-from", str(first / "epoch_1.pth")),
                                lambda work_dir, timestamp: reference(mid, work_dir, timestamp,
                                                                      resume_from=first / "epoch_1.pth"))  # fmt: skip  # arguments aligned under the call
    records = assert_resumed_alike(sides, f"{mid.name} resumed from a mid-epoch checkpoint", "epoch_2.pth",
                                   "resumed epoch 1, iter 2", library="mmcls")  # fmt: skip  # arguments aligned under the call
    assert [(r["mode"], r["epoch"], r.get("iter")) for r in records[1:]] == [("train", 2, i) for i in (1, 2, 3, 4)] + [
        ("val", 2, 2)]  # fmt: skip  # the list's last item under it
    assert_auto_resumes_alike(first, tmp_path / "mine", ours(mid, "--auto-resume"), sides.ref / "epoch_2.pth", meta=True)


#: what the error names as reading the file each flag names (LightningRunner.resume / load_checkpoint)
READERS = {"--resume-from": "runner.resume (--resume-from, or --auto-resume's pick)",
           "--load-from": "runner.load_checkpoint (load_from / resume_from)"}


@pytest.mark.parametrize("flag", list(READERS))
def test_a_resume_or_load_from_file_that_is_no_checkpoint_is_one_short_error(config, tmp_path, capsys, flag):
    from lightning_hooks import cli

    ckpt = tmp_path / "epoch_1.pth"
    ckpt.write_bytes(bytes(range(7, 250)) * 8)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["train", str(config), "--work-dir", str(tmp_path / "work"), flag, str(ckpt)])
    err = capsys.readouterr().err  # the library's log lines, then the one error
    assert exit_.value.code == 1 and "Traceback" not in err, err[-3000:]
    err = err.strip().splitlines()[-1]
    assert err.startswith("lightning-hooks train: error: ")
    assert f"{READERS[flag]}: {str(ckpt)!r} is not a PyTorch checkpoint" in err
    assert "weights_only" not in err


@pytest.mark.parametrize(("option", "expected"), [
    ("model.backbone.type=ResNte", "unknown model type 'ResNte' (registry mmcls::models). Did you mean: ResNet"),
    ("data.train.type=TinyCIFR", "unknown dataset type 'TinyCIFR' (registry mmcls::dataset). Did you mean: TinyCIFAR"),
])  # fmt: skip
def test_a_type_no_1x_registry_knows_is_one_short_error(config, tmp_path, capsys, option, expected):
    from lightning_hooks import cli

    with pytest.raises(SystemExit) as exit_:
        cli.main(["train", str(config), "--work-dir", str(tmp_path / "work"), "--cfg-options", option])
    err = capsys.readouterr().err  # the library's log lines, then the one error
    assert exit_.value.code == 1 and "Traceback" not in err, err[-3000:]
    err = err.strip().splitlines()[-1]
    assert err.startswith("lightning-hooks train: error: ")
    assert expected in err and "custom_imports" in err
