"""``lightning-hooks train``: the config kind picks the entry point (:mod:`lightning_hooks.core.config_kind`), and a bad
input is one short message naming it, without a traceback.

A 1.x config goes to the mmcv family's entry point, which says what it needs where mmcv 1.x is not installed (the
main venv has mmcv-lite 2.x, no ``mmcv.runner``); the training itself is tested in .venv-mmcv1
(tests/families/mmcv/test_train*.py). Each bad file is given to the real CLI (``lightning_hooks.cli.main``), which
must print the file (the ``_base_``, the line) and the way out, exit 1, and print no traceback.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from lh_testing import DDP_LAUNCH_VARIABLES, commands_in_one_process, subprocess_env

from lightning_hooks import cli
from lightning_hooks import train as dispatcher
from lightning_hooks.core.config_kind import MMENGINE, OPENMMLAB_1X, config_kind

MMENGINE_CFG = "train_cfg = dict(by_epoch=True, max_epochs=1)\noptim_wrapper = dict(optimizer=dict(type='SGD'))\n"
MMCV_CFG = "runner = dict(type='EpochBasedRunner', max_epochs=1)\nlr_config = dict(policy='fixed')\n"


def _has_mmcv_runner() -> bool:
    try:
        return importlib.util.find_spec("mmcv.runner") is not None
    except ImportError:
        return False


def train_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """``lightning-hooks train argv``'s stderr, which must be one short error (exit 1, no traceback)."""
    with pytest.raises(SystemExit) as exit_:
        cli.main(["train", *argv])
    err = capsys.readouterr().err
    assert exit_.value.code == 1, err
    assert "Traceback" not in err and "usage:" not in err, err
    assert err.startswith("lightning-hooks train: error: ") and len(err.splitlines()) <= 4, err
    return err


def test_a_1x_config_goes_to_the_mmcv_family_which_names_what_it_needs(tmp_path):
    if _has_mmcv_runner():
        pytest.skip("mmcv 1.x is installed here: tests/families/mmcv/test_train.py trains such configs")
    config = tmp_path / "old.py"
    config.write_text(MMCV_CFG)
    assert config_kind(str(config)) == OPENMMLAB_1X
    with pytest.raises(RuntimeError, match=r"an OpenMMLab 1.x config .* needs mmcv 1.x with mmcv.runner"):
        dispatcher.main([str(config)])


def test_an_mmengine_config_is_not_the_mmcv_familys(tmp_path):
    config = tmp_path / "new.py"
    config.write_text(MMENGINE_CFG)
    only_base = tmp_path / "derived.py"  # the _base_ decides
    only_base.write_text(f"_base_ = [{str(config)!r}]\n")
    assert config_kind(str(config)) == config_kind(str(only_base)) == MMENGINE


def test_exactly_one_entry_point_trains_each_kind(tmp_path):
    (tmp_path / "a.py").write_text(MMENGINE_CFG)
    (tmp_path / "b.py").write_text(MMCV_CFG)
    (tmp_path / "c.json").write_text("{}")
    for first in (str(tmp_path / "a.py"), str(tmp_path / "b.py"), str(tmp_path / "c.json"), "config=test/x"):
        claimed = [c.legacy for f in dispatcher.families.registered() for c in f.train if c.claims(first)]
        assert len(claimed) == 1, (first, claimed)


