"""A Classy task config trained by Classy's own ``classy_train.py`` and by ``lightning-hooks train`` (subprocess side).

Both runs read the same JSON config: Classy's shipped template (``templates/synthetic/configs/template_config.json``,
its ``my_dataset`` / ``my_model`` / ``my_loss`` registered as ``classy-project`` generates them) and Classy's
``resnet50_synthetic_image_classy_config.json``, each shrunk by overrides (fewer, smaller images). The config's
``hooks`` add a :class:`RunRecorder` (registered as ``run_recorder``) that saves, at every phase end, what Classy's
logging hooks print (losses, LR, meter values) and the weights each test phase ran with.

The reference is ``classy_train.py``'s ``main(args, config)`` itself (the script ``scripts/setup.sh`` puts in
``<venv>/classy_vision/``), with its own argument parser; the Lightning side is ``lightning-hooks train`` with the same
flags. Both load data in the process (Classy's ``DEFAULT_NUM_WORKERS`` set to 0: tiny data).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import sys
import traceback
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent
CLASSY_TRAIN = Path(sys.prefix) / "classy_vision" / "classy_train.py"


def template_config(out: Path) -> Path:
    """Classy's synthetic template config, made small: 24/12 images of 32 px, batches of 8, 2 epochs."""
    import classy_vision

    root = Path(classy_vision.__file__).parent
    config = json.loads((root / "templates/synthetic/configs/template_config.json").read_text())
    train, test = config["dataset"]["train"], config["dataset"]["test"]
    train.update(crop_size=32, num_samples=24, batchsize_per_replica=8)
    test.update(crop_size=32, num_samples=12, batchsize_per_replica=8)
    train["transforms"][0]["transforms"][0]["size"] = 32  # RandomResizedCrop
    test["transforms"][0]["transforms"][0]["size"] = 36  # Resize
    test["transforms"][0]["transforms"][1]["size"] = 32  # CenterCrop
    return _write(config, out / "template.json", out)


def resnet_config(out: Path) -> Path:
    """Classy's ResNet-50 synthetic-image config from its model zoo, made small: 16/8 images of 32 px, batches of 4,
    10 classes, a per-step linear LR schedule (the template's is per epoch), gradient clipping."""
    import classy_vision

    root = Path(classy_vision.__file__).parent
    config = json.loads((root / "configs/resnet50_synthetic_image_classy_config.json").read_text())
    for phase, n in (("train", 16), ("test", 8)):
        config["dataset"][phase].update(crop_size=32, num_samples=n, batchsize_per_replica=4)
    config["model"]["heads"][0]["num_classes"] = 10
    config["meters"] = {"accuracy": {"topk": [1, 2]}}
    config["optimizer"]["param_schedulers"]["lr"] = {"name": "linear", "start_value": 0.1, "end_value": 0.01,
                                                     "update_interval": "step"}  # fmt: skip
    config["num_epochs"] = 3
    config["clip_grad_norm"] = 1.0
    return _write(config, out / "resnet.json", out)


def _write(config: dict[str, Any], path: Path, out: Path) -> Path:
    config.setdefault("hooks", []).append({"name": "run_recorder", "out": str(out / "recorded.pt")})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2))
    return path


