"""A VISSL config trained by VISSL's own launcher and by ``lightning-hooks train config=...`` (subprocess side).

Both read VISSL's shipped integration-test and CPU-test configs (``quick_simclr_synthetic``, ``quick_moco``,
``quick_swav``, ``quick_dino``, ``test_cpu_regnet_moco``, ``test_cpu_regnet_simclr``; ``quick_eval_in1k_linear`` for
VISSL's meters, run by vissl_eval_runs.py) composed by VISSL's
hydra plugin with the same overrides, which make them small for a CPU: synthetic 32 px images, a handful of samples,
the configs' own transforms at 32 px (SwAV's and DINO's multi-crop at 32/16 px), ResNet-50 trunks at 8 channels a
group (:data:`NARROW`), in-process loading, gloo, one
process (two: :func:`run_two_processes`), no LARC (it needs Apex), no SyncBN (a user on CPU overrides both, as here). The reference is what
``tools/run_distributed_engines.py`` runs: ``launch_distributed(cfg, node_id=0, engine_name="train",
hook_generator=default_hook_generator)``. Compared by the tests: ``stdout.json``, ``metrics.json``, the checkpoint
files and the final weights, as :func:`digest` s; a scenario's checkpoint files are deleted once read
(:func:`drop_checkpoints`: 190 MB each for a ResNet-50 as shipped, a fifth of that narrow). :func:`run_scenarios` is
the subprocess loop of every VISSL differential (this file's, vissl_eval_runs.py's, vissl_resume_runs.py's).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent

#: Small and CPU-only, for every scenario (the configs' transforms, at 32 px).
SMALL = [
    "config.MACHINE.DEVICE=cpu",
    "config.DISTRIBUTED.BACKEND=gloo",
    "config.DISTRIBUTED.INIT_METHOD=file",
    "config.DATA.NUM_DATALOADER_WORKERS=0",
    "config.DATA.TRAIN.DATA_SOURCES=[synthetic]",
    "config.DATA.TRAIN.DATA_LIMIT=12",
    "config.DATA.TRAIN.BATCHSIZE_PER_REPLICA=4",
    "config.DATA.TRAIN.RANDOM_SYNTHETIC_IMAGES=true",
    "config.DATA.TRAIN.DEFAULT_GRAY_IMG_SIZE=32",
    "config.OPTIMIZER.use_larc=false",
    "config.DISTRIBUTED.NUM_PROC_PER_NODE=1",
    "config.OPTIMIZER.num_epochs=2",
    "config.MODEL.SYNC_BN_CONFIG.CONVERT_BN_TO_SYNC_BN=false",
    "config.LOG_FREQUENCY=1",
    "config.CHECKPOINT.CHECKPOINT_FREQUENCY=1",
    "config.HOOKS.PERF_STATS.MONITOR_PERF_STATS=false",
]
TRANSFORMS = ("config.DATA.TRAIN.TRANSFORMS=[{name: ImgReplicatePil, num_times: 2}, {name: RandomResizedCrop, size: 32},"
              " {name: RandomHorizontalFlip, p: 0.5}, {name: ImgPilColorDistortion, strength: %s},"
              " {name: ImgPilGaussianBlur, p: 0.5, radius_min: 0.1, radius_max: 2.0}, {name: ToTensor},"
              " {name: Normalize, mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}]")  # fmt: skip
MULTICROP = ("config.DATA.TRAIN.TRANSFORMS=[{name: ImgPilToMultiCrop, num_crops: %s, size_crops: %s, crop_scales: %s,"
             " total_num_crops: %d}, {name: RandomHorizontalFlip, p: 0.5}, {name: ImgPilColorDistortion, strength: %s},"
             " {name: ImgPilGaussianBlur, p: 0.5, radius_min: 0.1, radius_max: 2.0}, {name: ToTensor},"
             " {name: Normalize, mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}]")  # fmt: skip
#: The configs with a ResNet-50 trunk run it at 8 channels a group (64 as shipped): the same layers, BN statistics,
#: heads (its stages still end in 256 to 2048 channels) and optimizer state, 4.3 M parameters instead of 25.6 M, so a
#: fifth of each checkpoint's bytes to write, load and digest, and of each step's work.
NARROW = "config.MODEL.TRUNK.RESNETS.WIDTH_PER_GROUP=8"
CONFIGS: dict[str, list[str]] = {
    "simclr": ["config=test/integration_test/quick_simclr_synthetic", TRANSFORMS % 1.0, NARROW],
    "moco": ["config=test/integration_test/quick_moco", TRANSFORMS % 0.5, "config.DATA.TRAIN.DATASET_NAMES=[synthetic]",
             NARROW,
             "config.LOSS.moco_loss.queue_size=64"],  # fmt: skip
    # SwAV: 2 x 32 px + 2 x 16 px crops, a small head, a queue from iteration 2, prototypes frozen for 2 iterations
    "swav": ["config=test/integration_test/quick_swav", "config.DATA.TRAIN.DATASET_NAMES=[synthetic]", NARROW,
             MULTICROP % ("[2, 2]", "[32, 16]", "[[0.14, 1], [0.05, 0.14]]", 4, 1.0),
             "config.MODEL.HEAD.PARAMS=[[swav_head, {dims: [2048, 64, 16], use_bn: true, num_clusters: [20]}]]",
             "config.MODEL.TEMP_FROZEN_PARAMS_ITER_MAP=[[module.heads.0.prototypes0.weight, 2]]",
             "config.LOSS.swav_loss.queue.queue_length=8", "config.LOSS.swav_loss.queue.start_iter=2"],  # fmt: skip
    # DINO: a one-layer ViT on 32 px crops, a small head, the teacher's temperature warmed up over 3 iterations
    "dino": ["config=test/integration_test/quick_dino", "config.DATA.TRAIN.DATASET_NAMES=[synthetic]",
             MULTICROP % ("[2]", "[32]", "[[0.14, 1]]", 2, 0.5),
             "config.MODEL.TRUNK.VISION_TRANSFORMERS.IMAGE_SIZE=32", "config.MODEL.TRUNK.VISION_TRANSFORMERS.NUM_LAYERS=1",
             "config.MODEL.TRUNK.VISION_TRANSFORMERS.NUM_HEADS=2", "config.MODEL.TRUNK.VISION_TRANSFORMERS.HIDDEN_DIM=32",
             "config.MODEL.TRUNK.VISION_TRANSFORMERS.MLP_DIM=64",
             "config.MODEL.HEAD.PARAMS=[[swav_head, {use_weight_norm_prototypes: false, dims: [32, 64, 64, 16], use_bn: false,"
             " return_embeddings: false, activation_name: GELU, num_clusters: [32]}]]",
             "config.LOSS.dino_loss.teacher_temp_warmup_iters=3"],  # fmt: skip
    # VISSL's CPU-test SimCLR (ResNet-50), its transforms at 32 px; it turns auto-resume off, a rerun that resumes on
    "cpu_resnet_simclr": ["config=test/cpu_test/test_cpu_resnet_simclr", TRANSFORMS % 1.0, NARROW,
                          "config.CHECKPOINT.AUTO_RESUME=true"],  # fmt: skip
    # VISSL's CPU-test MoCo and SimCLR (a RegNet of 13 blocks, widths 24 to 368), their transforms at 32 px, auto-resume
    # on as above; MoCo's queue holds 64 keys (it must take whole global batches)
    "cpu_regnet_moco": ["config=test/cpu_test/test_cpu_regnet_moco", TRANSFORMS % 0.5,
                        "config.LOSS.moco_loss.queue_size=64", "config.CHECKPOINT.AUTO_RESUME=true"],  # fmt: skip
    "cpu_regnet_simclr": ["config=test/cpu_test/test_cpu_regnet_simclr", TRANSFORMS % 1.0,
                          "config.CHECKPOINT.AUTO_RESUME=true"],  # fmt: skip
    # PIRL: the image and its 9 jigsaw patches (crops of 96 px, 11 px patches), a memory bank of the dataset's size
    # (its num_train_samples, set by VISSL's task from the data), 8 negatives
    "pirl": ["config=test/integration_test/quick_pirl", "config.DATA.TRAIN.DATASET_NAMES=[synthetic]",
             "config.DATA.TRAIN.TRANSFORMS=[{name: ImgPilToPatchesAndImage, crop_scale_image: [0.08, 1.0],"
             " crop_size_image: 32, crop_scale_patches: [0.6, 1.0], crop_size_patches: 96, num_patches: 9},"
             " {name: RandomHorizontalFlip}, {name: ToTensor}]",
             "config.LOSS.nce_loss_with_memory.negative_sampling_params.num_negatives=8"],  # fmt: skip
    # VISSL's linear evaluation integration test: a frozen ResNet-50 trunk (in eval mode) whose res4 and res5 features
    # feed two linear heads, one accuracy_list_meter over both outputs; train phases only (its test phases are
    # refused), synthetic data labelled by sample index (12 classes), 32 px crops
    "meters": ["config=test/integration_test/quick_eval_in1k_linear", "config.TEST_MODEL=false", NARROW,
               "config.DATA.TRAIN.LABEL_SOURCES=[]", "config.DATA.TRAIN.DATASET_NAMES=[synthetic]",
               "config.DATA.TRAIN.DATA_PATHS=[]",
               "config.MODEL.FEATURE_EVAL_SETTINGS.LINEAR_EVAL_FEAT_POOL_OPS_MAP=[[res4, [AdaptiveAvgPool2d, [[1, 1]]]],"
               " [res5, [AdaptiveAvgPool2d, [[1, 1]]]]]",
               "config.MODEL.HEAD.PARAMS=[[eval_mlp, {in_channels: 1024, dims: [1024, 12]}],"
               " [eval_mlp, {in_channels: 2048, dims: [2048, 12]}]]",
               "config.DATA.TRAIN.TRANSFORMS=[{name: RandomResizedCrop, size: 32}, {name: RandomHorizontalFlip},"
               " {name: ToTensor}]"],  # fmt: skip
}


#: Every LogLossLrEtaHook built in this process (:func:`track_log_hooks`), whose stdout.json :func:`collect` flushes.
LOG_HOOKS: list[Any] = []


def track_log_hooks() -> None:
    from vissl.hooks.log_hooks import LogLossLrEtaHook

    init = LogLossLrEtaHook.__init__

    def tracked(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        LOG_HOOKS.append(self)

    LogLossLrEtaHook.__init__ = tracked


def overrides(name: str, out: Path, extra: list[str] = ()) -> list[str]:
    return [*CONFIGS[name], *SMALL, *extra, f"config.CHECKPOINT.DIR={out}"]


def run_vissl(name: str, out: Path, extra: list[str] = ()) -> dict[str, Any]:
    """VISSL's ``run_distributed_engines.py`` main for one process."""
    import classy_vision.generic.distributed_util as classy_dist
    from vissl.hooks import default_hook_generator
    from vissl.utils.distributed_launcher import launch_distributed
    from vissl.utils.hydra_config import compose_hydra_configuration, convert_to_attrdict

    _, config = convert_to_attrdict(compose_hydra_configuration(overrides(name, out, extra)))
    try:
        launch_distributed(config, node_id=0, engine_name="train", hook_generator=default_hook_generator)
    finally:
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
        classy_dist._cuda_device_index = 0
    return collect(out)


