"""``lightning-hooks train CONFIG.py`` for OpenMMLab 1.x configs (issue #25), differential against the library's own
``train_model`` run in-process as mmcls 0.25's ``tools/train.py`` runs it: the shipped ``resnet18_8xb16_cifar10.py``
as ``_base_`` of a small derived config (a narrow ResNet, 8 generated 32x32 images, 2 epochs, EvalHook each epoch).
Same losses per iteration, json log, text log's training lines, checkpoint files and final weights, bitwise on CPU."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from mmcv_testkit import RunStopped, fresh_root_logger, import_with_stubbed_ops, stub_collect_env  # skips outside .venv-mmcv1

mmcls = pytest.importorskip("mmcls", reason="mmcls 0.x lives in .venv-mmcv1")

from mmcv import Config  # noqa: E402

from lightning_hooks import train as dispatcher  # noqa: E402
from lightning_hooks.core.config_kind import MMENGINE, OPENMMLAB_1X, config_kind  # noqa: E402
from lightning_hooks.families.mmcv import train as mmcv_train  # noqa: E402

CONFIGS = Path(mmcls.__file__).parent / ".mim" / "configs"
SHIPPED = CONFIGS / "resnet" / "resnet18_8xb16_cifar10.py"

TINY_DATASET = '''
import numpy as np
from mmcls.datasets import DATASETS, BaseDataset


@DATASETS.register_module(force=True)
class TinyCIFAR(BaseDataset):
    """8 (train) or 4 (test) generated 32x32 images of the 10 CIFAR classes."""

    CLASSES = [str(i) for i in range(10)]

    def load_annotations(self):
        rng = np.random.RandomState(1 if self.test_mode else 0)
        n = 4 if self.test_mode else 8
        return [dict(img=rng.randint(0, 255, (32, 32, 3)).astype(np.uint8), gt_label=np.array(i % 10, dtype=np.int64))
                for i in range(n)]
'''


@pytest.fixture
def config(tmp_path, monkeypatch):
    """A derived config of the shipped CIFAR ResNet: narrow (8 base channels), tiny data, 2 epochs, step LR."""
    stub_collect_env(monkeypatch)  # mmcv.ops may be imported, with stubbed ops, by other tests
    (tmp_path / "tiny_cifar_data.py").write_text(TINY_DATASET)
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "tiny_resnet_cifar.py"
    path.write_text(textwrap.dedent(f"""
        _base_ = [{str(SHIPPED)!r}]
        custom_imports = dict(imports=['tiny_cifar_data'])
        model = dict(backbone=dict(base_channels=8, stem_channels=8), head=dict(in_channels=64))
        data = dict(samples_per_gpu=4, workers_per_gpu=0, persistent_workers=False, train=dict(type='TinyCIFAR'),
                    val=dict(type='TinyCIFAR'), test=dict(type='TinyCIFAR'))
        runner = dict(max_epochs=2)
        log_config = dict(interval=1)
        lr_config = dict(policy='step', step=[1])
        evaluation = dict(interval=1, metric='accuracy')
    """))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the small convolutions are slower on more threads of a shared machine
    yield path
    torch.set_num_threads(threads)
    sys.modules.pop("tiny_cifar_data", None)



def reference(path: Path, work_dir: Path, timestamp: str, max_epochs: int | None = None,
              resume_from: Path | None = None) -> torch.nn.Module:  # fmt: skip
    """mmcls 0.25's ``tools/train.py`` main for ``--seed 0`` on CPU, in-process: the real ``train_model`` and runner
    (``--cfg-options runner.max_epochs=...``, ``--resume-from ...``)."""
    from mmcls import __version__
    from mmcls.apis import set_random_seed, train_model
    from mmcls.datasets import build_dataset
    from mmcls.models import build_classifier
    from mmcls.utils import collect_env, get_root_logger

    cfg = Config.fromfile(str(path))
    if max_epochs is not None:
        cfg.merge_from_dict({"runner.max_epochs": max_epochs})
    if resume_from is not None:
        cfg.resume_from = str(resume_from)
    cfg.work_dir = str(work_dir)
    cfg.gpu_ids = [0]
    os.makedirs(work_dir, exist_ok=True)
    cfg.dump(str(work_dir / path.name))
    logger = get_root_logger(log_file=str(work_dir / f"{timestamp}.log"), log_level=cfg.log_level)
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


def _json_log(path: Path) -> list[dict]:
    """The json log's records without the wall-clock fields."""
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in ("time", "data_time", "eta", "memory")} for r in lines]


