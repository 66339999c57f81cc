"""Two processes, shipped OpenMMLab 2.0 configs from the resume corpus (tests/families/mmengine/test_resume_corpus.py):
``lightning-hooks train CONFIG --devices 2`` (Lightning's DDP on CPU, gloo) against the Runner launched as
``tools/dist_train.sh`` launches it (torchrun, 2 processes, ``--launcher pytorch``, gloo; tests/helpers/runner_train.py),
rank by rank.

Compared bitwise: each rank's train outputs (loss terms) at every iteration and, with an ``EMAHook``, a digest of its
EMA weights (:class:`resume_kit.RankLossHook`; rank 0 alone saves them), rank 0's scalars, log lines of training and
work-dir files (a rank other than 0 writes no log file under either host, so the listing covers the other rank's log),
and each checkpoint's weights, optimizer, scheduler and message-hub state. Two processes averaging their gradients over
gloo sum two values, which is exact whatever the order, so the runs agree to the bit on this CPU.

The cases: mmpretrain's ResNet-18 CIFAR fresh in tests/integration/ddp/test_write_audit.py (its audited run,
compared here by :func:`assert_same_ranks`); stopped and resumed (the stopped run compared as a fresh one): mmseg's
SegFormer (iteration-based: each rank's InfiniteSampler advanced past the iterations done) and, mid-epoch, mmdet's
Mask R-CNN (two-stage instance segmentation: each rank's RPN proposals through NMS and RoIAlign, the pure-torch
stand-ins of tests/helpers/torch_ops.py in every process of both hosts, its samplers drawing from each rank's
generator; CocoMetric on boxes and masks over both ranks' predictions) and RTMPose-s (the shipped ``EMAHook``, whose
EMA of each rank's own BN statistics differs by rank, saved by rank 0 and resumed in both ranks, and mmdet's
``PipelineSwitchHook`` switching both ranks' data at epoch 2, again on resuming; CocoMetric over both ranks' results;
with mmpose's ``SyncBuffersHook`` of its default runtime, :data:`SYNC_BUFFERS`). Mask R-CNN runs Faster R-CNN's path
and its mask head, so Faster R-CNN is not run again here; RTMPose-s is top-down pose as the SimpleBaseline heatmap
config, whose two-process case it carries.

Each case trains on the shipped config's loader workers (at most 2 a loader and process, ``persistent_workers`` as
shipped: :func:`shipped_workers`), where the corpus derives its loaders with none: each process's workers take their
index batches from its sampler when its iterator is made. A fit resumed inside an epoch makes the epoch's iterator
where ``EpochBasedTrainLoop`` does, after ``before_train_epoch`` set the sampler's epoch
(``MMEngineAdapter.train_iterator_at``); made at Lightning's data setup instead, Mask R-CNN's resumed run parts at its
first iteration.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
from lh_testing import DDP_LAUNCH_VARIABLES, HELPERS, subprocess_env
from mmengine.config import Config
from resume_kit import FORMAT_ONCE_ENV, STOP_ENV, first_difference, rank_losses, scalars

_spec = importlib.util.spec_from_file_location("resume_corpus", Path(__file__).with_name("test_resume_corpus.py"))
assert _spec is not None and _spec.loader is not None
corpus = importlib.util.module_from_spec(_spec)  # the corpus's cases and derived configs (a test module, by path)
_spec.loader.exec_module(corpus)

#: the corpus's case run fresh in two processes: epoch-based classification (DefaultSampler sharding by rank), by
#: tests/integration/ddp/test_write_audit.py, which compares its ranks' writes and then calls
#: :func:`assert_same_ranks` on the same runs (one two-process run of each host for both checks)
AUDITED = "mmpretrain-resnet18-cifar"
#: the cases with an EMAHook: each rank's rows must carry its EMA digest
EMA = {"mmpose-rtmpose-s"}
#: the cases stopped in two processes and resumed (the stopped run compared too, as a fresh one): the iteration both
#: processes stop after, the lines that give each rank two iterations an epoch (the epoch-based ones), the two runs'
#: ports; SegFormer (iteration-based: InfiniteSampler, validation by iteration with IoUMetric gathering both ranks'
#: results; stopped where it validates next, each rank's loader advanced 6 batches on resuming, as under the Runner);
#: Mask R-CNN (two-stage instance segmentation: each rank's RPN proposals through NMS and RoIAlign, the pure-torch
#: stand-ins of tests/helpers/torch_ops.py in every process of both hosts, its samplers drawing from each rank's
#: generator, AspectRatioBatchSampler by rank; CocoMetric on boxes and masks over both ranks' predictions, after
#: epoch 1 in the stopped run and epochs 2 and 3 in the resumed one, which runs epoch 2 again as the Runner does;
#: DefaultSampler under its batch sampler, as ResNet-18's, which ran here too before); RTMPose (EMAHook and
#: PipelineSwitchHook in each process, the EMA weights validated on each rank's share of the persons; stopped in
#: epoch 2, after the switch, resumed from rank 0's checkpoint of the model and its EMA into both ranks, which run epoch
#: 2 again and switch again, as under the Runner)
_TWO_A_RANK = "train_dataloader['batch_size'] = 1\n"
RESUMED = {"mmseg-segformer-b0": (6, "", (29562, 29563)), "mmdet-mask-rcnn-r50": (3, _TWO_A_RANK, (29567, 29568)),
           "mmpose-rtmpose-s": (3, _TWO_A_RANK, (29569, 29570))}
#: lines a case adds for two CPU processes: torch's DistributedDataParallel takes SyncBatchNorm on GPU modules only
#: (under both hosts), so SegFormer's decode head and RTMPose's CSPNeXt normalise with BN in each process
CPU_LINES = {"mmseg-segformer-b0": "model['decode_head']['norm_cfg'] = dict(type='BN', requires_grad=True)\n",
             "mmpose-rtmpose-s": "model['backbone']['norm_cfg'] = dict(type='BN')\n"}
#: mmpose's default runtime's ``SyncBuffersHook`` (averaging each rank's BN statistics after each epoch), which
#: RTMPose-s's shipped ``custom_hooks`` replace, put back first as there: the top-down case that ran fresh for it
#: (the SimpleBaseline heatmap config, with the default runtime's hooks) is carried by RTMPose-s's run, whose EMA of
#: the buffers (``update_buffers=True``), validation and checkpoints follow the averaged statistics
SYNC_BUFFERS = {"mmpose-rtmpose-s": "custom_hooks = [dict(type='SyncBuffersHook'), *custom_hooks]\n"}


#: a line of a model's weight-initialisation report (``BaseModule._dump_init_info``) on the console
INIT_INFO = re.compile(r"torch\.Size\(\[|Initialized by user-defined|Name of parameter")


#: the most loader workers a process starts for one loader (the shipped configs name 2 to 10 a GPU)
MAX_WORKERS = 2


def shipped_workers(case: str) -> str:
    """Lines that give the derived config's train and validation loaders (the corpus derives them with none) the
    shipped config's workers, at most :data:`MAX_WORKERS`, and its ``persistent_workers``, as a user trains it: each
    process's workers take their index batches from its sampler and draw from generators seeded by its base seed."""
    library, shipped, _, _ = corpus.CASES[case]
    base = Config.fromfile(str(corpus._CONFIGS[library] / shipped))
    return "".join(f"{name}['num_workers'] = {min(base[name].get('num_workers', 0), MAX_WORKERS)}\n"
                   f"{name}['persistent_workers'] = {base[name].get('persistent_workers', False)}\n"
                   for name in ("train_dataloader", "val_dataloader"))  # fmt: skip