def run_lightning(name: str, out: Path, flags: list[str] = (), extra: list[str] = ()) -> dict[str, Any]:
    """``lightning-hooks train config=... overrides``."""
    from lightning_hooks.train import main

    main([*overrides(name, out, extra), *flags])
    return collect(out)


def collect(out: Path) -> dict[str, Any]:
    """What the run wrote: stdout.json and metrics.json rows, checkpoint files, final weights, Lightning's CSV."""

    for hook in LOG_HOOKS:  # LogLossLrEtaHook's stdout.json: a buffered file closed at exit, flushed here
        if hook.json_stdout_logger is not None:
            hook.json_stdout_logger.flush()

    def rows(path: Path) -> list[dict[str, Any]]:
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    files = sorted(p.name for p in out.glob("*.torch"))
    final = next((name for name in files if "final" in name), None)
    checkpoints = {name: digest(torch.load(out / name, weights_only=False)) for name in files if name != "checkpoint.torch"}
    metrics = sorted(out.glob("lightning_logs/version_*/metrics.csv"))
    return {"stdout": rows(out / "stdout.json"), "metrics": rows(out / "metrics.json"), "files": files,
            "final": final, "checkpoints": checkpoints, "csv": [p.read_text() for p in metrics]}  # fmt: skip


#: Two processes on CPU (gloo), each on its shard of VISSL's sampler: VISSL with the config's NUM_PROC_PER_NODE=2,
#: ``lightning-hooks train`` with ``--devices 2`` (which sets it); 16 samples, 2 iterations a phase.
TWO_PROCESSES = ["config.DATA.TRAIN.DATA_LIMIT=16"]


