"""Lightning's own per-step cost under ``lightning-hooks train``'s Trainer settings, next to a bare Lightning loop.

Every family's train command builds its ``lightning.Trainer`` with ``logger=False``, ``enable_checkpointing=False``,
``enable_progress_bar=False``, ``enable_model_summary=False`` and ``num_sanity_val_steps=0`` (the legacy hooks log,
checkpoint and report; ``families/mmengine/train.py``, ``families/mmcv/lightning_runner.py``,
``families/classy/train.py``). This script trains the same tiny module (``Linear(32, 32)``, batch 8, MSE, SGD, 400
steps, single-threaded torch, no loader workers) round-robin in one process under:

* ``plain loop``: the same steps without Lightning (the floor);
* ``barebones``: ``Trainer(barebones=True)``, Lightning's least per-step work (it also refuses ``self.log``, which
  the commands' hooks need, so the commands cannot use it);
* ``lightning-hooks train``: the commands' settings above (MMEngine's: plus ``inference_mode=False``,
  ``use_distributed_sampler=False``);
* ``... + log_every_n_steps=0``: the one per-step setting barebones adds that the commands leave at its default;
* ``Lightning defaults``: ``Trainer()`` as a bare Lightning script has it (progress bar, CSV/TensorBoard logger,
  checkpointing, model summary); and each of these turned back on alone over the commands' settings;
* ``+ 1 callback (no hook)``: the commands' settings with one ``Callback()`` that overrides no hook: what each entry
  of ``trainer.callbacks`` costs per step by itself (Lightning calls every hook on every callback, through the
  profiler's context, whether or not the callback overrides it).

Per-step time is process CPU time between ``training_step`` calls 50 and 400 (start-up and the first steps excluded),
median over rounds, with each variant's difference from ``barebones`` in the same round.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/lightning_settings.py [--rounds 7] [--steps 400]
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/lightning_settings.py --calls [--steps 250]

The timing run takes ~3-5 minutes with the defaults on a quiet 2-core machine; ``--calls`` (~15 s of CPU) counts
the Python calls per step of each variant instead (cProfile from step 50 to the fit's end, so the last step's and
the fit's end's calls are spread over the steps), which load does not move, and lists the functions called more
per step under the commands' settings than under ``barebones``.

Round 17 (#35), ``--calls --steps 250`` (Lightning 2.6.6), calls per step and over barebones: plain loop 67.6;
barebones 1792.1; ``lightning-hooks train``'s settings 1801.6, +9.5 (``log_every_n_steps``' per-step check: the
trainer's ``training`` / ``_active_loop`` and enum comparisons; ``+ log_every_n_steps=0`` -2.5); turned back on
alone: progress bar +204.9, default logger +12.8, checkpointing +219.0, model summary +118.1 (not a per-step cost
of its own: ``ModelSummary`` is one more callback, and ``+ 1 callback (no hook)`` reads the same +118.1); Lightning's
defaults +547.4. So the commands' settings are barebones' loop plus ~10 calls a step, and every callback a command
puts in ``trainer.callbacks`` costs ~110 calls a step whether it acts per step or not
(``classy_train_vs_lightning.py --calls`` counts the Classy command's).

Measured (``--rounds 11 --steps 600``, torch 2.13 CPU, Lightning 2.6.6, the shared 2-core machine under a load
average of 15-16), us/step median and over barebones in the same round, median [range]: plain loop 317;
barebones 890; ``lightning-hooks train``'s settings 856, -9 [-164..+77] (barebones' cost within the noise);
+ ``log_every_n_steps=0`` +13; turned back on alone: progress bar +284 [-34..+475], default logger +84, checkpointing
+213 [+1..+327] (``ModelCheckpoint``'s per-batch checks), model summary +96 (a fit-start cost: noise here); Lightning's
defaults together 1244, +354 [+78..+855]. An earlier run (9 rounds of 400 steps) read +52 for the commands' settings
and +375 for the defaults. What remains is Lightning's own loop (~550 us/step over the plain loop on this tiny
step), which no Trainer option removes.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import lightning.pytorch as pl  # noqa: E402
import torch  # noqa: E402
from _common import median, round_robin  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

WARMUP = 50
#: the Trainer options every family's ``lightning-hooks train`` sets (MMEngine's: all of them)
COMMAND = dict(logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
               num_sanity_val_steps=0, inference_mode=False, use_distributed_sampler=False)  # fmt: skip
#: variant -> Trainer options (``None``: the plain loop)
VARIANTS: dict[str, dict[str, Any] | None] = {
    "plain loop": None,
    "barebones": dict(barebones=True),
    "lightning-hooks train": COMMAND,
    "  + log_every_n_steps=0": {**COMMAND, "log_every_n_steps": 0},
    "  + progress bar": {**COMMAND, "enable_progress_bar": True},
    "  + logger (default)": {**COMMAND, "logger": True},
    "  + checkpointing": {**COMMAND, "enable_checkpointing": True},
    "  + model summary": {**COMMAND, "enable_model_summary": True},
    "  + 1 callback (no hook)": {**COMMAND, "callbacks": [pl.Callback()]},
    "Lightning defaults": dict(num_sanity_val_steps=0),
}


class Tiny(pl.LightningModule):
    """``profiler``: a ``cProfile.Profile`` turned on at training step ``WARMUP`` (``--calls``)."""

    def __init__(self, profiler: Any = None) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layer = torch.nn.Linear(32, 32)
        self.stamps: list[float] = []
        self.profiler = profiler

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.stamps.append(time.process_time())
        if self.profiler is not None and len(self.stamps) == WARMUP + 1:
            self.profiler.enable()
        return torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1])

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


def step_time(stamps: list[float]) -> float:
    return (stamps[-1] - stamps[WARMUP]) / (len(stamps) - 1 - WARMUP)


def fit(model: Tiny, options: dict[str, Any] | None, data: DataLoader, steps: int, root: str) -> None:
    """``steps`` training steps of ``model`` under ``options`` (``None``: the plain loop)."""
    if options is None:
        opt = model.configure_optimizers()
        for _, batch in zip(range(steps), data):
            loss = model.training_step(batch, 0)
            opt.zero_grad()
            loss.backward()
            opt.step()
        return
    trainer = pl.Trainer(max_steps=steps, max_epochs=-1, accelerator="cpu", devices=1, limit_val_batches=0,
                         default_root_dir=tempfile.mkdtemp(dir=root), **options)  # fmt: skip
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        trainer.fit(model, data)


def run(options: dict[str, Any] | None, data: DataLoader, steps: int, root: str) -> float:
    """Seconds of CPU time per steady-state step under ``options`` (``None``: the plain loop)."""
    model = Tiny()
    fit(model, options, data, steps, root)
    return step_time(model.stamps)


def calls(data: DataLoader, steps: int, root: str) -> None:
    """Python calls per steady-state step of each variant (cProfile from step ``WARMUP`` to the fit's end; each
    variant's first and last steps' own calls are spread over the steps), and the functions the commands' Trainer
    calls per step that ``barebones`` does not."""
    import cProfile
    import pstats

    per: dict[str, dict[str, float]] = {}
    for name, options in VARIANTS.items():
        model = Tiny(cProfile.Profile())
        fit(model, options, data, steps, root)
        model.profiler.disable()
        stats = pstats.Stats(model.profiler).stats  # type: ignore[attr-defined]  # pstats keeps its table there
        per[name] = {f"{Path(f).name}:{line} {fn}": n / (steps - WARMUP) for (f, line, fn), (_, n, *_) in stats.items()}
    print(f"Linear(32, 32), batch 8, {steps} steps ({WARMUP} not counted): Python calls per step (load-independent)")
    for name, table in per.items():
        print(f"  {name:26s} {sum(table.values()):8.1f}   {sum(table.values()) - sum(per['barebones'].values()):+8.1f}")
    ours, bare = per["lightning-hooks train"], per["barebones"]
    diff = sorted(((ours.get(k, 0.0) - bare.get(k, 0.0), k) for k in ours.keys() | bare.keys()), reverse=True)
    print("  called more per step under lightning-hooks train's settings than under barebones:")
    for n, name in (item for item in diff if item[0] >= 0.5):
        print(f"    {n:+7.2f}  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--calls", action="store_true", help="count Python calls per step instead of timing")
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    os.environ.setdefault("TQDM_MININTERVAL", "0.1")
    data = DataLoader(TensorDataset(torch.randn(800, 32), torch.randn(800, 32)), batch_size=8)
    with tempfile.TemporaryDirectory() as root:
        if args.calls:
            calls(data, args.steps, root)
            return
        for options in VARIANTS.values():  # warm-up: imports, first-call caches
            run(options, data, WARMUP + 20, root)
        samples = round_robin({name: (lambda o=o: run(o, data, args.steps, root)) for name, o in VARIANTS.items()},
                              args.rounds)  # fmt: skip
    base = samples["barebones"]
    print(f"Linear(32, 32), batch 8, {args.steps} steps ({WARMUP} not timed), {args.rounds} rounds, torch threads 1; "
          "us/step (median [min-max]), and over barebones in the same round")  # fmt: skip
    for name, xs in samples.items():
        over = [1e6 * (x - b) for x, b in zip(xs, base)]
        us = [1e6 * x for x in xs]
        print(f"  {name:26s} {median(us):7.1f} [{min(us):6.1f}-{max(us):6.1f}]   {median(over):+7.1f} "
              f"[{min(over):+6.1f}..{max(over):+6.1f}]")  # fmt: skip


if __name__ == "__main__":
    main()
