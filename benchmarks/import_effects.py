"""Whether importing Lightning and ``lightning_hooks`` slows a training step that uses neither, in one process: the
same mmdet 2.x ResNet-18 + FPN forward/backward/SGD step (RetinaNet's backbone and neck as
``benchmarks/train_commands.py``'s ``mmdet2-retinanet`` case builds them: 8 base channels, 2x3x64x64 inputs) timed
after each stage of imports, with the process settings that could move it recorded at each stage. Runs in
``.venv-mmcv1`` (about 30 s a process on the 2-core VM at load 12; the default 5 processes of each of 4 kinds: ~10-15
minutes)::

    OMP_NUM_THREADS=1 .venv-mmcv1/bin/python benchmarks/import_effects.py [--processes 5] [--steps 40]
        [--kinds imports control "other imports" ballast bisect] [--envs - GLIBC_TUNABLES=glibc.malloc.hugetlb=1]

``--callgrind [CACHE ...]`` counts instead of timing, which load does not move: the same step in two processes
under valgrind's callgrind with its cache simulation, one with the host's imports only, one with Lightning's and the
1.x command's modules imported before the step is built (as the command builds its model after its imports);
instructions and simulated cache misses per step of ``--steps`` steps (after 3 not counted), and the functions whose
first-level data misses changed most. ~5-7 minutes with ``--steps 10`` (valgrind runs the imports ~50x slower, the
steps ~100x); ``CACHE`` is valgrind's ``--D1=size,assoc,line`` / ``--LL=...`` (default: the host's caches)::

    OMP_NUM_THREADS=1 .venv-mmcv1/bin/python benchmarks/import_effects.py --callgrind --steps 10
    OMP_NUM_THREADS=1 .venv-mmcv1/bin/python benchmarks/import_effects.py --callgrind --D1=32768,8,64 --LL=524288,8,64 --steps 10
    LD_PRELOAD=/path/to/libjemalloc.so.2 OMP_NUM_THREADS=1 .venv-mmcv1/bin/python benchmarks/import_effects.py --callgrind --steps 10

Kinds of process, each importing in stages: ``imports``: the host's imports (torch, mmcv, mmdet), then
``lightning.pytorch``, then ``lightning_hooks.cli`` and the 1.x train command's modules
(``lightning_hooks.families.mmcv.train``), then mlflow and tensorboard (loggers the command may load); ``control``:
the same stages importing nothing new (drift within a process); ``other imports``: pandas, then scipy.stats and
networkx, then sympy and matplotlib.pyplot (imports of Lightning's size that are not Lightning's); ``ballast``: 50 MiB
of small Python objects a stage (the heap's size alone); ``bisect``: torchmetrics, lightning.fabric, lightning.pytorch.
``--envs`` runs every kind again under each environment given. Per stage, steps alternate in blocks of 5 between the
garbage collector on (as in a run) and off; each step's thread CPU time is taken, and the collector's own time
(``gc.callbacks``) and collections per step are counted. The report gives each stage's median step over the first
stage's (medians over processes) with the collector and without, each stage's page faults and context switches per
step and glibc malloc's heap / mmapped blocks after it (``_train_child.process_counters``: counts load does not
move), and the settings that differ from the first stage's.

Round 9 (#35; the train command read 1.13-1.28 of ``tools/train.py`` on mmdet 2.x RetinaNet, and ``tools/train.py``
itself 0.78-1.21 of itself in a process that had imported Lightning). Settings, the same before and after
``lightning.pytorch`` and the command's imports: torch intra-op (1) and inter-op threads, oneDNN on, denormals not
flushed, float32 matmul precision, deterministic algorithms, grad / inference mode / anomaly detection, the autograd
profiler, torch function and dispatch modes, the dispatch TLS include and exclude sets, the default dtype,
``sys.gettrace`` / ``getprofile``, the switch interval, the collector's thresholds and freeze count, Python and OS
threads (one each), the OMP / KMP / MALLOC_ARENA_MAX variables; besides, in one process: the dispatch tables of
``aten::convolution``, ``convolution_backward``, ``native_batch_norm``, ``add_``, ``mul``, ``relu`` and others, every
zero-argument ``torch._C._get_*`` / ``_is_*`` / ``_are_*`` getter and ``torch.backends.{mkldnn,cpu,mkl,openmp,...}``
flag (85), global module forward / backward hooks, global optimizer step hooks, ``nn.Module.__call__``,
``Tensor.backward`` and ``F.conv2d`` (not replaced), warnings per step (none). What changes: the heap (+50k tracked
objects, +42 MiB RSS, +220 memory maps for Lightning; +75k, +57 MiB with the command's modules), the warnings
filters (15 -> 18), and ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` in the environment (CUDA checks only). The collector never
ran inside a step (0 collections, 0 us per step in every stage), and the ratios are the same with it off.

Step time after ``lightning.pytorch`` over the host's stage, gc on (each run 3-4 processes a kind, load 12-30): 1.04,
1.21, 1.12 (after torchmetrics 1.07 and lightning.fabric 1.12, ``bisect``), 0.96, 0.98, and 1.14 with
``GLIBC_TUNABLES=glibc.malloc.hugetlb=1`` in the same run as that 0.98 (0.96 in an earlier run with it); ``control``'s
second stage 0.98, 1.01, 0.95, 1.02, 1.00, 1.04; ``other imports`` (one run) 1.06 after pandas, 1.03 after scipy.stats
and networkx; ``ballast`` 0.95, 0.91, 0.91 after 50, 100, 150 MiB. So Lightning's imports move this step by 0-20%
(median ~1.08 over six runs) where the control moves by -5..+4%, with no setting changed, no collector time, and not by
the heap's size alone; huge pages for malloc do not take it away. What does is not found on this VM (no hardware
counters; at this load single processes move by 10-20%): run it on a quiet machine before reading a cause into it.

Round 17 (#35), the counters (``--processes 2 --steps 20 --kinds imports control``, ~3.5 minutes at load 7, medians
over processes): minor page faults per step 2.8 at the host's stage, 14.0 after ``lightning.pytorch`` (its first
steps touch heap pages the import left), 0.0 after the command's modules, 16.5 after mlflow/tensorboard; the control
1.0-3.9; no major faults, no voluntary switches, in any stage. malloc's heap 146 -> 165 -> 168 -> 188 MB (the control
146 throughout); 6 mmapped blocks of 6.08 MB in every stage of both kinds but the last (9.9 MB after tensorboard).
At ~1 us a fault, even the 14 faults are ~0.1% of the ~11 ms step, and no big block is re-mapped per step: the
slowdown (1.14 after ``lightning.pytorch`` with the collector on, 0.98 off in this run: within this load's spread)
is not page faults, malloc's mmap churn, threads or switches. Times here are load-bound; the counts are not.

Round 17 (#35), ``--callgrind --steps 10``, two runs (per step, host -> + Lightning and the command): instructions
42.40M -> 42.18M and 42.36M -> 42.26M (the same code runs), first-level data misses 873K -> 883K (+1.1%) and
872K -> 874K (+0.3%), the largest changes in glibc malloc's own functions both times (``_int_malloc`` +2.7K / +1.5K,
``malloc_consolidate`` +2.1K / +1.4K, ``_int_memalign`` +1.1K / +0.8K); with a 512 KiB 8-way second level
(``--D1=32768,8,64 --LL=524288,8,64``) its misses +0.6% / +0.8%, again led by ``_int_malloc`` and
``malloc_consolidate``. glibc's malloc and free are a third of the step's instructions (13.9M of 42.4M: torch
allocates every tensor and oneDNN descriptor through them), and they miss a little more in the larger heap the
imports leave: the bins hold 702 free chunks after the host's imports, 1999 after ``lightning.pytorch``, 2248 after
``pytorch_lightning``, 2556 after the 1.x command's modules (natively, ``mallinfo2().ordblks``; ``malloc_trim(0)``
leaves them). With jemalloc preloaded in both processes the simulated difference goes (instructions 33.18M ->
33.12M, data misses 760K -> 760K) and the step runs 22% fewer instructions (malloc/free 5.1M instead of 13.9M).
But the simulated difference (+0.3-1.1% of the data misses, ~0.5% of the step at most) is far smaller than the
3-9% timed, and timed with jemalloc in both processes (``train_commands.py --case mmdet2-retinanet --rounds 3
--iters 30 --env LD_PRELOAD=.../libjemalloc.so.2``, load 4-9) the ratio read 1.151 [0.977-1.299] against 1.069
[0.958-1.446] without it in the same session (both commands faster with it: 20.5 vs 22.4 ms/it and 23.5 vs 24.9).
So malloc's heap state is the only difference the counts find, and it is not shown to be the cause: what callgrind
does not model (TLB, the real caches' geometry, physical page placement, branch predictors) is left, and this VM
exposes no hardware counter to count it. Under valgrind, glibc's heap cannot grow by ``brk`` past valgrind's limit
and goes on in mmapped pieces, so the simulated layout is not the native one either.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
#: per kind of process, its stages: (label, modules imported at the stage; "ballast" keeps that many MiB of Python
#: objects instead)
KINDS: dict[str, list[tuple[str, tuple[str, ...]]]] = {
    "imports": [("host (torch, mmcv, mmdet)", ()), ("+ lightning.pytorch", ("lightning.pytorch",)),
                ("+ lightning_hooks.cli, families.mmcv.train",
                 ("lightning_hooks.cli", "lightning_hooks.families.mmcv.train")),
                ("+ mlflow, tensorboard", ("mlflow", "torch.utils.tensorboard"))],
    "bisect": [("host", ()), ("+ torchmetrics", ("torchmetrics",)), ("+ lightning.fabric", ("lightning.fabric",)),
               ("+ lightning.pytorch", ("lightning.pytorch",))],
    "control": [("host", ()), ("+ nothing", ()), ("+ nothing", ()), ("+ nothing", ())],
    "other imports": [("host", ()), ("+ pandas", ("pandas",)), ("+ scipy.stats, networkx", ("scipy.stats", "networkx")),
                      ("+ sympy, matplotlib.pyplot", ("sympy", "matplotlib.pyplot"))],
    "ballast": [("host", ()), ("+ 50 MiB of Python objects", ("ballast",)), ("+ 50 MiB more", ("ballast",)),
                ("+ 50 MiB more", ("ballast",))],
}
BALLAST: list[object] = []
#: the counters (``_train_child.process_counters``) whose change per step each stage reports: page faults, context
#: switches; load does not move them
COUNTED = ("minflt", "majflt", "nvcsw", "nivcsw")


def settings() -> dict[str, Any]:
    """What an import could change that moves a step's time, as text per name."""
    import torch

    tiny = torch.tensor([1e-40], dtype=torch.float32)
    values = {
        "torch threads / inter-op": (torch.get_num_threads(), torch.get_num_interop_threads()),
        "mkldnn enabled": torch.backends.mkldnn.enabled,
        "flush denormal (1e-40 * 1 == 0)": bool((tiny * 1 == 0).item()),
        "float32 matmul precision": torch.get_float32_matmul_precision(),
        "deterministic algorithms": torch.are_deterministic_algorithms_enabled(),
        "grad / inference mode / anomaly": (torch.is_grad_enabled(), torch.is_inference_mode_enabled(),
                                            torch.is_anomaly_enabled()),
        "autograd profiler on": torch.autograd.profiler._is_profiler_enabled,
        "torch function / dispatch modes": (torch._C._len_torch_function_stack(),
                                            len(torch.utils._python_dispatch._get_current_dispatch_mode_stack())),
        "dispatch TLS include / exclude": (str(torch._C._dispatch_tls_local_include_set()),
                                           str(torch._C._dispatch_tls_local_exclude_set())),
        "default dtype": torch.get_default_dtype(),
        "sys trace / profile": (sys.gettrace(), sys.getprofile()),
        "switch interval": sys.getswitchinterval(),
        "gc enabled / thresholds / frozen": (gc.isenabled(), gc.get_threshold(), gc.get_freeze_count()),
        "gc tracked objects": len(gc.get_objects()),
        "threads": sorted(t.name for t in threading.enumerate()),
        "OS threads": len(os.listdir("/proc/self/task")),
        "warnings filters": len(warnings.filters),
        "MALLOC_ARENA_MAX / OMP / KMP env": tuple(os.environ.get(k) for k in ("MALLOC_ARENA_MAX", "OMP_NUM_THREADS",
                                                                              "KMP_AFFINITY", "KMP_BLOCKTIME")),
        "memory maps": len(Path("/proc/self/maps").read_text().splitlines()),
        "RSS MiB": round(_rss_mib()),
        "modules": len(sys.modules),
    }
    return {k: str(v) for k, v in values.items()}


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:"))