def test_an_unknown_kind_shows_the_usage(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["train", "notes.txt"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "usage: lightning-hooks train CONFIG" in err
    assert "no registered family trains 'notes.txt'" in err


@pytest.mark.parametrize("before", [False, True], ids=["started-by-the-run", "there-before"])
def test_the_command_leaves_the_process_group_its_run_started(monkeypatch, before):
    """Lightning destroys only an NCCL group at exit; a gloo group left to the interpreter's exit has aborted a rank
    whose run had finished (SIGABRT). The command ends the group its run started, and only that one."""
    import torch.distributed as dist

    from lightning_hooks.core.family import TrainCommand

    def start_group() -> None:
        if not dist.is_initialized():  # as Lightning's DDP strategy does when the run sets up
            dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)

    command = TrainCommand(legacy="a host's train script", usage="CONFIG", kind="test", main=lambda argv: start_group())
    monkeypatch.setattr(dispatcher, "command_for", lambda first: command)
    if before:
        start_group()
    try:
        dispatcher.main(["config.py"])
        assert dist.is_initialized() == before
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def test_lightning_hooks_fit_leaves_the_process_group_lightnings_ddp_started(tmp_path, monkeypatch):
    """``lightning-hooks fit`` (LightningCLI) under ``strategy=ddp``: Lightning starts a gloo group and leaves it."""
    import torch.distributed as dist

    for name in DDP_LAUNCH_VARIABLES:  # Lightning's launcher sets them in this process: unset again after the test
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    cli.main(["fit", "--model", "lightning.pytorch.demos.boring_classes.BoringModel", "--trainer.max_steps=1",
              "--trainer.limit_val_batches=0", "--trainer.strategy=ddp", "--trainer.devices=1",
              "--trainer.accelerator=cpu", "--trainer.logger=false", "--trainer.enable_checkpointing=false",
              "--trainer.enable_progress_bar=false", f"--trainer.default_root_dir={tmp_path}"])  # fmt: skip
    assert not dist.is_initialized()


@pytest.mark.parametrize("body", [MMENGINE_CFG, MMCV_CFG], ids=["mmengine", "openmmlab-1.x"])
def test_a_mistyped_config_path_is_named_with_the_files_that_look_alike(capsys, tmp_path, monkeypatch, body):
    (tmp_path / "retinanet_r50_fpn_1x_coco.py").write_text(body)
    monkeypatch.chdir(tmp_path)
    err = train_error(capsys, "retinanet_r50_fpn_1x_cocoo.py")
    assert "config file retinanet_r50_fpn_1x_cocoo.py does not exist" in err
    assert "Did you mean: retinanet_r50_fpn_1x_coco.py?" in err and str(tmp_path) in err


@pytest.mark.parametrize("body", [MMENGINE_CFG, MMCV_CFG], ids=["mmengine", "openmmlab-1.x"])
def test_a_missing_base_is_named_with_the_config_that_names_it(capsys, tmp_path, body):
    (tmp_path / "base.py").write_text(body)
    derived = tmp_path / "derived.py"
    derived.write_text("_base_ = ['./base.py', '../_base_/schedule_1x.py']\nmodel = dict(num_classes=3)\n")
    err = train_error(capsys, str(derived))
    assert f"{derived}: its _base_ '../_base_/schedule_1x.py' is {tmp_path.parent / '_base_' / 'schedule_1x.py'}" in err
    assert "does not exist" in err


def test_a_missing_base_of_a_base_is_named(capsys, tmp_path):
    (tmp_path / "base.py").write_text("_base_ = 'runtime.py'\n" + MMENGINE_CFG)
    (tmp_path / "derived.py").write_text("_base_ = 'base.py'\n")
    err = train_error(capsys, str(tmp_path / "derived.py"))
    assert f"{tmp_path / 'base.py'}: its _base_ 'runtime.py' is {tmp_path / 'runtime.py'}, which does not exist" in err


def test_a_base_in_a_package_that_is_not_installed_is_named(capsys, tmp_path):
    (tmp_path / "derived.py").write_text("_base_ = 'mmnothere::retinanet/retinanet_r50_fpn_1x_coco.py'\n")
    err = train_error(capsys, str(tmp_path / "derived.py"))
    assert "the package 'mmnothere', which is not installed" in err


@pytest.mark.parametrize("base", [True, False], ids=["derived", "alone"])
def test_a_line_that_does_not_parse_is_shown(capsys, tmp_path, base):
    (tmp_path / "base.py").write_text(MMENGINE_CFG)
    config = tmp_path / "derived.py"
    config.write_text(("_base_ = ['./base.py']\n" if base else "") + "model = dict(num_classes=3\ntrain_cfg = 1\n")
    err = train_error(capsys, str(config))
    assert f"{config}, line {2 if base else 1}:\n    model = dict(num_classes=3\n" in err
    assert "syntax error: '(' was never closed" in err


def test_a_syntax_error_in_a_base_names_the_base(capsys, tmp_path):
    (tmp_path / "base.py").write_text("train_cfg = dict(max_epochs=1))\n")
    (tmp_path / "derived.py").write_text("_base_ = ['./base.py']\n")
    err = train_error(capsys, str(tmp_path / "derived.py"))
    assert f"{tmp_path / 'base.py'}, line 1:" in err and "unmatched ')'" in err


def test_a_py_file_that_is_no_training_config_says_which_keys_it_lacks(capsys, tmp_path):
    (tmp_path / "tta.py").write_text("tta_model = dict(type='DetTTAModel')\n")
    err = train_error(capsys, str(tmp_path / "tta.py"))
    assert "tta.py: not an OpenMMLab training config" in err and "optim_wrapper" in err and "lr_config" in err


def test_a_missing_classy_task_config_is_named(capsys, tmp_path, monkeypatch):
    (tmp_path / "template_config.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    err = train_error(capsys, "template_confg.json")
    assert "Classy task config template_confg.json does not exist. Did you mean: template_config.json?" in err


def test_a_classy_task_config_that_is_not_json_shows_the_line(capsys, tmp_path):
    config = tmp_path / "task.json"
    config.write_text(json.dumps({"name": "classification_task", "num_epochs": 2}, indent=2).replace('2\n', '2,\n'))
    err = train_error(capsys, str(config))
    assert f"{config}, line 4 column 1: not valid JSON" in err


# ------------------------------------------------------------------------------------ a file that is not a checkpoint
def _tiny_mmengine_config(tmp_path) -> str:
    """A derived config of mmpretrain's CIFAR ResNet-18 on tiny generated data (tests/helpers/train_kit.py)."""
    import train_kit

    path = tmp_path / "tiny.py"
    path.write_text(f"_base_ = [{str(train_kit.RESNET_CIFAR)!r}]\n{train_kit.resnet_cifar(n_val=None)}"
                    "train_cfg = dict(by_epoch=True, max_epochs=1)\n")  # fmt: skip
    return str(path)


NOT_CHECKPOINTS = {
    "random": (lambda: bytes(range(7, 250)) * 8, "is not a PyTorch checkpoint (it starts with bytes"),
    "empty": (lambda: b"", "is empty. Pass the path of a file written by torch.save."),
    "pickle garbage": (lambda: b"\x80\x02garbage" * 4, "is truncated or corrupt and cannot be read as a PyTorch"),
}


@pytest.mark.parametrize("content", sorted(NOT_CHECKPOINTS))
@pytest.mark.parametrize("flag", ["--resume", "load_from"])
def test_an_mmengine_resume_or_load_from_file_that_is_no_checkpoint_is_named(capsys, tmp_path, content, flag):
    make, problem = NOT_CHECKPOINTS[content]
    ckpt = tmp_path / "epoch_1.pth"
    ckpt.write_bytes(make())
    given = [flag, str(ckpt)] if flag == "--resume" else ["--cfg-options", f"load_from={ckpt}"]
    err = train_error(capsys, _tiny_mmengine_config(tmp_path), "--work-dir", str(tmp_path / "work"), *given)
    owner = "runner.resume" if flag == "--resume" else "runner.load_checkpoint"  # what MMEngine's Runner calls
    assert f"{owner}: {str(ckpt)!r}" in err and problem in err
    assert "weights_only" not in err
    assert not (tmp_path / "work").exists() or flag != "--resume"  # a file to resume from is checked first


def test_an_mmengine_resume_file_that_does_not_exist_is_named(capsys, tmp_path):
    missing = tmp_path / "epoch_9.pth"
    err = train_error(capsys, _tiny_mmengine_config(tmp_path), "--work-dir", str(tmp_path / "w"), "--resume", str(missing))
    assert f"runner.resume: {str(missing)!r} does not exist. Check the path of the checkpoint." in err


# -------------------------------------------------------------------------------------- a name nobody registered
@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("model = dict(backbone=dict(type='ResNte'))", "unknown model type 'ResNte' (registry mmpretrain::model). "
                                                       "Did you mean: ResNet"),
        ("train_dataloader = dict(dataset=dict(type='TinyCifr'))", "unknown dataset type 'TinyCifr' (registry "
                                                                   "mmpretrain::dataset). Did you mean: TinyCifar?"),
        ("train_dataloader = dict(dataset=dict(pipeline=[dict(type='PackInput')]))", "unknown transform type "
                                                                                     "'PackInput'"),
        ("model = dict(head=dict(loss=dict(type='CrossEntropyLos')))", "Did you mean: CrossEntropyLoss?"),
        ("custom_hooks = [dict(type='EMAHok')]", "hook type 'EMAHok' is not registered"),
    ],
    ids=["model", "dataset", "transform", "loss", "hook"],
)  # fmt: skip
def test_an_mmengine_type_no_registry_knows_is_one_short_message(capsys, tmp_path, line, expected):
    config = _tiny_mmengine_config(tmp_path)
    with open(config, "a") as f:
        f.write(line + "\n")
    err = train_error(capsys, config, "--work-dir", str(tmp_path / "work"))
    assert expected in err
    if "hook" not in line:
        assert "custom_imports" in err and "default scope ('mmpretrain')" in err