#: What a process that ran VISSL's launcher (or a DDP run) keeps in its environment: a launcher would take them as
#: its own rank (Lightning's DDP then waits for the other processes instead of starting them).
RANK_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK", "MASTER_ADDR",
                  "MASTER_PORT")  # fmt: skip


def fresh_shell(environ: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment (or ``environ``) without the rank variables the in-process runs before left in it."""
    return {key: value for key, value in (environ or os.environ).items() if key not in RANK_VARIABLES}


def run_two_processes(root: Path, name: str, folder: str, extra: list[str] = ()) -> dict[str, Any]:
    """Both sides in two processes, ``extra`` overrides after :data:`TWO_PROCESSES`: VISSL's launcher with
    ``NUM_PROC_PER_NODE=2`` (:func:`launch_vissl`) and ``lightning-hooks train --devices 2`` as the command a user runs
    (vissl_cli.py); their per-rank records too."""
    runs = {}
    for side in ("vissl", "lightning"):
        out = root / folder / side
        out.mkdir(parents=True)
        arguments = [*overrides(name, out), *TWO_PROCESSES, *extra]
        if side == "vissl":
            launch_vissl([*arguments, "config.DISTRIBUTED.NUM_PROC_PER_NODE=2"])
        else:
            command = [sys.executable, str(HERE / "vissl_cli.py"), side, *arguments, "--devices", "2"]
            proc = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False, env=fresh_shell())
            if proc.returncode:
                raise RuntimeError(f"{side} exited with {proc.returncode}:\n{proc.stderr[-6000:]}")
        ranks = {r: [json.loads(line) for line in (out / f"rank{r}.jsonl").read_text().splitlines()] for r in (0, 1)}
        runs[side] = {**collect(out), "ranks": ranks}
    return runs


def launch_vissl(arguments: list[str]) -> None:
    """``tools/run_distributed_engines.py`` with ``arguments`` (vissl_cli.py's ``vissl`` side: VISSL's
    ``launch_distributed``, whose ``torch.multiprocessing.spawn`` starts every rank), called in this process, which
    has VISSL imported already (a third process importing it only to compose the config and spawn would cost ~5 s
    CPU), in the environment the command starts in (:func:`fresh_environment`)."""
    import vissl_cli

    with fresh_environment():
        vissl_cli.main(["vissl", *arguments])


def run_command(arguments: list[str]) -> dict[str, Any]:
    """``lightning-hooks train`` with ``arguments`` in this process (``lh_testing.run_console_script``, for commands
    that stop before training: a refusal; a process of its own would cost ~5 s CPU), in the environment the command
    starts in (:func:`fresh_environment`): its exit code and what it wrote to stdout and stderr, as the command's
    process would end."""
    from lh_testing import run_console_script

    with fresh_environment():
        code, stdout, stderr = run_console_script(["train", *arguments])
    return {"code": code, "stdout": stdout, "stderr": stderr}


@contextlib.contextmanager
def fresh_environment() -> Iterator[None]:
    """This process's environment as :func:`fresh_shell` while the block runs (the variables it sets are undone
    after it)."""
    environ = dict(os.environ)
    os.environ.clear()
    os.environ.update(fresh_shell(environ))
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(environ)


def resume(root: Path, name: str) -> dict[str, Any]:
    """Each side auto-resumes (VISSL's AUTO_RESUME) from a folder holding VISSL's ``model_phase0.torch`` of scenario
    ``name`` (VISSL's own run of it, in ``root/name/vissl``)."""
    runs = {}
    for side, run in (("vissl", run_vissl), ("lightning", run_lightning)):
        out = root / "resume" / side
        out.mkdir(parents=True)
        shutil.copy(root / name / "vissl" / "model_phase0.torch", out / "model_phase0.torch")
        runs[side] = run(name, out)
    return runs


def digest(value: Any) -> Any:
    """``value`` with each tensor replaced by its dtype, shape and a hash of its bytes (bitwise comparisons without
    carrying ResNet-50 checkpoints between processes)."""
    if isinstance(value, dict):
        return {k: digest(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [digest(v) for v in value]
    if isinstance(value, torch.Tensor):
        data = value.detach().cpu().contiguous().reshape(-1)
        raw = data.view(torch.uint8).numpy().tobytes() if data.numel() else b""
        return ("tensor", str(data.dtype), tuple(value.shape), hashlib.sha1(raw).hexdigest())
    return value


def drop_checkpoints(folder: Path, keep: tuple[str, ...] = ()) -> None:
    """Deletes the ``*.torch`` files under ``folder`` (read by :func:`collect` already), but those named in ``keep``
    (relative to ``folder``)."""
    for path in folder.rglob("*.torch"):
        if str(path.relative_to(folder)) not in keep:
            path.unlink()


def prepare_child() -> None:
    """The subprocess's setup before any scenario: one torch thread, this folder on the path, the real torchvision,
    and LogLossLrEtaHook tracked (:func:`track_log_hooks`)."""
    torch.set_num_threads(1)
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    import real_torchvision

    real_torchvision.activate()
    track_log_hooks()


def start_forkserver() -> None:
    """For a subprocess whose scenarios load with workers: starts the forkserver VISSL's loader workers are forked
    from (``MULTI_PROCESSING_METHOD: forkserver``) with real_torchvision_child.py (which activates the real
    torchvision) and VISSL's data package imported, so each worker starts with torch and VISSL imported (~2.8 s CPU a
    worker otherwise: Python 3.11's forkserver does not preload a main file run by path). The forkserver imports its
    preload from its own path, not the run's: this folder is on its ``PYTHONPATH`` while it starts."""
    import multiprocessing.forkserver

    multiprocessing.set_forkserver_preload(["real_torchvision_child", "vissl.data"])
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), saved]))
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved


def run_scenarios(root: Path, scenarios: dict[str, Callable[[], Any]], keep: dict[str, tuple[str, ...]] | None = None,
                  ) -> None:  # fmt: skip
    """The subprocess side of a VISSL differential: each scenario in order, its result or its traceback (reported by
    the scenario's test, :func:`real_torchvision.scenario_result`), its checkpoint files (under ``root/<name>``)
    deleted once read but those ``keep`` names for it (a later scenario's start); all of them saved to
    ``root/results.pt``."""
    results: dict[str, Any] = {}
    for name, scenario in scenarios.items():
        started = time.perf_counter(), _cpu_seconds()
        try:
            results[name] = scenario()
        except Exception:  # noqa: BLE001  (reported by the scenario's test)
            results[name] = {"failed": traceback.format_exc()}
        drop_checkpoints(root / name, keep=(keep or {}).get(name, ()))
        wall, cpu = time.perf_counter() - started[0], _cpu_seconds() - started[1]
        print(f"scenario {name}: {wall:.1f} s wall, {cpu:.1f} s CPU", file=sys.stderr, flush=True)  # in its stderr
    drop_checkpoints(root)
    torch.save(results, root / "results.pt")


def _cpu_seconds() -> float:
    """CPU seconds of this process and of the processes it started and waited for (the commands a user runs)."""
    import resource

    usages = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return sum(usage.ru_utime + usage.ru_stime for usage in usages)