def build_step() -> Any:
    """mmdet 2.x RetinaNet's ResNet-18 + FPN (8 base channels) with SGD: one training step on fixed inputs."""
    import torch
    from mmdet.models import build_backbone, build_neck

    torch.manual_seed(0)
    backbone = build_backbone(dict(type="ResNet", depth=18, num_stages=4, out_indices=(0, 1, 2, 3),
                                   frozen_stages=1, norm_cfg=dict(type="BN", requires_grad=True), norm_eval=True,
                                   style="pytorch", base_channels=8))  # fmt: skip
    neck = build_neck(dict(type="FPN", in_channels=[8, 16, 32, 64], out_channels=16, start_level=1,
                           add_extra_convs="on_input", num_outs=5))  # fmt: skip
    model = torch.nn.ModuleList([backbone, neck]).train()
    backbone.train()  # norm_eval: BatchNorm layers stay in eval mode, as in the config
    inputs = torch.randn(2, 3, 64, 64)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)

    def step() -> None:
        loss = sum(level.square().mean() for level in neck(backbone(inputs)))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return step


class GcTime:
    """Nanoseconds the collector took and collections per generation, from ``gc.callbacks``."""

    def __init__(self) -> None:
        self.ns, self.runs, self._start = 0, [0, 0, 0], 0
        gc.callbacks.append(self)

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.thread_time_ns()
        else:
            self.ns += time.thread_time_ns() - self._start
            self.runs[info["generation"]] += 1