def two_process_config(directory: Path, case: str) -> Path:
    """The corpus's derived config on the shipped loader workers (:func:`shipped_workers`), each rank's outputs
    recorded; the helper modules imported by ``custom_imports`` in every process (the tiny datasets, the hooks)."""
    path = corpus.derived_config(directory, case)
    helpers = ["train_kit", "resume_kit", *(["pose_kit"] if case.startswith("mmpose") else [])]
    path.write_text(path.read_text() + CPU_LINES.get(case, "") + SYNC_BUFFERS.get(case, "") + shipped_workers(case)
                    + "custom_hooks = [*custom_hooks, dict(type='RankLossHook')]\n"
                    f"custom_imports = dict(imports={helpers!r}, allow_failed_imports=False)\n")  # fmt: skip
    return path


def run_both(path: Path, root: Path, port: int, *options: str, stop_after: int | None = None) -> tuple[Path, Path]:
    """The Runner under torchrun and ``lightning-hooks train --devices 2``, each in its work dir under ``root``, with
    ``options`` (``--resume``); ``stop_after``: both processes stop after that iteration
    (:class:`resume_kit.StopRunHook`), as a killed run, and the launch must fail."""
    runner, lightning = root / "runner", root / "lightning"
    stop = {STOP_ENV: str(stop_after)} if stop_after else {}
    env = subprocess_env(HELPERS, drop=(*DDP_LAUNCH_VARIABLES, "LIGHTNING_HOOKS_MMENGINE_SEED", STOP_ENV),
                         OMP_NUM_THREADS="1", TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1", **{FORMAT_ONCE_ENV: "1"}, **stop)  # fmt: skip
    # MMEngine's own resume loads the message hub's pickled buffers with torch.load's default (weights only)
    commands = {
        "runner": [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(port),
                   str(HELPERS / "runner_train.py"), str(path), str(runner), *options],
        "lightning": [sys.executable, "-m", "lightning_hooks", "train", str(path), "--work-dir", str(lightning),
                      "--devices", "2", *options],
    }  # fmt: skip
    init_lines = {}
    for name, command in commands.items():
        proc = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=600)
        init_lines[name] = [line for line in (proc.stdout + proc.stderr).splitlines() if INIT_INFO.search(line)]
        if stop_after:
            # StopRun's message, not the hook's name, which the config dump shows whatever ended the run
            stopped = f"StopRun: stopped after iteration {stop_after}" in proc.stdout + proc.stderr
            assert proc.returncode != 0 and stopped, f"{name}: {proc.stderr[-3000:]}"
        else:
            assert proc.returncode == 0, f"{name}:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    # the console: rank 0 writes the weights' initialisation to its log file, another rank shows only errors
    assert init_lines["lightning"] == init_lines["runner"], init_lines["lightning"][:5]
    return runner, lightning


