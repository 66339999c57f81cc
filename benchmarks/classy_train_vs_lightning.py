"""Per-step train time of ``lightning-hooks train TASK.json`` vs Classy's own ``classy_train.py`` on the same config.

Both run the same JSON config in one process (single-threaded torch, data loaded in the process: Classy's
``DEFAULT_NUM_WORKERS`` set to 0), alternating, with ``classy_train.py``'s default hooks (LossLrMeterLoggingHook,
ModelComplexityHook, CheckpointHook; ``--skip_tensorboard``). A timing hook in the config (``step_timer``, the same
object type on both sides) measures each train phase from ``on_phase_start`` to ``on_phase_end`` in process CPU time
and divides by its steps; the first train phase of each run is dropped (warm-up).

Cases (the configs of tests/helpers/classy_train_runs.py, larger):

* ``template``: Classy's synthetic template config (its ``my_model``: pooling + one linear layer), 256 images of
  32 px, batch 32: a step is a few milliseconds, so the loops' fixed per-step cost shows.
* ``resnet``: Classy's ResNet-50 model-zoo config on 32 px images, batch 8.

The report gives each side's median ms/step and the median over repeats of each repeat's lightning/classy ratio
(target: at most 1.1). Measured on the shared 2-core machine (torch 2.13 CPU, Lightning 2.6.6): template 13.5 vs
14.2 ms/step, ratio 1.06 (5 repeats: 1.02-1.09); resnet 285 vs 277 ms/step, ratio 0.98 (3 repeats). Needs the real
torchvision (``bash scripts/setup.sh test``)::

    python benchmarks/classy_train_vs_lightning.py [--repeats 5] [--cases template resnet]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "helpers")]

#: Per train phase (after the first): CPU seconds per step, appended by the ``step_timer`` hook.
SAMPLES: list[float] = []


def register_timer() -> None:
    from classy_vision.hooks import ClassyHook, register_hook

    @register_hook("step_timer")
    class StepTimer(ClassyHook):
        on_start = on_step = on_end = ClassyHook._noop

        def __init__(self) -> None:
            super().__init__()
            self.started = 0.0

        @classmethod
        def from_config(cls, config: dict[str, Any]) -> StepTimer:
            return cls()

        def on_phase_start(self, task: Any) -> None:
            self.started = time.process_time()

        def on_phase_end(self, task: Any) -> None:
            if task.train and task.train_phase_idx > 0:
                SAMPLES.append((time.process_time() - self.started) / task.num_batches_per_phase)


def config(case: str, out: Path) -> Path:
    import classy_train_runs as runs

    path = (runs.template_config if case == "template" else runs.resnet_config)(out)
    data = json.loads(path.read_text())
    data["hooks"] = [{"name": "step_timer"}]
    data["num_epochs"] = 4
    train = data["dataset"]["train"]
    train.update(num_samples=256, batchsize_per_replica=32) if case == "template" else train.update(
        num_samples=64, batchsize_per_replica=8)
    path.write_text(json.dumps(data))
    return path


def one_run(side: str, case: str, root: Path, index: int) -> float:
    """Median CPU seconds per step of one run."""
    import classy_train_runs as runs

    out = root / f"{case}-{side}-{index}"
    path = config(case, out)
    flags = ["--checkpoint_folder", str(out / "ckpt"), "--skip_tensorboard", "--log_freq", "1000"]
    SAMPLES.clear()
    if side == "classy":
        runs.run_classy_main(path, flags)
    else:
        from lightning_hooks.train import main

        main([str(path), *flags, "--accelerator", "cpu"])
    return statistics.median(SAMPLES)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cases", nargs="+", default=["template", "resnet"])
    args = parser.parse_args()
    import logging

    import real_torchvision
    import torch

    torch.set_num_threads(1)
    real_torchvision.activate()
    import classy_vision.dataset.classy_dataset as classy_dataset

    import classy_train_runs as runs

    classy_dataset.DEFAULT_NUM_WORKERS = 0
    runs.register()
    register_timer()
    logging.getLogger().setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        # the template's my_dataset / my_model / my_loss: a classy-project folder, imported as classy_train.py does
        runs.import_project_as_classy_train(runs.make_project(Path(tmp)))
        for case in args.cases:
            times: dict[str, list[float]] = {"classy": [], "lightning": []}
            for r in range(args.repeats):
                for side in ("classy", "lightning") if r % 2 == 0 else ("lightning", "classy"):
                    times[side].append(one_run(side, case, Path(tmp), r))
            ratios = [ours / theirs for ours, theirs in zip(times["lightning"], times["classy"])]
            print(f"{case}: classy_train.py {1e3 * statistics.median(times['classy']):.2f} ms/step, "
                  f"lightning-hooks train {1e3 * statistics.median(times['lightning']):.2f} ms/step, "
                  f"ratio {statistics.median(ratios):.3f} (per repeat: {', '.join(f'{x:.3f}' for x in ratios)})")


if __name__ == "__main__":
    main()