def child_main(out: str) -> None:
    prepare_child()
    root = Path(out)
    one_process = {name: (lambda name=name: {"vissl": run_vissl(name, root / name / "vissl"),
                                             "lightning": run_lightning(name, root / name / "lightning")})
                   for name in ("simclr", "moco", "swav", "dino")}  # fmt: skip  # meters: vissl_eval_runs.py's
    # resume: from DINO's phase 0 (its loss state: teacher, center; a ResNet-50 checkpoint costs VISSL's resume ~15 s
    # of CPU, Classy's broadcast_object turning 190 MB into a tensor byte by byte)
    # two processes: DINO (its teacher and centering over ranks), MoCo (MoCoHook's batch shuffle over ranks, its queue
    # of keys gathered from both), SimCLR (simclr_info_nce_loss over the embeddings of both ranks); SwAV in two
    # processes is vissl_resume_runs.py's (killed mid-phase, rerun)
    two = {f"{name}_two_processes": (lambda name=name: run_two_processes(root, name, f"{name}_two_processes"))
           for name in ("dino", "cpu_regnet_moco", "cpu_regnet_simclr")}  # fmt: skip
    run_scenarios(root, {**one_process, "resume": lambda: resume(root, "dino"), **two},
                  keep={"dino": ("vissl/model_phase0.torch",)})  # resume's start  # fmt: skip