# -------------------------------------------------- Classy and VISSL (a process of their own, shared by the four)
def _classy_task(tmp_path, **dataset: str) -> str:
    """Classy's shipped ResNet-50 synthetic-image task config, made small (8/4 images of 32 px, one epoch)."""
    root = Path(importlib.util.find_spec("classy_vision").origin).parent
    config = json.loads((root / "configs" / "resnet50_synthetic_image_classy_config.json").read_text())
    for phase, n in (("train", 8), ("test", 4)):
        config["dataset"][phase].update(crop_size=32, num_samples=n, batchsize_per_replica=4, **dataset)
    config["model"]["heads"][0]["num_classes"] = 10
    config["num_epochs"] = 1
    path = tmp_path / "task.json"
    path.write_text(json.dumps(config))
    return str(path)


def _real_torchvision() -> bool:
    import real_torchvision

    return real_torchvision.available()


needs_vissl_site = pytest.mark.skipif(not _real_torchvision(), reason="run `bash scripts/setup.sh test` (VISSL's site)")


@pytest.fixture(scope="module")
def own_process_errors(tmp_path_factory) -> dict[str, tuple[int, str]]:
    """The Classy and VISSL commands of the tests below as ``lightning-hooks train ARGV``, with VISSL's site
    (torchvision, vissl) on the path as its docs say, each in a folder of its own, one after the other in one process
    (``lh_testing.commands_in_one_process``; each stops at its config): by test, its exit status and stderr."""
    import real_torchvision

    names = ("classy_name", "classy_ckpt", "vissl_name", "vissl_config")
    folders = {name: tmp_path_factory.mktemp(name) for name in names}
    (folders["classy_ckpt"] / "random.torch").write_bytes(NOT_CHECKPOINTS["random"][0]())
    commands = {
        "classy_name": [_classy_task(folders["classy_name"], name="synthetic_imag"), "--checkpoint_folder", "ck"],
        "classy_ckpt": [_classy_task(folders["classy_ckpt"]), "--checkpoint_folder", "ck",
                        "--checkpoint_load_path", "random.torch"],
        "vissl_name": ["config=test/integration_test/quick_simclr_synthetic", "config.MODEL.TRUNK.NAME=resnext",
                       f"config.CHECKPOINT.DIR={folders['vissl_name'] / 'ck'}"],
        "vissl_config": ["config=test/integration_test/quick_simclr_synthetc"],
    }  # fmt: skip
    helpers = Path(real_torchvision.__file__).parent
    ended = commands_in_one_process([(folders[name], ["train", *argv]) for name, argv in commands.items()],
                                    subprocess_env(helpers, OMP_NUM_THREADS="1"),
                                    prelude="import real_torchvision; real_torchvision.activate()")  # fmt: skip
    return dict(zip(commands, ended, strict=True))