def time_stage(step: Any, steps: int, collector: GcTime) -> dict[str, float]:
    """Median thread CPU us per step with the collector on and off (blocks of 5, alternating), and the collector's
    us and full collections per step while on."""
    from _train_child import process_counters

    on: list[float] = []
    off: list[float] = []
    ns0, full0 = collector.ns, collector.runs[2]
    before = process_counters()
    for block in range(steps // 5):
        enabled = block % 2 == 0
        (gc.enable if enabled else gc.disable)()
        for _ in range(5):
            start = time.thread_time_ns()
            step()
            (on if enabled else off).append((time.thread_time_ns() - start) / 1e3)
    gc.enable()
    after = process_counters()
    per_step = {f"{name}/step": (after[name] - before[name]) / (len(on) + len(off)) for name in COUNTED}
    return {"gc on": statistics.median(on), "gc off": statistics.median(off),
            "gc us/step": (collector.ns - ns0) / 1e3 / max(len(on), 1),
            "full collections/step": (collector.runs[2] - full0) / max(len(on), 1),
            **per_step, **{name: after[name] for name in ("arena", "hblks", "hblkhd") if name in after}}  # fmt: skip


def child(kind: str, steps: int) -> None:
    """One process of ``kind``: its stages in order, JSON per stage on stdout."""
    sys.path.insert(0, str(HERE))
    import torch
    from _train_child import import_library

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    import_library("mmdet")
    step = build_step()
    collector = GcTime()
    for _ in range(5):
        step()
    out = []
    for _, modules in KINDS[kind]:
        for name in modules:
            if name == "ballast":  # ~50 MiB in small dicts and lists, as imported modules hold theirs
                BALLAST.extend({"k": [i, str(i)], "v": (i, float(i))} for i in range(120_000))
            else:
                importlib.import_module(name)
        out.append({"times": time_stage(step, steps, collector), "settings": settings()})
    print(json.dumps(out))


#: ``--callgrind``: the modules imported before the step is built, per side (the 1.x command's, or none)
CALLGRIND_SIDES = {"host": (), "+ lightning and the command": ("lightning.pytorch", "lightning_hooks.cli",
                                                               "lightning_hooks.families.mmcv.train")}  # fmt: skip
#: callgrind's events, in the order its output files give them
EVENTS = ("Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw")


def callgrind_child(side: str, steps: int) -> None:
    """Under ``valgrind --tool=callgrind --instr-atstart=no``: the side's imports, then the step built (as the command
    builds its model after its imports), 3 steps, instrumentation on and the counts zeroed (``callgrind_control``,
    waited for in a busy loop: callgrind reads its commands while the program runs), ``steps`` steps, and exit: the
    dump at exit holds the ``steps`` steps only."""
    sys.path.insert(0, str(HERE))
    import torch
    from _train_child import import_library

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    import_library("mmdet")
    for name in CALLGRIND_SIDES[side]:
        importlib.import_module(name)
    step = build_step()
    for _ in range(3):
        step()
    for command in ("--instr=on", "--zero"):
        control = subprocess.Popen(["callgrind_control", command, str(os.getpid())], stdout=subprocess.DEVNULL)
        while control.poll() is None:
            pass
    for _ in range(steps):
        step()
    os._exit(0)


def callgrind_totals(path: Path) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """The run's totals per event, and per function (``callgrind_annotate``'s exclusive counts; code addresses of
    generated code folded into one name)."""
    import re

    text = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=100", str(path)], check=True,
                          capture_output=True, text=True).stdout  # fmt: skip
    functions: dict[str, dict[str, int]] = {}
    for line in text.split("file:function", 1)[1].splitlines()[2:]:
        fields = re.sub(r"\(\s*[\d.]+%\)", " ", line).split()
        if len(fields) <= len(EVENTS) or not re.fullmatch(r"[\d,]+|\.", fields[0]):
            continue
        counts = [0 if f == "." else int(f.replace(",", "")) for f in fields[: len(EVENTS)]]
        name = re.sub(r"0x[0-9a-f]+", "0x..", " ".join(fields[len(EVENTS) :]))
        row = functions.setdefault(name, dict.fromkeys(EVENTS, 0))
        for event, count in zip(EVENTS, counts):
            row[event] += count
    totals = {event: sum(row[event] for row in functions.values()) for event in EVENTS}
    return totals, functions


