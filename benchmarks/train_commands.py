"""Per-iteration time and peak memory of ``lightning-hooks train`` vs the library's own ``tools/train.py``, on shipped
detector and segmentor configs, MMEngine's (mmdet 3.x / mmseg 1.x, ``.venv``) and OpenMMLab 1.x's (mmdet 2.x /
mmseg 0.x, ``.venv-mmcv1``).

Each case is a config the library ships, as the ``_base_`` of a small derived config: narrower layers, no pretrained
weights, 64x64 generated images (benchmarks/_tiny_data.py), one epoch (or ``--iters`` iterations) of training without
validation, with ``IterClock`` in ``custom_hooks`` (benchmarks/_train_child.py). Every run is a process of its own
(benchmarks/_train_child.py: the library's ``tools/train.py`` as ``__main__``, or ``lightning_hooks.cli.main(["train",
...])``), round-robin between the two commands, single-threaded (``OMP_NUM_THREADS=1``, set for the children).
Reported: seconds of process CPU time per iteration after the first ``WARMUP`` iterations (start-up, model and data
building excluded), each command's peak RSS (``os.wait4``: the whole process, imports included), its RSS at the first
iteration (imports, model, data built) and the growth of the peak after it (training's own memory), and the median over
rounds of each round's lightning/tools ratios with their range (target: at most 1.02), and, per command, counters that
the machine's load does not move (``_train_child.process_counters``): minor / major page faults and voluntary /
involuntary context switches per iteration past the warm-up, and at the last iteration the OS threads alive and glibc
malloc's state (``mallinfo2``: ``arena`` bytes in the heap, ``hblks`` / ``hblkhd`` blocks and bytes mapped by mmap,
``uordblks`` bytes in use). Importing ``lightning.pytorch``
alone adds ~180 MiB to a process that has imported torch (less next to a library that shares its imports), before any
model exists; the growth after the first iteration compares what training itself holds.

Cases (``--case``):

* ``vissl-swav``: VISSL's ``test/integration_test/quick_swav`` (ResNet-50, SwAV loss with its queue from iteration 2,
  multi-crop), made small for a CPU as the tests make it (32 px synthetic images, 2 x 32 + 2 x 16 px crops, batch 4, a
  small head, no LARC or SyncBN), one epoch; VISSL's launcher (``tools/run_distributed_engines.py``'s
  ``launch_distributed``) vs ``lightning-hooks train config=...`` (``.venv`` with VISSL on the path);
* ``mmdet-retinanet``: mmdet 3.x ``retinanet/retinanet_r18_fpn_1x_coco.py`` (epoch-based, LinearLR warm-up + MultiStepLR),
  ResNet-18 at 16 base channels, batch 2 (``.venv``);
* ``mmseg-segformer``: mmseg 1.x ``segformer/segformer_mit-b0_8xb2-160k_ade20k-512x512.py`` (iteration-based, AdamW,
  LinearLR + PolyLR), decode head 32 channels, batch 2 (``.venv``);
* ``mmdet2-retinanet``: mmdet 2.x ``retinanet/retinanet_r18_fpn_1x_coco.py`` (``EpochBasedRunner``, step LR with
  warm-up), ResNet-18 at 8 base channels, batch 2, mmdet's ``CustomDataset`` on generated files (``.venv-mmcv1``);
* ``mmseg0-fcn``: mmseg 0.x ``fcn/fcn_r18-d8_512x1024_80k_cityscapes.py`` (``IterBasedRunner``, poly LR), ResNet-18-D8
  at 16 base channels, BN instead of SyncBN, batch 2, mmseg's ``CustomDataset`` on generated files (``.venv-mmcv1``).

Measured (``--rounds 3 --iters 20``, the shared 2-core machine under a load average of 6-16 from other tenants'
test runs; ms/iter tools vs lightning, the ratio's median [range], peak RSS tools vs lightning, the peak's growth
after the first iteration tools vs lightning):

* ``mmdet-retinanet``: 29.2 vs 30.7, 1.041 [1.032-1.158]; 555 vs 580 MiB (1.045); 9.9 vs 2.4 MiB.
* ``mmseg-segformer``: 88.3 vs 90.2, 0.919 [0.917-1.184]; 671 vs 665 MiB (0.991); 52.3 vs 14.2 MiB.
* ``vissl-swav``: 496 vs 518, 1.007 [0.980-1.045]; 770 vs 850 MiB (1.103); 45.0 vs 46.0 MiB.
* ``mmdet2-retinanet``: 24.5 vs 29.8, 1.264 [1.127-1.549]; 459 vs 517 MiB (1.127); 2.8 vs 2.7 MiB. Again with
  ``cv2.setNumThreads(0)`` in both processes (mmdet's ``setup_multi_processes``, which ``tools/train.py`` calls and
  the 1.x train command does not): 22.8 vs 25.6, 1.140 [1.036-1.178]; RSS at the first iteration 456 vs 514 MiB. A
  process-time cProfile of iterations 6-40 of one run each puts the difference in torch's kernels, not in Python
  around them: ``conv2d`` 4.9 vs 5.9 ms/iter for the same 48 calls, ``run_backward`` 8.0 vs 9.1, while
  ``_call_impl`` / the optimizer's Python are alike; both processes run one thread (``/proc/self/task``), and the
  next pair, timed by thread CPU ticks, read 27 vs 25 ms/iter the other way round; neither process flushes denormals
  (FTZ/DAZ checked in both). A third run, ``--rounds 5``: 23.4 vs 27.3, 1.209 [1.071-1.277]; RSS 458 vs 517 MiB,
  growth 2.8 vs 2.8 MiB. So the gap is consistent, and sits in the kernels' CPU time, not in per-step Python.
  Round 6 (#35, a host under load 10-13), the two processes at the first iteration compared: the same torch threads
  (1, one OS thread each), inter-op threads, oneDNN on, deterministic algorithms, anomaly detection and autocast off,
  the 20 BatchNorm layers in eval mode in both (``norm_eval``), 205,974 of 209,534 parameters trainable in both (the
  frozen stage), inputs 2x3x64x64, the same initial weights and the same first 8 losses (to 6 decimals);
  ``setup_multi_processes`` runs in both (the command calls it since 56f8fea). The difference is user CPU time (system
  time under 0.6 ms/iter, under 20 minor page faults per iteration in either). Ratios: 1.134 [1.078-1.169] (3
  rounds), 1.141 [0.931-1.302] and 1.276 [0.632-1.493] (4 rounds each). A third command in the same rounds, the
  library's ``tools/train.py`` in a process that first imports ``lightning.pytorch`` and the 1.x train command
  without using them, read 1.064, 1.133, 1.214 and 0.779 of ``tools/train.py``; a conv + BatchNorm training loop
  timed in one process before and after those imports read a median 1.15 [0.92-1.27] after/before (7 processes),
  against 1.03 [0.93-1.08] for the same loop around imports of nothing new. So the slowdown follows the imports, not
  the command's per-step work (the likeliest cause: the larger process's memory and cache footprint; this VM has no
  hardware counters to show it, and its load moves single runs by 30%).
  Round 9 (#35): ``--rounds 4`` at load 23-30: 24.2 vs 28.6, 1.139 [1.007-1.402]; again with ``--env
  GLIBC_TUNABLES=glibc.malloc.hugetlb=1`` (malloc's heap on huge pages, in both processes): 23.0 vs 24.1, 1.069
  [1.035-1.109]; RSS 459 vs 518 MiB, growth 2.7 vs 2.7 MiB. ``benchmarks/import_effects.py`` times the backbone and
  neck's training step in one process before and after each import stage: no torch, interpreter, collector or thread
  setting changes with Lightning's or the command's imports (its docstring lists the ~100 compared), the collector
  never runs inside a step, the heap's size alone does not slow it, and huge pages do not consistently remove the gap
  (1.14 with them, 0.98 without, in one run); Lightning's imports read 0.96-1.21 (median ~1.08 over six runs) against
  0.95-1.04 for the control. No setting for the command to restore was found; the gap is not explained.
* ``mmseg0-fcn``: 30.5 vs 30.5, 0.989 [0.902-1.011]; 477 vs 540 MiB (1.130); 12.3 vs 11.8 MiB.

Round 17 (#35), the detectors' gap against load-independent counters (this script's counters; load average in
brackets): ``mmdet2-retinanet`` ``--rounds 2 --iters 40`` [0.3-1.8]: 23.12 vs 23.63 ms/iter, 1.026 [0.965-1.086];
minor faults 3.3 vs 1.5 per iteration, 0 major, 0 voluntary switches, one thread in both, malloc's heap 149 vs 171 MB
(Lightning's imports), the same 6 mmapped blocks of 6.08 MB in both at the last iteration; ``mmdet-retinanet``
``--rounds 4 --iters 40`` [1.5-4]: 26.94 vs 28.49 ms/iter, 1.030 [0.963-1.281]; minor faults 0.0 vs 0.1 per
iteration, one thread, heap 194 vs 205 MB, 5 mmapped blocks in both (5.7 vs 9.5 MB). So no
big tensor is freed to the kernel and mapped anew per step on either side (glibc's dynamic mmap threshold has settled
before the warm-up ends: a re-mapped block would fault its pages, ~1 fault per 4 KiB, every step), no thread is
started, and the steps do not switch out voluntarily: the page-fault / mmap-threshold / thread explanations are ruled
out by counts. What differs is glibc malloc's heap: at the end of training its bins hold 2059 free chunks (2.0 MB)
under ``tools/train.py`` and 2950 (2.4 MB) under the command (``ordblks`` / ``fordblks``, one ``--iters 12`` run
each: Lightning's imports leave them, before any model exists). ``benchmarks/import_effects.py --callgrind`` counts
what that does per step: the same instructions, +0.3-1.1% simulated data misses, the largest changes in malloc's own
functions (malloc/free are a third of the step's instructions), none with jemalloc preloaded in both processes; too
small to be the timed gap, and timed with jemalloc in both (``--env LD_PRELOAD=.../libjemalloc.so.2 --rounds 3
--iters 30``, load 4-9) the ratio read 1.151 [0.977-1.299] against 1.069 [0.958-1.446] without it in the same
session (jemalloc made both faster: 20.5 vs 22.4 ms/it under ``tools/train.py``, 23.5 vs 24.9 under the command).
The gap is still not explained; what callgrind does not model (TLB, the real caches, page placement) is what is
left. On the near-quiet machine of the first runs above both detectors read within 1.03 at the median.

Training's own memory (the growth after the first iteration) is the host's or less in every case; the peak's
difference is there before the first iteration (Lightning's and the adapters' imports). Time: within 1.02 at the
median for VISSL SwAV and the two segmentors, 1.04 for mmdet 3.x RetinaNet, not met for mmdet 2.x RetinaNet (1.14-1.26).

Commands (each case ~1-2 minutes on a quiet 2-core machine with the defaults, ``vissl-swav`` ~4; ``--rounds`` and
``--iters`` scale it)::

    OMP_NUM_THREADS=1 PYTHONPATH=$PWD/scripts/vissl-site .venv/bin/python benchmarks/train_commands.py --case vissl-swav
    OMP_NUM_THREADS=1 PYTHONPATH=$PWD/scripts/vissl-site .venv/bin/python benchmarks/train_commands.py --case mmdet-retinanet
    OMP_NUM_THREADS=1 PYTHONPATH=$PWD/scripts/vissl-site .venv/bin/python benchmarks/train_commands.py --case mmseg-segformer
    OMP_NUM_THREADS=1 .venv-mmcv1/bin/python benchmarks/train_commands.py --case mmdet2-retinanet [--env NAME=VALUE]
    OMP_NUM_THREADS=1 .venv-mmcv1/bin/python benchmarks/train_commands.py --case mmseg0-fcn
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
WARMUP = 5
NORM = "dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375], to_rgb=True)"


def shipped(library: str, config: str) -> str:
    import importlib.util

    spec = importlib.util.find_spec(library)
    if spec is None or spec.origin is None:
        raise SystemExit(f"{library} is not installed in {sys.prefix}: see this script's docstring for the venv")
    return str(Path(spec.origin).parent / ".mim" / "configs" / config)


def mmdet_retinanet(root: Path, iters: int) -> tuple[str, str, list[str]]:
    return "mmdet", f"""_base_ = [{shipped("mmdet", "retinanet/retinanet_r18_fpn_1x_coco.py")!r}]