def register() -> None:
    """Classy's template modules (as classy-project generates them) and the recorder hook, registered once."""
    import classy_vision
    from classy_vision.generic.distributed_util import get_rank
    from classy_vision.hooks import ClassyHook, register_hook

    # a classy-project folder: datasets/, losses/, models/ packages that classy_train.py imports from its folder
    sys.path.insert(0, str(Path(classy_vision.__file__).parent / "templates" / "synthetic"))
    for package in ("datasets", "losses", "models"):
        importlib.import_module(package)

    @register_hook("run_recorder")
    class RunRecorder(ClassyHook):
        """Saves, per phase end: counters, losses, LR and buffers (train), meter values, and the weights of test
        phases; and
        each step's loss as ``on_step`` sees it (this rank's, before Classy averages them over ranks at the phase
        end). ``out`` may name ``{rank}``."""

        on_start = ClassyHook._noop

        def __init__(self, out: str) -> None:
            super().__init__()
            self.out, self.phases, self.steps = out, [], []

        def on_phase_start(self, task: Any) -> None:
            self.steps = []

        def on_step(self, task: Any) -> None:
            self.steps.append(task.losses[-1])

        @classmethod
        def from_config(cls, config: dict[str, Any]) -> RunRecorder:
            return cls(config["out"])

        def on_phase_end(self, task: Any) -> None:
            record = {"type": task.phase_type, "phase_idx": task.phase_idx, "train_phase_idx": task.train_phase_idx,
                      "losses": list(task.losses), "meters": [m.value for m in task.meters],
                      "num_updates": task.num_updates, "step_losses": self.steps}  # fmt: skip
            if task.train:
                record["lr"] = task.optimizer.options_view.lr
                record["buffers"] = {k: v.detach().clone() for k, v in task.base_model.named_buffers()}
            else:
                record["weights"] = {k: v.detach().clone() for k, v in task.base_model.state_dict().items()}
            self.phases.append(record)

        def on_end(self, task: Any) -> None:
            state = {k: v.detach().clone() for k, v in task.base_model.state_dict().items()}
            torch.save({"phases": self.phases, "final": state}, self.out.format(rank=get_rank()))


def run_classy(config: Path, out: Path, flags: list[str]) -> dict[str, Any]:
    """``classy_train.py --config_file config flags`` (its ``main``, with its own parser)."""
    return _collect(out, lambda: run_classy_main(config, flags))


def run_classy_main(config: Path, flags: list[str]) -> None:
    """``classy_train.py``'s ``main(args, config)`` with ``args`` from its own parser."""
    from classy_vision.generic.opts import check_generic_args, get_parser

    spec = importlib.util.spec_from_file_location("classy_train", CLASSY_TRAIN)
    classy_train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(classy_train)
    args = check_generic_args(get_parser().parse_args(["--config_file", str(config), *flags]))
    classy_train.main(args, json.loads(config.read_text()))


def run_lightning(config: Path, out: Path, flags: list[str]) -> dict[str, Any]:
    """``lightning-hooks train config flags``."""
    from lightning_hooks.train import main

    return _collect(out, lambda: main([str(config), *flags]))


def _collect(out: Path, fn: Any) -> dict[str, Any]:
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    handler = Collect()
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.INFO)
    try:
        fn()
    finally:
        logging.getLogger().removeHandler(handler)
    recorded = torch.load(out / "recorded.pt", weights_only=False)
    checkpoints = {p.name: torch.load(p, weights_only=False) for p in (out / "ckpt").glob("*.torch")}
    metrics = (out / "ckpt" / "lightning_logs").glob("version_*/metrics.csv")
    return {**recorded, "log": lines, "checkpoints": checkpoints, "csv": [p.read_text() for p in metrics]}


def both(root: Path, name: str, make: Any, flags: list[str]) -> dict[str, Any]:
    runs = {}
    for side, run in (("classy", run_classy), ("lightning", run_lightning)):
        out = root / name / side
        config = make(out)
        args = ["--checkpoint_folder", str(out / "ckpt"), "--skip_tensorboard", *flags]
        if side == "lightning":
            args += ["--accelerator", "cpu"]
        runs[side] = run(config, out, args)
    return runs


def child_main(out: str) -> None:
    torch.set_num_threads(1)
    sys.path.insert(0, str(HERE))
    import real_torchvision

    real_torchvision.activate()
    import classy_vision.dataset.classy_dataset as classy_dataset

    classy_dataset.DEFAULT_NUM_WORKERS = 0
    register()
    root = Path(out)
    results: dict[str, Any] = {}
    for name, make, flags in (("template", template_config, ["--log_freq", "1"]),
                              ("resnet", resnet_config, ["--log_freq", "2"])):  # fmt: skip
        try:
            results[name] = both(root, name, make, flags)
        except Exception:  # noqa: BLE001  (reported by the scenario's test)
            results[name] = {"failed": traceback.format_exc()}
    torch.save(results, root / "results.pt")


def same(a: Any, b: Any) -> bool:
    """Whether two loaded states are equal: dicts, lists and tuples item by item, tensors with ``torch.equal``."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    return a == b