def _text_log(path: Path) -> list[str]:
    """The text log's training, evaluation and checkpoint lines, without their time stamps and wall-clock fields."""
    lines = [line.split(" - ", 3)[-1] for line in path.read_text().splitlines() if " - mmcls - " in line]
    keep = [line for line in lines if line.startswith(("Epoch", "Saving checkpoint", "Set random seed"))]
    return [re.sub(r"(eta|time|data_time): [^,]+, ", "", line) for line in keep]


def test_lightning_hooks_train_runs_an_mmcls_config_as_tools_train_py(config, tmp_path):
    fresh_root_logger("mmcls")
    torch.manual_seed(123)  # the seed comes from --seed, whatever the state before
    work_dir, ours, ref = tmp_path / "work", tmp_path / "ours", tmp_path / "ref"  # both run in work/ (the config
    # they log and save names it), which is then renamed
    dispatcher.main([str(config), "--work-dir", str(work_dir), "--seed", "0", "--accelerator", "cpu"])
    work_dir.rename(ours)
    (log_json,) = ours.glob("*.log.json")
    timestamp = log_json.name[: -len(".log.json")]
    fresh_root_logger("mmcls")
    model = reference(config, work_dir, timestamp)
    work_dir.rename(ref)
    names = sorted(p.name for p in ref.iterdir())
    assert sorted(p.name for p in ours.iterdir()) == names
    assert names == sorted([f"{timestamp}.log", f"{timestamp}.log.json", config.name, "epoch_1.pth", "epoch_2.pth",
                            "latest.pth"])  # fmt: skip
    assert os.readlink(ours / "latest.pth") == "epoch_2.pth"
    records = _json_log(ours / log_json.name)
    assert records == _json_log(ref / log_json.name)
    assert [r["mode"] for r in records[1:]] == ["train", "train", "val", "train", "train", "val"]
    assert _text_log(ours / f"{timestamp}.log") == _text_log(ref / f"{timestamp}.log")
    assert (ours / config.name).read_text() == (ref / config.name).read_text()
    for name in ("epoch_1.pth", "epoch_2.pth"):
        mine, theirs = (torch.load(d / name, map_location="cpu", weights_only=False) for d in (ours, ref))
        assert sorted(mine) == sorted(theirs) == ["meta", "optimizer", "state_dict"]
        mine_meta, their_meta = (copy.deepcopy(c["meta"]) for c in (mine, theirs))
        for meta in (mine_meta, their_meta):
            meta.pop("time")
        assert mine_meta == their_meta
        assert mine["state_dict"].keys() == theirs["state_dict"].keys()
        for key, value in theirs["state_dict"].items():
            assert torch.equal(mine["state_dict"][key], value), (name, key)
        assert str(mine["optimizer"]) == str(theirs["optimizer"])
    final = torch.load(ours / "epoch_2.pth", map_location="cpu", weights_only=False)["state_dict"]
    for key, value in model.state_dict().items():
        assert torch.equal(final[key], value), key


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


def _same_checkpoints(mine: Path, theirs: Path) -> None:
    """Same keys, ``meta`` (but its time and the work dir in its config), weights (bitwise) and optimizer state."""
    ours, ref = (torch.load(p, map_location="cpu", weights_only=False) for p in (mine, theirs))
    assert sorted(ours) == sorted(ref) == ["meta", "optimizer", "state_dict"]
    for meta in (ours["meta"], ref["meta"]):
        meta["time"] = None
        meta["config"] = re.sub(r"(?m)^work_dir = .*$", "", meta["config"])
        if "last_ckpt" in meta.get("hook_msgs", {}):  # in each run's work dir
            meta["hook_msgs"]["last_ckpt"] = os.path.basename(meta["hook_msgs"]["last_ckpt"])
    assert ours["meta"] == ref["meta"]
    assert ours["state_dict"].keys() == ref["state_dict"].keys()
    for key, value in ref["state_dict"].items():
        assert torch.equal(ours["state_dict"][key], value), (mine.name, key)
    assert str(ours["optimizer"]) == str(ref["optimizer"])


