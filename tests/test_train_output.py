"""What one ``lightning-hooks train`` run prints around the training: Lightning's device banner once (the MMEngine
command needs the world size before it builds its Trainer: ``lightning_api.world_size``, no second Trainer), and
neither Lightning's ``LeafSpec`` deprecation (Lightning's own code, not the user's) nor its advertisement tips, nor
the deprecation notices the legacy libraries' imports raise (``core.console.LEGACY_IMPORT_NOTICES``, Hydra's migration
notice on VISSL's call), also in loader workers that import them again."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import real_torchvision

from lh_testing import HELPERS, ROOT, subprocess_env


def assert_one_banner(output: str) -> None:
    lines = output.splitlines()
    assert sum(line.startswith("GPU available:") for line in lines) == 1, output[-3000:]
    assert sum(line.startswith("TPU available:") for line in lines) == 1
    assert "LeafSpec" not in output and "💡 Tip" not in output, output[-3000:]
    assert "You have overridden" not in output, output[-3000:]  # Lightning on our module's hooks, not the user's
    for notice in ("pkg_resources is deprecated", "transforms._functional_video' module is deprecated",
                   "transforms._transforms_video' module is deprecated", "Hydra14MigrationWarning"):  # fmt: skip
        assert notice not in output, output[-3000:]


def train(args: list[str], cwd: Path, prelude: str = "", *paths: Path) -> str:
    code = f"{prelude}from lightning_hooks.cli import main; main(['train', *{args!r}])"
    proc = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=600,
                          env=subprocess_env(*paths, HELPERS, ROOT))  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout + proc.stderr


def test_mmengine_train_prints_one_banner(tmp_path):
    import train_kit

    config = tmp_path / "resnet.py"
    config.write_text(f"_base_ = [{str(train_kit.RESNET_CIFAR)!r}]\n{train_kit.resnet_cifar(n_train=4, n_val=None)}"
                      "train_cfg = dict(max_epochs=1)\ncustom_imports = dict(imports=['train_kit'])\n")  # fmt: skip
    assert_one_banner(train([str(config), "--work-dir", str(tmp_path / "work")], tmp_path))


@pytest.mark.skipif(not real_torchvision.available(), reason="run `bash scripts/setup.sh test` (real torchvision)")
def test_classy_train_prints_one_banner(tmp_path):
    import classy_vision  # the config ships with the package

    shipped = Path(classy_vision.__file__).parent / "configs/resnet50_synthetic_image_classy_config.json"
    config = json.loads(shipped.read_text())
    config["num_epochs"] = 1
    for phase, n in (("train", 4), ("test", 4)):
        config["dataset"][phase].update(crop_size=32, num_samples=n, batchsize_per_replica=4, num_workers=0)
    (tmp_path / "task.json").write_text(json.dumps(config))
    prelude = f"import sys; sys.path.insert(0, {str(HELPERS)!r}); import real_torchvision; real_torchvision.activate(); "
    output = train(["task.json", "--checkpoint_folder", str(tmp_path / "ckpt")], tmp_path, prelude)
    assert_one_banner(output)


def test_vissl_train_prints_one_banner(tmp_path):
    """README's small VISSL command (SimCLR's integration-test config on 8 synthetic images, 1 epoch), with a loader
    worker."""
    readme = (ROOT / "README.md").read_text()
    command = readme[readme.index("lightning-hooks train config=test/integration_test/quick_simclr_synthetic"):]
    command = command[:command.index("config.CHECKPOINT.DIR=")].replace("\\\n", " ")
    args = [arg.strip('"') for arg in re.findall(r'"[^"]*"|\S+', command)][2:]
    workers = args.index("config.DATA.NUM_DATALOADER_WORKERS=0")
    args[workers] = "config.DATA.NUM_DATALOADER_WORKERS=1"  # a worker (VISSL's forkserver) imports VISSL again
    site = ROOT / "scripts" / "vissl-site"  # as the README exports it: the worker's new interpreter gets it too
    assert_one_banner(train([*args, f"config.CHECKPOINT.DIR={tmp_path / 'simclr'}"], tmp_path, "", site))