model = dict(backbone=dict(init_cfg=None, stem_channels=16, base_channels=16),
             neck=dict(in_channels=[16, 32, 64, 128], out_channels=32),
             bbox_head=dict(num_classes=2, in_channels=32, feat_channels=32, stacked_convs=1))
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(type="BenchDetection", n={2 * iters}, seed=1, _delete_=True,
                 pipeline=[dict(type="RandomFlip", prob=0.5), dict(type="PackDetInputs")]))
train_cfg = dict(max_epochs=1)
""", []


def mmseg_segformer(root: Path, iters: int) -> tuple[str, str, list[str]]:
    return "mmseg", f"""_base_ = [{shipped("mmseg", "segformer/segformer_mit-b0_8xb2-160k_ade20k-512x512.py")!r}]
model = dict(data_preprocessor=dict(size=(64, 64)), backbone=dict(init_cfg=None),
             decode_head=dict(channels=32, num_classes=4))
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(type="BenchSegmentation", n={2 * iters}, seed=1, _delete_=True,
                 pipeline=[dict(type="RandomFlip", prob=0.5), dict(type="PackSegInputs")]))
train_cfg = dict(max_iters={iters}, val_interval={iters + 1})
""", []


MMENGINE_COMMON = """val_dataloader = None
val_cfg = None
val_evaluator = None
test_dataloader = None
test_cfg = None
test_evaluator = None
custom_hooks = [dict(type="IterClock")]
randomness = dict(seed=0)
"""


def mmdet2_retinanet(root: Path, iters: int) -> tuple[str, str, list[str]]:
    return "mmdet", textwrap.dedent(f"""\
        _base_ = [{shipped("mmdet", "retinanet/retinanet_r18_fpn_1x_coco.py")!r}]
        model = dict(
            backbone=dict(base_channels=8, init_cfg=None),
            neck=dict(in_channels=[8, 16, 32, 64], out_channels=16),
            bbox_head=dict(num_classes=2, in_channels=16, feat_channels=16, stacked_convs=1))
        train_pipeline = [
            dict(type='LoadImageFromFile'), dict(type='LoadAnnotations', with_bbox=True),
            dict(type='Resize', img_scale=(64, 64), keep_ratio=True), dict(type='RandomFlip', flip_ratio=0.5),
            dict(type='Normalize', **{NORM}), dict(type='Pad', size_divisor=32),
            dict(type='DefaultFormatBundle'), dict(type='Collect', keys=['img', 'gt_bboxes', 'gt_labels'])]
        data = dict(samples_per_gpu=2, workers_per_gpu=0, persistent_workers=False,
                    train=dict(type='CustomDataset', classes=('a', 'b'), ann_file={str(root / "train.pkl")!r},
                               img_prefix={str(root / "img")!r}, pipeline=train_pipeline))
        runner = dict(max_epochs=1)
        lr_config = dict(policy='step', warmup='linear', warmup_iters=2, warmup_ratio=0.1, step=[1])
        custom_hooks = [dict(type='IterClock', priority='LOWEST')]
        """), ["--seed", "0", "--no-validate"]


def mmseg0_fcn(root: Path, iters: int) -> tuple[str, str, list[str]]:
    return "mmseg", textwrap.dedent(f"""\
        _base_ = [{shipped("mmseg", "fcn/fcn_r18-d8_512x1024_80k_cityscapes.py")!r}]
        norm_cfg = dict(type='BN', requires_grad=True)
        model = dict(pretrained=None,
                     backbone=dict(norm_cfg=norm_cfg, base_channels=16, stem_channels=16),
                     decode_head=dict(norm_cfg=norm_cfg, in_channels=128, channels=32, num_classes=4),
                     auxiliary_head=dict(norm_cfg=norm_cfg, in_channels=64, channels=16, num_classes=4))
        train_pipeline = [
            dict(type='LoadImageFromFile'), dict(type='LoadAnnotations'),
            dict(type='RandomFlip', prob=0.5), dict(type='Normalize', **{NORM}),
            dict(type='DefaultFormatBundle'), dict(type='Collect', keys=['img', 'gt_semantic_seg'])]
        data = dict(samples_per_gpu=2, workers_per_gpu=0, persistent_workers=False,
                    train=dict(_delete_=True, type='CustomDataset', classes=('a', 'b', 'c', 'd'),
                               palette=[[0, 0, 0], [255, 0, 0], [0, 255, 0], [0, 0, 255]],
                               data_root={str(root)!r}, img_dir='img', ann_dir='ann', img_suffix='.png',
                               seg_map_suffix='.png', pipeline=train_pipeline))
        runner = dict(max_iters={iters})
        checkpoint_config = dict(interval={iters})
        evaluation = dict(interval={iters + 1})
        custom_hooks = [dict(type='IterClock', priority='LOWEST')]
        """), ["--seed", "0", "--no-validate"]


#: VISSL's shipped integration-test SwAV config made small for a CPU (as a user on CPU overrides it: no LARC, no
#: SyncBN, gloo, one process): synthetic 32 px images, 2 x 32 px + 2 x 16 px crops, a small head
VISSL_SMALL = [
    "config.MACHINE.DEVICE=cpu", "config.DISTRIBUTED.BACKEND=gloo", "config.DISTRIBUTED.INIT_METHOD=file",
    "config.DISTRIBUTED.NUM_PROC_PER_NODE=1", "config.DATA.NUM_DATALOADER_WORKERS=0",
    "config.DATA.TRAIN.DATA_SOURCES=[synthetic]", "config.DATA.TRAIN.DATASET_NAMES=[synthetic]",
    "config.DATA.TRAIN.BATCHSIZE_PER_REPLICA=4", "config.DATA.TRAIN.RANDOM_SYNTHETIC_IMAGES=true",
    "config.DATA.TRAIN.DEFAULT_GRAY_IMG_SIZE=32", "config.OPTIMIZER.use_larc=false", "config.OPTIMIZER.num_epochs=1",
    "config.MODEL.SYNC_BN_CONFIG.CONVERT_BN_TO_SYNC_BN=false", "config.HOOKS.PERF_STATS.MONITOR_PERF_STATS=false",
    "config.DATA.TRAIN.TRANSFORMS=[{name: ImgPilToMultiCrop, num_crops: [2, 2], size_crops: [32, 16], crop_scales: "
    "[[0.14, 1], [0.05, 0.14]], total_num_crops: 4}, {name: RandomHorizontalFlip, p: 0.5}, {name: "
    "ImgPilColorDistortion, strength: 1.0}, {name: ImgPilGaussianBlur, p: 0.5, radius_min: 0.1, radius_max: 2.0}, "
    "{name: ToTensor}, {name: Normalize, mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}]",
    "config.MODEL.HEAD.PARAMS=[[swav_head, {dims: [2048, 64, 16], use_bn: true, num_clusters: [20]}]]",
    "config.LOSS.swav_loss.queue.queue_length=8", "config.LOSS.swav_loss.queue.start_iter=2",
]  # fmt: skip


def vissl_swav(root: Path, iters: int) -> tuple[str, str, list[str]]:
    return "vissl", "config=test/integration_test/quick_swav", [*VISSL_SMALL, f"config.DATA.TRAIN.DATA_LIMIT={4 * iters}"]


CASES = {"vissl-swav": vissl_swav, "mmdet-retinanet": mmdet_retinanet, "mmseg-segformer": mmseg_segformer,
         "mmdet2-retinanet": mmdet2_retinanet, "mmseg0-fcn": mmseg0_fcn}  # fmt: skip


#: counters whose per-iteration change the report gives (page faults, context switches), and those it gives as they
#: are at the last iteration (threads alive, glibc malloc's state): _train_child.process_counters
PER_ITERATION = ("minflt", "majflt", "nvcsw", "nivcsw")
AT_END = ("threads", "arena", "ordblks", "fordblks", "hblks", "hblkhd", "uordblks")


def counters_per_iteration(counters: list[dict[str, float]]) -> dict[str, float]:
    """:data:`PER_ITERATION`'s change per iteration past the warm-up, and :data:`AT_END` at the last iteration."""
    first, last = counters[WARMUP - 1], counters[-1]
    per = {name: (last[name] - first[name]) / (len(counters) - WARMUP) for name in PER_ITERATION}
    return per | {name: last[name] for name in AT_END if name in last}