@pytest.mark.parametrize("case", sorted(RESUMED))
def test_two_processes_stopped_and_resumed_as_the_runner_under_torchrun(tmp_path: Path, case: str) -> None:
    """A corpus case in two processes stopped after an iteration (:data:`RESUMED`: for the epoch-based ones, two
    iterations an epoch per rank, iteration 3, the first of epoch 2), its checkpoint saved, then ``--resume``d in two
    processes under each host: both runs agree rank by rank (the stopped one as a fresh run)."""
    stop, lines, ports = RESUMED[case]
    path = two_process_config(tmp_path, case)
    path.write_text(path.read_text() + lines + f"default_hooks['checkpoint']['interval'] = {stop}\n")
    run_both(path, tmp_path, ports[0], stop_after=stop)
    for side in ("runner", "lightning"):
        assert (tmp_path / side / f"iter_{stop}.pth").is_file(), side
    runner, lightning = run_both(path, tmp_path, ports[1], "--resume")
    assert_same_ranks(case, runner, lightning, runs=[0, 1])


def assert_same_ranks(case: str, runner: Path, lightning: Path, runs: list[int]) -> None:
    """The case trains and validates as meant under the Runner (its :data:`corpus.METRICS` in the scalars of the
    work dir's ``runs``, each rank's EMA digest with an EMAHook); each rank's outputs per iteration, then rank 0's
    scalars, log lines, files and checkpoints (:func:`resume_kit.first_difference`) are the same under both hosts.
    Where ranks part, the one that parts first is named (a rank's difference reaches the other through the averaged
    gradients an iteration later)."""
    keys = {key for run in runs for row in scalars(runner, run) for key in row}
    assert keys >= set(corpus.METRICS.get(case, ())), sorted(keys)
    if case in EMA:
        assert all("ema" in row for rank in (0, 1) for row in rank_losses(runner, rank)), "no EMAHook found"
    parted = []  # each rank's first difference: (row, rank, the Runner's row, Lightning's row)
    for rank in (0, 1):
        theirs, ours = rank_losses(runner, rank), rank_losses(lightning, rank)
        assert theirs, f"{case}: rank {rank} recorded no iteration under the Runner"
        rows = [(i, rank, a, b) for i, (a, b) in enumerate(zip(theirs, ours, strict=False)) if a != b]
        parted += rows[:1]
        if not rows:
            assert len(ours) == len(theirs), f"{case}: rank {rank} ran {len(theirs)} iterations under the Runner, {len(ours)}"
    if parted:
        _, rank, a, b = min(parted, key=lambda found: found[:2])
        raise AssertionError(f"{case}: rank {rank}'s outputs part at iteration {a['iter']}: Runner {a}, Lightning {b}")
    checkpoints = sorted(p.name for p in runner.glob("*.pth"))
    assert checkpoints, f"{case}: the Runner saved no checkpoint"
    assert first_difference(case, runner, lightning, checkpoints) is None
