"""Per-iteration train time of ``lightning-hooks train`` vs OpenMMLab's ``tools/train.py`` on a real shipped config.

The config is mmpretrain's ``resnet/resnet18_8xb16_cifar10.py`` (ResNet-18 for 32x32 images, its schedule and
default runtime: MultiStepLR, the default hooks with LoggerHook every 100 iterations), derived to train on generated
32x32 images (mmpretrain's CIFAR10 reads the real files) at batch 16, without validation, for ``--iters`` iterations
in one epoch, with a checkpoint at the end. ``--width`` scales the ResNet's channels (64: the shipped network).

Both hosts train from the same file, round-robin in one process with single-threaded torch: ``Runner.from_cfg(cfg)
.train()`` and ``lightning_hooks.families.mmengine.train.train(cfg)``. A highest-priority hook times ``before_train``
to ``after_train`` in process CPU time (``time.process_time``: the work runs in this thread, and CPU time is not
inflated by other tenants of a shared machine), so building the model and data is not counted. The report gives each
host's median ms per iteration and the median over rounds of the lightning/runner ratio (target: at most 1.02).

    PYTHONPATH=$PWD/scripts/vissl-site .venv/bin/python benchmarks/mmengine_train.py [--rounds 5] [--iters 20] [--width 16]

It needs no test helper: the generated data is ``benchmarks/_cifar_data.py``'s (mmpretrain imports the real
torchvision, which ``PYTHONPATH`` puts on the path).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
import _cifar_data  # noqa: E402  (registers BenchCifar in mmpretrain's DATASETS)
from mmengine.config import Config  # noqa: E402
from mmengine.hooks import Hook  # noqa: E402
from mmengine.registry import HOOKS  # noqa: E402
from mmengine.runner import Runner  # noqa: E402

from _common import median, round_robin  # noqa: E402
from lightning_hooks.families.mmengine.train import train  # noqa: E402

SHIPPED = _cifar_data.RESNET_CIFAR
SPANS: list[tuple[float, int]] = []


@HOOKS.register_module(force=True)
class TrainSpan(Hook):
    """Process CPU time from ``before_train`` to ``after_train`` and the iterations in between."""

    priority = 0

    def before_train(self, runner) -> None:
        self.start = time.process_time()

    def after_train(self, runner) -> None:
        SPANS.append((time.process_time() - self.start, runner.iter))


def config_file(directory: str, iters: int, width: int) -> str:
    path = os.path.join(directory, "resnet18_cifar_generated.py")
    with open(path, "w") as f:
        f.write(f"""_base_ = [{str(SHIPPED)!r}]
{_cifar_data.resnet_cifar(width=width, batch_size=16, n_train=16 * iters)}train_cfg = dict(max_epochs=1)
custom_hooks = [dict(type="TrainSpan")]
randomness = dict(seed=0)
log_level = "WARNING"
""")
    return path


def run(host: str, path: str, root: str) -> float:
    """Train once under ``host``; returns seconds of CPU time per iteration."""
    cfg = Config.fromfile(path)
    cfg.work_dir = tempfile.mkdtemp(dir=root)
    if host == "runner":
        runner = Runner.from_cfg(cfg)
        runner.train()
        visualizer = runner.visualizer
        type(visualizer)._instance_dict.pop(visualizer.instance_name, None)
    else:
        train(cfg)
    seconds, iters = SPANS.pop()
    return seconds / iters


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--width", type=int, default=16)
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    with tempfile.TemporaryDirectory() as root:
        path = config_file(root, args.iters, args.width)
        samples = round_robin({host: (lambda h=host: run(h, path, root)) for host in ("runner", "lightning")},
                              args.rounds)  # fmt: skip
    ratios = [lit / mm for lit, mm in zip(samples["lightning"], samples["runner"])]
    print(f"mmpretrain {SHIPPED.relative_to(SHIPPED.parents[2])} (width {args.width}, batch 16, {args.iters} iterations, "
          f"{args.rounds} rounds)")  # fmt: skip
    for host in ("runner", "lightning"):
        print(f"  {host:10s} {1000 * median(samples[host]):8.2f} ms/iter")
    print(f"  lightning/runner: {median(ratios):.3f} (target <= 1.02)")


if __name__ == "__main__":
    main()