def test_resume_from_goes_on_as_train_model_resumed(config, tmp_path):
    """mmcls's runner trains epoch 1; its own train_model resumed from epoch_1.pth (--resume-from) and ours go on
    alike: log records (the resumed meta first), epoch_2.pth, final weights. --auto-resume from a checkpoint our
    command wrote (latest.pth in its work dir) gives the same epoch 2."""
    first, work_dir, ours, ref = (tmp_path / name for name in ("first", "work", "ours", "ref"))
    timestamp = "20260101_000000"
    fresh_root_logger("mmcls")
    reference(config, first, timestamp, max_epochs=1)
    torch.manual_seed(123)
    fresh_root_logger("mmcls")
    dispatcher.main([str(config), "--work-dir", str(work_dir), "--seed", "0", "--accelerator", "cpu",
                     "--resume-from", str(first / "epoch_1.pth")])  # fmt: skip
    work_dir.rename(ours)
    (log_json,) = ours.glob("*.log.json")
    timestamp = log_json.name[: -len(".log.json")]
    fresh_root_logger("mmcls")
    model = reference(config, work_dir, timestamp, resume_from=first / "epoch_1.pth")
    work_dir.rename(ref)
    assert sorted(p.name for p in ours.iterdir()) == sorted(p.name for p in ref.iterdir())
    assert not (ours / "epoch_1.pth").exists() and os.readlink(ours / "latest.pth") == "epoch_2.pth"
    records = _json_log(ours / log_json.name)
    assert records == _json_log(ref / log_json.name)
    assert [(r["mode"], r["epoch"]) for r in records[1:]] == [("train", 2), ("train", 2), ("val", 2)]
    assert _text_log(ours / f"{timestamp}.log") == _text_log(ref / f"{timestamp}.log")
    _same_checkpoints(ours / "epoch_2.pth", ref / "epoch_2.pth")
    final = torch.load(ours / "epoch_2.pth", map_location="cpu", weights_only=False)["state_dict"]
    for key, value in model.state_dict().items():
        assert torch.equal(final[key], value), key
    # our command's epoch 1, then --auto-resume in its work dir
    fresh_root_logger("mmcls")
    mine = tmp_path / "mine"
    dispatcher.main([str(config), "--work-dir", str(mine), "--seed", "0", "--accelerator", "cpu",
                     "--cfg-options", "runner.max_epochs=1"])  # fmt: skip
    _same_checkpoints(mine / "epoch_1.pth", first / "epoch_1.pth")
    fresh_root_logger("mmcls")
    dispatcher.main([str(config), "--work-dir", str(mine), "--seed", "0", "--accelerator", "cpu", "--auto-resume"])
    _same_checkpoints(mine / "epoch_2.pth", ref / "epoch_2.pth")
    assert mmcv_train.latest_checkpoint(str(tmp_path / "nothing")) is None


def test_several_processes_need_lightnings_ddp_before_anything_starts(config, tmp_path):
    """(2 processes under Lightning's DDP: test_train_ddp.py.) Another strategy is refused before a process starts."""
    with pytest.raises(ValueError, match=r"--strategy 'ddp_spawn': an OpenMMLab 1.x config in 2 processes trains "
                       r"under Lightning's DDP .* pass --strategy ddp, or leave it out"):  # fmt: skip
        dispatcher.main([str(config), "--work-dir", str(tmp_path / "w"), "--seed", "0", "--accelerator", "cpu",
                         "--devices", "2", "--strategy", "ddp_spawn"])  # fmt: skip
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize("library", mmcv_train.LIBRARIES, ids=lambda lib: lib.package)
def test_the_library_train_module_is_as_before_after_a_run_and_after_a_failure(library):
    """``lightning_runner`` replaces the training API module's ``build_runner`` for one run only."""
    pytest.importorskip(library.package)
    [module] = import_with_stubbed_ops(library.train.partition(":")[0])  # mmdet's and mmseg's reach mmcv's ops
    original = module.build_runner
    with mmcv_train.lightning_runner(library, {}):
        assert module.build_runner is not original
    assert module.build_runner is original
    with pytest.raises(RuntimeError, match="boom"), mmcv_train.lightning_runner(library, {}):
        raise RuntimeError("boom")
    assert module.build_runner is original