def _one_error(ended: tuple[int, str]) -> str:
    """A command's one error line: the last of its stderr (exit 1, no traceback)."""
    code, stderr = ended
    assert code == 1 and "Traceback" not in stderr, stderr[-4000:]
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("lightning-hooks train: error: "), stderr[-4000:]
    return last


@needs_vissl_site
def test_a_classy_name_no_registry_knows_is_one_short_message(own_process_errors):
    err = _one_error(own_process_errors["classy_name"])
    assert "unknown Classy dataset name 'synthetic_imag'. Did you mean: synthetic_image," in err
    assert "Registrations come from the packages of the project folder (--project_folder" in err


@needs_vissl_site
def test_a_classy_checkpoint_load_path_that_is_no_checkpoint_is_named(own_process_errors):
    err = _one_error(own_process_errors["classy_ckpt"])
    assert "the checkpoint given as ckpt_path, 'random.torch', is not a PyTorch checkpoint (it starts with" in err
    assert "weights_only" not in err


@needs_vissl_site
def test_a_vissl_name_no_registry_knows_is_one_short_message(own_process_errors):
    err = _one_error(own_process_errors["vissl_name"])
    assert "unknown VISSL model trunk name 'resnext'. Did you mean: resnet," in err and "--import MODULE" in err


@needs_vissl_site
def test_a_vissl_config_that_does_not_exist_is_named(own_process_errors):
    err = _one_error(own_process_errors["vissl_config"])
    assert "config=test/integration_test/quick_simclr_synthetc: VISSL has no such config" in err
    assert "Did you mean: test/integration_test/quick_simclr_synthetic" in err
