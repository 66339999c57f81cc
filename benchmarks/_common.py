"""Shared helpers for the callback benchmarks: a ResNet-50-sized model and round-robin timing."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
from torch import nn


class Bottleneck(nn.Module):
    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = width * 4
        self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
        self.conv3, self.bn3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn1(self.conv1(x)).relu()
        out = self.bn2(self.conv2(out)).relu()
        out = self.bn3(self.conv3(out))
        return (out + (x if self.downsample is None else self.downsample(x))).relu()


def resnet50_like(num_classes: int = 1000) -> nn.Module:
    """torchvision's ResNet-50 layout from plain nn layers: 161 parameter tensors, 25,557,032 parameters."""
    layers: list[nn.Module] = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            layers.append(Bottleneck(cin, width, stride if i == 0 else 1))
            cin = width * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, num_classes)]
    return nn.Sequential(*layers)


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def round_robin(variants: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Each round takes one sample of every variant (in rotating order); returns the samples per variant."""
    samples: dict[str, list[float]] = {k: [] for k in variants}
    names = list(variants)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            samples[name].append(variants[name]())
    return samples


def median(xs: list[float]) -> float:
    return statistics.median(xs)


# --------------------------------------------------------------------------- hook-cost benchmarks (host vs adapter)
#: the per-host names every hook-cost benchmark uses: the host with its hooks and without ("bare": only what training
#: needs), Lightning with the family's adapter holding the same hooks, the adapter mounted with no legacy hooks but
#: those the bare host keeps ("adapter, no hooks": the adapter's own per-step bookkeeping, which the host's bare run
#: does in its own loop), Lightning without the adapter, and a plain PyTorch loop
HOOK_COST_HOSTS = ("host", "bare host", "lightning", "adapter, no hooks", "bare lightning", "plain loop")


def cpu_clock() -> float:
    """Process CPU time: all the work runs in this thread, and other tenants of a shared machine do not inflate it."""
    return time.process_time()


def hook_cost_rounds(
    cases: list[str], hosts: dict[str, Callable[[str, str, bool], float]], repeats: int, tmp: str
) -> dict[tuple[str, str], list[float]]:
    """Round-robin samples, in us per iteration, of ``hosts[name](case, work_dir, warm)`` for every case; one warm-up
    run each first; odd repeats run the hosts in reverse order, so no host always runs after the same one."""
    for case in cases:
        for name, run in hosts.items():
            run(case, f"{tmp}/warm-{name}-{case}", True)
    us: dict[tuple[str, str], list[float]] = {(c, h): [] for c in cases for h in hosts}
    for i in range(repeats):
        order = list(hosts.items()) if i % 2 == 0 else list(hosts.items())[::-1]
        for case in cases:
            for name, run in order:
                us[case, name].append(1e6 * run(case, f"{tmp}/{name}-{case}-{i}", False))
    return us


def hook_cost_report(title: str, host: str, adapter: str, cases: list[str],
                     us: dict[tuple[str, str], list[float]], target: float = 1.05,
                     bare_lightning: str = "Lightning") -> dict[str, tuple[float, float]]:
    """Print per case: it/s of the host and of Lightning + adapter with the hooks, and the per-step breakdown (medians
    over repeats of each repeat's difference), with two ratios over the hooks' cost under the host: the hooks' cost
    under Lightning + adapter counted from bare Lightning (the adapter's own bookkeeping charged to the hooks), and
    counted from the adapter with no hooks (the hooks' own cost under the adapter). Returns case -> both ratios."""
    repeats = len(next(iter(us.values())))
    print(f"{title}; torch threads: 1; {repeats} round-robin repeats; medians over repeats of each repeat's "
          "own difference")
    rows: dict[str, list[str]] = {}
    ratios: dict[str, tuple[float, float]] = {}
    host_hooks, with_bookkeeping, hooks_alone = (f"hooks under the {host}", f"hooks under Lightning + {adapter}",
                                                 f"hooks under {adapter}, its bookkeeping apart")  # fmt: skip
    breakdown = (
        ("plain PyTorch loop (model, loss, backward, SGD)", "plain loop", None),
        (f"{host} loop cost over the plain loop", "bare host", "plain loop"),
        (f"{bare_lightning} loop cost over the plain loop", "bare lightning", "plain loop"),
        (f"{adapter}'s own bookkeeping (no hooks) over {bare_lightning}", "adapter, no hooks", "bare lightning"),
        (host_hooks, "host", "bare host"),
        (with_bookkeeping, "lightning", "bare lightning"),
        (hooks_alone, "lightning", "adapter, no hooks"),
    )
    for case in cases:
        t = {name: us[case, name] for name in HOOK_COST_HOSTS}
        print(f"[{case}] {host}: {1e6 / median(t['host']):.1f} it/s; Lightning + {adapter}: "
              f"{1e6 / median(t['lightning']):.1f} it/s")
        values = {}
        for label, name, minus in breakdown:
            values[label] = median([a - b for a, b in zip(t[name], t[minus] if minus else [0.0] * repeats)])
            rows.setdefault(label, []).append(f"{values[label]:.0f}")
        ratios[case] = (values[with_bookkeeping] / values[host_hooks], values[hooks_alone] / values[host_hooks])
        rows.setdefault(f"hooks + adapter's bookkeeping / {host}'s hooks", []).append(f"{ratios[case][0]:.2f}")
        rows.setdefault(f"hooks under the adapter / {host}'s hooks (target <= {target})", []).append(
            f"{ratios[case][1]:.2f}")
    print("per-step breakdown, us/it:" + " " * 50 + "".join(f"{c:>11s}" for c in cases))
    for label, values_ in rows.items():
        print(f"  {label:74s}" + "".join(f"{v:>11s}" for v in values_))
    return ratios