def run(host: str, library: str, config: Path | str, root: Path, extra: list[str], tag: str,
        child_env: dict[str, str]) -> dict[str, float]:  # fmt: skip
    """One ``host`` run in a process of its own (``child_env`` added to its environment): ``seconds`` (CPU seconds
    per iteration past the warm-up), ``peak`` (peak RSS in MiB), ``growth`` (the peak's growth in MiB from the first
    iteration to the end of training), ``first`` (the RSS at the first iteration) and :func:`counters_per_iteration`."""
    out, work_dir = root / f"{tag}.json", root / f"work-{tag}"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", **child_env}
    log = open(root / f"{tag}.log", "w")
    proc = subprocess.Popen([sys.executable, str(HERE / "_train_child.py"), host, library, str(config), str(work_dir),
                             str(out), *extra], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root)  # fmt: skip
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    log.close()
    if proc.returncode != 0:
        raise SystemExit(f"{host} failed ({proc.returncode}):\n" + (root / f"{tag}.log").read_text()[-4000:])
    record = json.loads(out.read_text())
    stamps = record["stamps"]
    seconds = (stamps[-1] - stamps[WARMUP - 1]) / (len(stamps) - WARMUP)
    return {"seconds": seconds, "peak": usage.ru_maxrss / 1024, "growth": record["peak"] - record["rss_at_first"],
            "first": record["rss_at_first"], **counters_per_iteration(record["counters"])}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=sorted(CASES), required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iters", type=int, default=20, help="train iterations per run (the first 5 not timed)")
    parser.add_argument("--env", nargs="*", default=[], metavar="NAME=VALUE",
                        help="set for both commands' processes, e.g. GLIBC_TUNABLES=glibc.malloc.hugetlb=1")
    args = parser.parse_args()
    child_env = dict(item.split("=", 1) for item in args.env)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        library, text, extra = CASES[args.case](root, args.iters)
        if library == "vissl":
            config = text
        else:
            if "IterClock" not in text:
                text += MMENGINE_COMMON
            else:
                sys.path.insert(0, str(HERE))
                import _tiny_data

                _tiny_data.write_files(root, 2 * args.iters)
            config = root / f"{args.case}.py"
            config.write_text(text)
        hosts = ("tools", "lightning")
        samples: dict[str, list[dict[str, float]]] = {h: [] for h in hosts}
        for i in range(args.rounds):
            for host in hosts if i % 2 == 0 else hosts[::-1]:
                samples[host].append(run(host, library, config, root, extra, f"{host}-{i}", child_env))
    report(args.case, args.iters, args.rounds, child_env, samples)


