"""PreciseBN cost relative to its floor: the forward passes alone.

Floor = ``num_batches`` ``torch.no_grad()`` train-mode forwards with no bookkeeping. Compared in the same run
(round-robin): this package's ``PreciseBN`` estimator and ``fvcore.nn.precise_bn.update_bn_stats``.
Model: 10 x (Conv3x3 + BatchNorm2d + ReLU), 16..128 channels, 3 max-pools; batches 32x3x32x32.

    .venv/bin/python benchmarks/precise_bn.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from _common import median, round_robin, timed  # noqa: E402
from fvcore.nn.precise_bn import update_bn_stats  # noqa: E402
from torch import nn  # noqa: E402

from lightning_hooks.callbacks import PreciseBN  # noqa: E402


def conv_bn_net() -> nn.Module:
    layers: list[nn.Module] = []
    cin = 3
    for i, cout in enumerate((16, 16, 32, 32, 64, 64, 96, 96, 128, 128)):
        layers += [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU()]
        if i in (1, 3, 5):
            layers.append(nn.MaxPool2d(2))
        cin = cout
    return nn.Sequential(*layers).train()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="30 batches x 5 rounds instead of 100 x 7")
    args = parser.parse_args()
    torch.set_num_threads(2)
    warnings.filterwarnings("ignore")
    num_batches, rounds = (30, 5) if args.quick else (100, 7)
    torch.manual_seed(0)
    model = conv_bn_net()
    batches = [torch.randn(32, 3, 32, 32) * 2 + 0.5 for _ in range(num_batches)]
    print(f"{num_batches} batches of 32x3x32x32, {sum(p.numel() for p in model.parameters()):,} params, "
          f"10 BN layers, {rounds} round-robin rounds, {torch.get_num_threads()} threads")

    @torch.no_grad()
    def floor() -> None:
        for x in batches:
            model(x)

    ours = PreciseBN(num_batches=num_batches)
    variants = {
        "floor (no_grad train-mode forwards)": lambda: timed(floor),
        "lightning_hooks PreciseBN": lambda: timed(lambda: ours.recompute_from(model, batches)),
        "fvcore update_bn_stats": lambda: timed(lambda: update_bn_stats(model, iter(batches), num_batches)),
    }
    for fn in variants.values():  # warm-up
        fn()
    samples = round_robin(variants, rounds)
    floor_name = next(iter(variants))
    print(f"{'variant':38s} {'median s':>9s} {'x floor':>8s} {'x fvcore':>9s}")
    for name, ts in samples.items():
        vs_floor = median([t / f for t, f in zip(ts, samples[floor_name])])
        vs_fvcore = median([t / f for t, f in zip(ts, samples["fvcore update_bn_stats"])])
        print(f"{name:38s} {median(ts):9.3f} {vs_floor:8.3f} {vs_fvcore:9.3f}")


if __name__ == "__main__":
    main()