def callgrind(steps: int, cache: list[str]) -> None:
    """Both sides' ``steps`` steps under callgrind's cache simulation (``cache``: valgrind's ``--D1=``/``--LL=``
    options), one after the other: instructions and simulated cache misses per step, which load does not move, and
    the functions whose first-level data misses differ most."""
    import tempfile

    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for side in CALLGRIND_SIDES:
            out = Path(tmp) / f"{len(runs)}.out"
            env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
            subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no", "--cache-sim=yes", *cache,
                            f"--callgrind-out-file={out}", sys.executable, __file__, "--callgrind-child", side,
                            "--steps", str(steps)], env=env, check=True, capture_output=True)  # fmt: skip
            runs[side] = callgrind_totals(out)
    caches = " ".join(cache) or "valgrind's default (the host's)"
    print(f"callgrind, {steps} steps a side, cache {caches}: per step")
    print("  " + " ".join(f"{event:>12s}" for event in EVENTS) + "  side")
    for side, (totals, _) in runs.items():
        print("  " + " ".join(f"{totals[e] / steps:12.0f}" for e in EVENTS) + f"  {side}")
    (_, before), (_, after) = runs.values()
    misses = {name: sum(after.get(name, {}).get(e, 0) - before.get(name, {}).get(e, 0) for e in ("D1mr", "D1mw"))
              for name in before.keys() | after.keys()}  # fmt: skip
    print("  first-level data misses per step, most changed (after - before):")
    for name in sorted(misses, key=lambda n: -abs(misses[n]))[:8]:
        print(f"    {misses[name] / steps:+9.0f}  {name[:110]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=5)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--kinds", nargs="+", choices=list(KINDS), default=["imports", "control", "other imports",
                                                                            "ballast"])
    parser.add_argument("--envs", nargs="+", default=["-"], help="each kind runs under each: NAME=VALUE, or - (none)")
    parser.add_argument("--child", choices=list(KINDS))
    parser.add_argument("--callgrind", nargs="*", metavar="CACHE", default=None,
                        help="count instructions and simulated cache misses per step under valgrind instead of "
                             "timing; CACHE: valgrind's --D1=... --LL=... (default: the host's caches)")  # fmt: skip
    parser.add_argument("--callgrind-child", choices=list(CALLGRIND_SIDES))
    args = parser.parse_args()
    if args.callgrind_child:
        callgrind_child(args.callgrind_child, args.steps)
        return
    if args.callgrind is not None:
        callgrind(args.steps, args.callgrind)
        return
    if args.child:
        child(args.child, args.steps)
        return
    runs: dict[tuple[str, str], list[list[dict[str, Any]]]] = {(k, e): [] for k in args.kinds for e in args.envs}
    for i in range(args.processes):
        for kind, extra in list(runs) if i % 2 == 0 else list(runs)[::-1]:
            env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
            if extra != "-":
                name, value = extra.split("=", 1)
                env[name] = value
            cmd = [sys.executable, __file__, "--child", kind, "--steps", str(args.steps)]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            runs[kind, extra].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"{args.processes} processes each, {args.steps} steps per stage (half with the collector off), 1 thread; "
          "medians over processes of each process's stage / first stage")  # fmt: skip
    for (kind, extra), results in runs.items():
        print(f"[{kind}{'' if extra == '-' else ', ' + extra}]   gc on   gc off   gc us/step   full gc/step   "
              "step us (gc on)")
        for i, (stage, _) in enumerate(KINDS[kind]):
            ratio = {k: statistics.median(r[i]["times"][k] / r[0]["times"][k] for r in results)
                     for k in ("gc on", "gc off")}  # fmt: skip
            gc_us = statistics.median(r[i]["times"]["gc us/step"] for r in results)
            full = statistics.median(r[i]["times"]["full collections/step"] for r in results)
            step_us = statistics.median(r[i]["times"]["gc on"] for r in results)
            print(f"  {stage:50s} {ratio['gc on']:6.3f} {ratio['gc off']:8.3f} {gc_us:12.1f} {full:14.3f} "
                  f"{step_us:17.0f}")
        for i, (stage, _) in enumerate(KINDS[kind]):
            counts = {k: statistics.median(r[i]["times"][k] for r in results)
                      for k in [f"{n}/step" for n in COUNTED] + ["arena", "hblks", "hblkhd"] if k in results[0][i]["times"]}  # fmt: skip
            print(f"  {stage:50s} " + ", ".join(f"{k} {v:.1f}" if "/" in k else f"{k} {v:.0f}" for k, v in counts.items()))
        base = results[0][0]["settings"]
        for i, (stage, _) in enumerate(KINDS[kind][1:], 1):
            changed = {k: v for k, v in results[0][i]["settings"].items() if v != base[k]}
            print(f"  settings changed at '{stage}': " + ("; ".join(f"{k}: {base[k]} -> {v}" for k, v in
                                                                     changed.items()) or "none"))  # fmt: skip


if __name__ == "__main__":
    main()
