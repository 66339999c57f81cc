"""EMA update cost on a ResNet-50-sized parameter set, relative to the memory-bandwidth bound.

Bound per update = the time of ``ema.add_(weights)`` on the EMA's own flat buffers: the same 12 * N bytes (read
EMA + read weights + write EMA, fp32) on the same pages. On this VM the bandwidth differs between equally sized
buffers by up to 15% (the first large allocations of a process are the slowest), and it drifts over time by up to
1.8x; so the probe uses the update's own memory, runs before and after every sample, and each sample is divided by
the faster of its two neighbouring probes. Medians of these ratios are printed; the "add_ on fresh buffers" row shows
how far another pair of buffers of the same size is from the bound.
Compared in the same run: this package's ``EMA`` hook (driven as in ``trainer.fit``: ``on_fit_start`` flattens
the parameters into one buffer, which every variant then reads), the bare kernels, Lightning's
``EMAWeightAveraging`` (its ``on_train_batch_end`` update) and MMEngine's
``ExponentialMovingAverage.update_parameters``.

    .venv/bin/python benchmarks/ema.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import lightning.pytorch as pl  # noqa: E402
import torch  # noqa: E402
from _common import median, resnet50_like, timed  # noqa: E402
from lightning.pytorch.callbacks import EMAWeightAveraging, WeightAveraging  # noqa: E402
from mmengine.model import ExponentialMovingAverage  # noqa: E402
from torch.optim.swa_utils import get_ema_multi_avg_fn  # noqa: E402

from lightning_hooks.callbacks import EMA  # noqa: E402

STEPS_PER_SAMPLE = 3


class Wrapped(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.model = resnet50_like()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    args = parser.parse_args()
    torch.set_num_threads(2)
    warnings.filterwarnings("ignore")
    rounds = 7 if args.quick else 15

    module = Wrapped()
    ours = EMA(decay=0.999)
    ours_trainer = SimpleNamespace(global_step=0)
    ours.on_fit_start(ours_trainer, module)  # as in trainer.fit: flattens the parameters (all variants see them)
    ours.on_train_start(ours_trainer, module)
    params = list(module.parameters())
    n = sum(p.numel() for p in params)
    print(f"parameter set: {len(params)} tensors, N = {n:,} fp32 params; {rounds} round-robin rounds, "
          f"{STEPS_PER_SAMPLE} updates per sample, torch {torch.__version__}, {torch.get_num_threads()} threads")

    def ours_update() -> None:
        ours_trainer.global_step += 1
        ours.on_train_batch_end(ours_trainer, module, None, None, 0)

    def lightning_hook(cb: WeightAveraging):  # noqa: ANN202
        trainer = SimpleNamespace(global_step=0)
        cb.setup(trainer, module, "fit")

        def update() -> None:
            trainer.global_step += 1
            cb.on_train_batch_end(trainer, module, None, None, 0)

        return update

    lightning_update = lightning_hook(EMAWeightAveraging(decay=0.999))
    # not Lightning's EMA class, but the best a user can get from WeightAveraging: torch's foreach EMA function
    lightning_multi_update = lightning_hook(WeightAveraging(multi_avg_fn=get_ema_multi_avg_fn(0.999)))

    mmengine_ema = ExponentialMovingAverage(module, momentum=0.001)

    def mmengine_update() -> None:
        mmengine_ema.update_parameters(module)

    for fn in (ours_update, lightning_update, lightning_multi_update, mmengine_update):  # warm-up; the first update of each is a copy
        for _ in range(3):
            fn()

    (group,) = ours._groups  # one fp32 CPU group: the flat EMA and the flat weights (the values do not matter here)

    def probe() -> float:
        return timed(lambda: group.flat_ema.add_(group.flat_live))

    def per_step(fn):  # noqa: ANN001, ANN202 - one sample = mean time of STEPS_PER_SAMPLE consecutive updates
        return lambda: timed(lambda: [fn() for _ in range(STEPS_PER_SAMPLE)]) / STEPS_PER_SAMPLE

    raw_ema, raw_src = [p.detach().clone() for p in params], [p.detach() for p in params]

    def raw_update() -> None:  # the kernel alone, no callback logic: shows the callback's own overhead
        torch._foreach_lerp_(raw_ema, raw_src, 0.001)

    raw_flat_ema, raw_flat_src = (torch.cat([p.detach().reshape(-1) for p in params]) for _ in range(2))

    def raw_flat_update() -> None:
        raw_flat_ema.lerp_(raw_flat_src, 0.001)

    fresh_a, fresh_b = torch.randn(n), torch.randn(n)

    variants = {
        "lightning_hooks EMA (flat lerp)": per_step(ours_update),
        "add_ on fresh buffers of the same size": per_step(lambda: fresh_a.add_(fresh_b)),
        "raw lerp_ over one flat buffer": per_step(raw_flat_update),
        "raw torch._foreach_lerp_ (cached lists)": per_step(raw_update),
        "Lightning EMAWeightAveraging": per_step(lightning_update),
        "Lightning WeightAveraging(multi_avg_fn)": per_step(lightning_multi_update),
        "MMEngine ExponentialMovingAverage": per_step(mmengine_update),
    }
    names = list(variants)
    ratios: dict[str, list[float]] = {k: [] for k in names}
    times: dict[str, list[float]] = {k: [] for k in names}
    bounds = [probe()]
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            t = variants[name]()
            bounds.append(probe())
            times[name].append(t)
            ratios[name].append(t / min(bounds[-2:]))

    print(f"{'variant':42s} {'median ms':>10s} {'x bound':>8s}")
    print(f"{'bound (add_ on the EMA buffers)':42s} {median(bounds) * 1e3:10.2f} {1.0:8.2f}")
    for name in names:
        print(f"{name:42s} {median(times[name]) * 1e3:10.2f} {median(ratios[name]):8.2f}")
    print(f"add_ bandwidth (median of the probes): {12 * n / median(bounds) / 1e9:.1f} GB/s")

if __name__ == "__main__":
    main()