def test_resume_from_a_mid_epoch_checkpoint_goes_on_as_train_model_resumed(config, tmp_path):
    """A checkpoint written inside epoch 1 (checkpoint_config by_epoch=False: the 3rd of its 4 iterations, the run
    stopped there by a hook; mmcv's
    EpochBasedRunner names it epoch_1.pth and records meta epoch 1, iter 2, before it counts that iteration):
    mmcls's own train_model resumed from it and ours go on alike, as mmcv's runner.resume does (from the end of epoch
    1, the iteration counter at 2): log records and lines (``resumed epoch 1, iter 2``), epoch_2.pth (weights,
    optimizer state, meta), final weights. --auto-resume from that work dir (latest.pth) goes on the same way."""
    mid = tmp_path / "tiny_resnet_cifar_mid.py"
    mid.write_text(f"_base_ = [{str(config)!r}]\ndata = dict(samples_per_gpu=2)\n"
                   "checkpoint_config = dict(interval=3, by_epoch=False)\n")  # fmt: skip
    stopped = tmp_path / "stopped.py"  # the run stopped after that checkpoint, as if killed
    stopped.write_text(f"_base_ = [{str(mid)!r}]\n"
                       "custom_hooks = [dict(type='StopAfterIters', iters=3, priority='LOWEST')]\n")  # fmt: skip
    first, work_dir, ours, ref = (tmp_path / name for name in ("first", "work", "ours", "ref"))
    fresh_root_logger("mmcls")
    with pytest.raises(RunStopped):
        reference(stopped, first, "20260101_000000")
    assert torch.load(first / "epoch_1.pth", weights_only=False)["meta"]["iter"] == 2  # written mid-epoch
    fresh_root_logger("mmcls")
    dispatcher.main([str(mid), "--work-dir", str(work_dir), "--seed", "0", "--accelerator", "cpu",
                     "--resume-from", str(first / "epoch_1.pth")])  # fmt: skip
    work_dir.rename(ours)
    (log_json,) = ours.glob("*.log.json")
    timestamp = log_json.name[: -len(".log.json")]
    fresh_root_logger("mmcls")
    model = reference(mid, work_dir, timestamp, resume_from=first / "epoch_1.pth")
    work_dir.rename(ref)
    assert sorted(p.name for p in ours.iterdir()) == sorted(p.name for p in ref.iterdir())
    mine, theirs = _json_log(ours / log_json.name), _json_log(ref / log_json.name)
    for i, (a, b) in enumerate(zip(mine, theirs)):
        assert a == b, f"{mid.name} resumed from a mid-epoch checkpoint: json log record {i}: {a} != {b}"
    assert len(mine) == len(theirs)
    assert [(r["mode"], r["epoch"], r.get("iter")) for r in mine[1:]] == [("train", 2, i) for i in (1, 2, 3, 4)] + [
        ("val", 2, 2)]  # fmt: skip
    lines = [_text_log(d / f"{timestamp}.log") for d in (ours, ref)]
    assert lines[0] == lines[1]
    resumed = [line for d in (ours, ref) for line in (d / f"{timestamp}.log").read_text().splitlines() if "resumed" in line]
    assert [line.split(" - ")[-1] for line in resumed] == ["resumed epoch 1, iter 2"] * 2
    _same_checkpoints(ours / "epoch_2.pth", ref / "epoch_2.pth")
    final = torch.load(ours / "epoch_2.pth", map_location="cpu", weights_only=False)["state_dict"]
    for key, value in model.state_dict().items():
        assert torch.equal(final[key], value), key
    mine_dir = tmp_path / "mine"
    shutil.copytree(first, mine_dir, symlinks=True)
    fresh_root_logger("mmcls")
    dispatcher.main([str(mid), "--work-dir", str(mine_dir), "--seed", "0", "--accelerator", "cpu", "--auto-resume"])
    _same_checkpoints(mine_dir / "epoch_2.pth", ref / "epoch_2.pth")


@pytest.mark.parametrize("flag", ["--resume-from", "--load-from"])
def test_a_resume_or_load_from_file_that_is_no_checkpoint_is_one_short_error(config, tmp_path, capsys, flag):
    from lightning_hooks import cli

    ckpt = tmp_path / "epoch_1.pth"
    ckpt.write_bytes(bytes(range(7, 250)) * 8)
    for library in ("mmcls", "mmcv"):  # their handlers would write to an earlier test's captured stderr
        fresh_root_logger(library)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["train", str(config), "--work-dir", str(tmp_path / "work"), flag, str(ckpt)])
    err = capsys.readouterr().err  # the library's log lines, then the one error
    assert exit_.value.code == 1 and "Traceback" not in err, err[-3000:]
    err = err.strip().splitlines()[-1]
    assert err.startswith("lightning-hooks train: error: ")
    assert f"runner.load_checkpoint (load_from / resume_from): {str(ckpt)!r} is not a PyTorch checkpoint" in err
    assert "weights_only" not in err


@pytest.mark.parametrize(("option", "expected"), [
    ("model.backbone.type=ResNte", "unknown model type 'ResNte' (registry mmcls::models). Did you mean: ResNet"),
    ("data.train.type=TinyCIFR", "unknown dataset type 'TinyCIFR' (registry mmcls::dataset). Did you mean: TinyCIFAR"),
])  # fmt: skip
def test_a_type_no_1x_registry_knows_is_one_short_error(config, tmp_path, capsys, option, expected):
    from lightning_hooks import cli

    for library in ("mmcls", "mmcv"):
        fresh_root_logger(library)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["train", str(config), "--work-dir", str(tmp_path / "work"), "--cfg-options", option])
    err = capsys.readouterr().err  # the library's log lines, then the one error
    assert exit_.value.code == 1 and "Traceback" not in err, err[-3000:]
    err = err.strip().splitlines()[-1]
    assert err.startswith("lightning-hooks train: error: ")
    assert expected in err and "custom_imports" in err