def report(case: str, iters: int, rounds: int, child_env: dict[str, str], samples: dict[str, list[dict[str, float]]]) -> None:
    """Print each command's medians over rounds [range], the counters' medians, and the lightning/tools ratios."""
    median = statistics.median
    ratios = [lit["seconds"] / ref["seconds"] for lit, ref in zip(samples["lightning"], samples["tools"])]
    print(f"{case}: {iters} iterations per run ({WARMUP} not timed), {rounds} rounds, 1 thread"
          + "".join(f", {k}={v}" for k, v in child_env.items()))  # fmt: skip
    for host, runs in samples.items():
        ms = [1000 * s["seconds"] for s in runs]
        rss = [s["peak"] for s in runs]
        print(f"  {host:10s} {median(ms):8.2f} ms/iter [{min(ms):.2f}-{max(ms):.2f}]  "
              f"peak RSS {median(rss):7.1f} MiB [{min(rss):.1f}-{max(rss):.1f}], "
              f"RSS at the first iteration {median(s['first'] for s in runs):.1f} MiB, growth after it "
              f"{median(s['growth'] for s in runs):.1f} MiB")  # fmt: skip
        per = ", ".join(f"{name} {median(s[name] for s in runs):.1f}" for name in PER_ITERATION)
        end = ", ".join(f"{name} {median(s[name] for s in runs):.0f}" for name in AT_END if name in runs[0])
        print(f"  {'':10s} per iteration: {per}; at the end: {end}")
    rss_ratio = median([lit["peak"] / ref["peak"] for lit, ref in zip(samples["lightning"], samples["tools"])])
    print(f"  lightning/tools time: {median(ratios):.3f} [{min(ratios):.3f}-{max(ratios):.3f}], "
          f"peak RSS: {rss_ratio:.3f} (target <= 1.02)")  # fmt: skip


if __name__ == "__main__":
    main()
