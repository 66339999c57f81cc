"""``scripts/gpu-check.sh``'s 2-step run of mmpretrain's MAE ViT-L FlexibleRunner config (``fsdp`` or ``ds``), on a
tiny ViT and generated images: ``lightning-hooks train`` (Lightning's FSDPStrategy / DeepSpeedStrategy), then
MMEngine's ``FlexibleRunner`` on the same config in a one-process torchrun where it runs; prints both runs' losses
and fails if ours does not train or, where both ran, the first losses differ by more than 1e-2.

    python scripts/gpu_check_flexible.py fsdp|ds [--dry-run]

``--dry-run`` (``gpu-check.sh --dry-run``, no GPU needed) writes the derived config, loads it as both runs do (its
``custom_imports`` too) and builds its train dataset through the shipped pipeline; it trains nothing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from openmmlab_stubs import import_openmmlab  # tests/helpers: mmcv-lite lacks the compiled ops module

import_openmmlab(("mmpretrain",))

import mmpretrain  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# the generated CIFAR-like images the benchmarks train on (benchmarks/_cifar_data.py: BenchCifar in mmpretrain's
# DATASETS), found from this file: the derived config imports this module (custom_imports), as a user's config imports
# its dataset, in each process of the run
sys.path.insert(0, str(ROOT / "benchmarks"))
import _cifar_data  # noqa: E402, F401

SHIPPED = Path(mmpretrain.__file__).parent / ".mim" / "configs" / "mae" / "benchmarks"
#: the derived config's lines: a 2-layer ViT, 8 generated images (``BenchCifar``) through the
#: shipped train pipeline after its LoadImageFromFile, so 2 iterations of 4
LINES = """
custom_imports = dict(imports=["gpu_check_flexible"], allow_failed_imports=False)
model = dict(backbone=dict(arch=dict(embed_dims=64, num_layers=2, num_heads=2, feedforward_channels=128, _delete_=True),
                           drop_path_rate=0.0, init_cfg=None), head=dict(in_channels=64, num_classes=10))
data_preprocessor = dict(num_classes=10)
train_dataloader = dict(batch_size=4, num_workers=0, persistent_workers=False,
    dataset=dict(type="BenchCifar", n=8, seed=1, _delete_=True, pipeline=PIPELINE))
val_dataloader = None
val_cfg = None
val_evaluator = None
test_dataloader = None
test_cfg = None
test_evaluator = None
param_scheduler = []
train_cfg = dict(max_epochs=1)
default_hooks = dict(logger=dict(interval=1), checkpoint=dict(interval=1))
randomness = dict(seed=0)
"""


def losses(work_dir: Path) -> list[float]:
    files = sorted(work_dir.glob("*/vis_data/scalars.json"))
    return [json.loads(line)["loss"] for f in files for line in f.read_text().splitlines() if "loss" in line]


def write_config(kind: str, directory: Path) -> Path:
    """The derived config of the shipped ``vit-large-p16_8xb128-{kind}-coslr-50e_in1k.py`` in ``directory``."""
    from mmengine.config import Config

    shipped = SHIPPED / f"vit-large-p16_8xb128-{kind}-coslr-50e_in1k.py"
    pipeline = [step for step in Config.fromfile(str(shipped)).train_pipeline if step["type"] != "LoadImageFromFile"]
    config = directory / f"mae_vit_{kind}.py"
    lines = LINES.replace("PIPELINE", repr(pipeline))
    if kind == "fsdp":  # the shipped policy's 1e7 parameters, scaled to the tiny ViT: each of its blocks is a unit
        lines += "strategy = dict(model_wrapper=dict(auto_wrap_policy=dict(min_num_params=10000)))\n"
    config.write_text(f"_base_ = [{str(shipped)!r}]\n{lines}")
    return config


def dry_run(config: Path) -> int:
    """Load ``config`` (its ``custom_imports`` too), build Lightning's strategy from it as ``lightning-hooks train``
    does, and its train dataset through the shipped pipeline."""
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmpretrain.registry import DATASETS

    from lightning_hooks.families.mmengine import strategy

    cfg = Config.fromfile(str(config))
    built = strategy.from_config(cfg)
    init_default_scope(cfg.default_scope)  # as the runners do: the pipeline's names are mmpretrain's
    dataset = DATASETS.build(cfg.train_dataloader.dataset)
    inputs = dataset[0]["inputs"]
    print(f"gpu-check dry run: {config.name} loads, Lightning's {type(built).__name__}, {len(dataset)} images "
          f"through the shipped pipeline, the first as {tuple(inputs.shape)}")  # fmt: skip
    return 0 if len(dataset) == 8 else 1


def main(kind: str, dry: bool = False) -> int:
    tmp = Path(tempfile.mkdtemp(prefix=f"gpu-check-{kind}-"))
    config = write_config(kind, tmp)
    if dry:
        try:
            return dry_run(config)
        finally:
            shutil.rmtree(tmp)
    ours = subprocess.run([sys.executable, "-m", "lightning_hooks", "train", str(config), "--work-dir",
                           str(tmp / "lightning"), "--devices", "1"], cwd=tmp)  # fmt: skip
    mine = losses(tmp / "lightning")
    print(f"gpu-check {kind}: lightning-hooks train exit {ours.returncode}, losses {mine}, files "
          f"{sorted(p.name for p in (tmp / 'lightning').iterdir())}")  # fmt: skip
    script = tmp / "flexible_runner_train.py"  # tools/train.py for a config with runner_type, under torchrun
    script.write_text("import sys\nfrom mmengine.config import Config\nfrom mmengine.registry import RUNNERS\n"
                      "cfg = Config.fromfile(sys.argv[1])\ncfg.work_dir = sys.argv[2]\ncfg.launcher = 'pytorch'\n"
                      "RUNNERS.build(cfg).train()\n")  # fmt: skip
    theirs = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "1", str(script),
                             str(config), str(tmp / "runner")], cwd=tmp)  # fmt: skip
    reference = losses(tmp / "runner")
    print(f"gpu-check {kind}: FlexibleRunner exit {theirs.returncode}, losses {reference}")
    if ours.returncode or len(mine) != 2:
        return 1
    if reference and abs(reference[0] - mine[0]) > 1e-2:
        print(f"gpu-check {kind}: first loss {mine[0]} vs FlexibleRunner's {reference[0]}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], dry="--dry-run" in sys.argv[2:]))
