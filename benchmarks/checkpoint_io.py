"""AtomicCheckpointIO save time vs a plain ``torch.save`` of the same ResNet-50 checkpoint (~205 MB).

Object: ``{"state_dict": resnet50 state_dict, "optimizer_states": [SGD(momentum) state], ...}``. Variants,
round-robin, each overwriting its own existing file in one directory (``--dir``, default a new folder under
``/tmp``): plain ``torch.save(obj, path)``, ``AtomicCheckpointIO().save_checkpoint`` and Lightning's
``TorchCheckpointIO().save_checkpoint``. An untimed ``os.sync()`` precedes every sample so no variant inherits
another's dirty pages. Ratios are against the plain save of the same round.

    .venv/bin/python benchmarks/checkpoint_io.py [--quick] [--dir DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from _common import median, resnet50_like, round_robin, timed  # noqa: E402
from lightning.pytorch.plugins.io import TorchCheckpointIO  # noqa: E402

from lightning_hooks.callbacks import AtomicCheckpointIO  # noqa: E402


def checkpoint() -> dict:
    model = resnet50_like()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(2, 3, 64, 64)).sum().backward()
    opt.step()
    return {"epoch": 0, "global_step": 1, "state_dict": model.state_dict(), "optimizer_states": [opt.state_dict()]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="5 rounds instead of 9")
    parser.add_argument("--dir", help="directory to write into (default: a new folder under /tmp, removed after)")
    args = parser.parse_args()
    torch.set_num_threads(2)
    warnings.filterwarnings("ignore")
    rounds = 5 if args.quick else 9
    root = args.dir or tempfile.mkdtemp(prefix="ckpt_bench_", dir="/tmp")
    os.makedirs(root, exist_ok=True)
    obj = checkpoint()
    atomic, lightning_io = AtomicCheckpointIO(), TorchCheckpointIO()
    paths = {k: os.path.join(root, f"{k}.ckpt") for k in ("plain", "atomic", "lightning")}

    def sample(fn) -> float:  # noqa: ANN001
        os.sync()
        return timed(fn)

    variants = {
        "plain torch.save (overwrite)": lambda: sample(lambda: torch.save(obj, paths["plain"])),
        "lightning_hooks AtomicCheckpointIO": lambda: sample(lambda: atomic.save_checkpoint(obj, paths["atomic"])),
        "Lightning TorchCheckpointIO": lambda: sample(lambda: lightning_io.save_checkpoint(obj, paths["lightning"])),
    }
    try:
        for fn in variants.values():  # warm-up; also creates the files that later samples overwrite
            fn()
        size = os.path.getsize(paths["plain"])
        samples = round_robin(variants, rounds)
    finally:
        atomic.teardown()  # waits for its background removal of the replaced file
        if not args.dir:
            shutil.rmtree(root)
    print(f"checkpoint {size / 1e6:.1f} MB in {root}, {rounds} rounds")
    print(f"{'variant':36s} {'median ms':>10s} {'min ms':>8s} {'x plain':>8s}")
    for name, ts in samples.items():
        ratio = median([t / p for t, p in zip(ts, samples["plain torch.save (overwrite)"])])
        print(f"{name:36s} {median(ts) * 1e3:10.1f} {min(ts) * 1e3:8.1f} {ratio:8.2f}")


if __name__ == "__main__":
    main()
