"""``lightning-hooks train --devices 2`` on an OpenMMLab 1.x config (issue #33): Lightning's DDP (CPU, gloo) against
mmcls 0.x's own ``tools/train.py --launcher pytorch`` under ``torchrun`` with 2 processes, as its ``dist_train.sh``
runs it (tests/helpers/mmcv_dist_train.py bridges that script's two CUDA-only calls), on a derived config of the
shipped ``resnet18_8xb16_cifar10.py``: a narrow ResNet, 8 generated images (2 iterations per rank and epoch), 3
epochs, ``DistEvalHook`` each epoch, loaders with 2 persistent workers (``workers_per_gpu=2``, mmcls's default
``persistent_workers``), then resumed from a checkpoint written inside an epoch. Rank by rank: each
iteration's loss, learning rate and counters, the sampler's epoch (``DistSamplerSeedHook``), the model wrapper hooks
see (``MMDistributedDataParallel``, ``runner.model.module``) and the final weights, bitwise; rank 0's json and text
logs, checkpoints (written once) and config dump. Each side resumes from its own checkpoint. (The fresh run is
tests/helpers/mmcv_ddp_runs.py's, which test_write_audit_mmcv.py audits: ours with every Lightning logger.)"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest
import torch
from lh_testing import HELPERS
from mmcv_testkit import mmcv_runner  # noqa: F401  (skips outside .venv-mmcv1)
from mmcv_train_kit import (assert_same_checkpoint, assert_same_weights, checkpoint, json_log, run_opening, text_log,
                            tiny_fcn, tiny_retinanet)  # fmt: skip  # names aligned under the import

pytest.importorskip("mmcls", reason="mmcls 0.x lives in .venv-mmcv1")
from mmcv_ddp_runs import CONFIG, fresh_mmcls, mmcls_sides, port, run  # noqa: E402
from write_audit import LOGGER_STORES  # noqa: E402


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> Path:
    """mmcv_ddp_runs.fresh_mmcls's run (ours with every Lightning logger, both sides' writes recorded), which
    tests/integration/ddp/test_write_audit_mmcv.py reads too."""
    return fresh_mmcls(tmp_path_factory)


def _without_work_dir(config: str) -> str:
    return re.sub(r"(?m)^work_dir = .*$", "", config)


def _resume_from(resumed: tuple[Path, Path] | None, side: int) -> list[str]:
    """``--resume-from`` the side's own checkpoint of ``resumed`` (ours, the reference's); none without it."""
    return ["--resume-from", str(resumed[side])] if resumed else []


def _resumed_json_logs(resumed: tuple[Path, Path], writers: tuple[Path, Path]) -> tuple[list[dict], list[dict]]:
    """Both sides' json logs (:func:`json_log`) after each resumed from its own checkpoint, written in ``writers``
    (ours, the reference's). The first record is the checkpoint's ``meta``, which ``EpochBasedRunner.resume`` makes
    the run's; the config text it holds (``meta['config']``, recorded by mmcls's and mmdet's scripts) names the work
    dir of the run that wrote the checkpoint: that path, and only there, is written ``WRITER``. Every other field of
    every record (the rest of the config text, ``env_info``, ``seed``, ``exp_name``, the train and val records) is
    compared as written."""
    logs = []
    for folder, writer in zip(resumed, writers, strict=True):
        records = json_log(folder)
        records[0]["config"] = records[0]["config"].replace(str(writer), "WRITER")
        logs.append(records)
    return logs[0], logs[1]


def _assert_same_rank_records(ours: Path, ref: Path, what: str) -> list[list[dict]]:
    """Rank by rank, :data:`mmcv_ddp_runs.RANK_RECORD`'s records (each iteration named in a failure) and final weights."""
    records = [[json.loads((d / f"rank{r}.json").read_text()) for r in (0, 1)] for d in (ours, ref)]
    for rank in (0, 1):
        mine, theirs = records[0][rank], records[1][rank]
        for i, (a, b) in enumerate(zip(mine["iters"], theirs["iters"])):
            assert a == b, (f"{what}: rank {rank}, iteration {i}: [epoch, iter, inner_iter, batches, loss, lr, "
                            f"BN running means] {a} != {b}")
        assert mine == theirs, f"{what}: rank {rank}"
        assert_same_weights(*(torch.load(d / f"weights_rank{rank}.pth", weights_only=False) for d in (ours, ref)),
                            f"{what}: rank {rank}")  # fmt: skip  # arguments aligned under the call
    return records


def test_two_processes_train_as_dist_train_sh_rank_by_rank(fresh):
    """3 epochs, a checkpoint every 3 iterations (epoch_2.pth inside epoch 2), ours with every Lightning logger
    (mmcv_ddp_runs.fresh_mmcls's run, whose writes test_write_audit_mmcv.py compares: their stores are left out of
    the work dir's files); then each side resumed from its own mid-epoch checkpoint with ``--resume-from`` (mmcls
    0.25's ``tools/train.py`` has no ``--auto-resume``)."""
    ours, ref, config = fresh / "ours", fresh / "ref", fresh / CONFIG
    stores = set(LOGGER_STORES.values())
    assert stores <= {p.name for p in ours.iterdir()}
    names = [sorted(re.sub(r"^\d{8}_\d{6}", "TS", p.name) for p in d.iterdir() if p.name not in stores)
             for d in (ours, ref)]  # fmt: skip
    assert names[0] == names[1] == sorted(["TS.log", "TS.log.json", config.name, "epoch_2.pth", "epoch_3.pth",
                                           "latest.pth", "rank0.json", "rank1.json", "weights_rank0.pth",
                                           "weights_rank1.pth"])  # fmt: skip
    records = _assert_same_rank_records(ours, ref, config.name)
    for rank in (0, 1):
        theirs = records[1][rank]
        assert theirs["rank"] == rank and theirs["world_size"] == 2
        assert theirs["wrapper"] and theirs["mmddp"] and theirs["inner"] == "ImageClassifier"
    # runner.iter before it counts the iteration; the sampler's epoch before DistSamplerSeedHook (NORMAL, registered
    # after the custom hooks) sets it: the previous epoch's
    assert [r[1] for r in records[1][0]["iters"]] == list(range(6)) and records[1][0]["sampler_epochs"] == [0, 0, 1]
    assert records[1][0]["iters"][0][4] != records[1][1]["iters"][0][4]  # each rank trains its own shard
    assert records[1][0]["iters"][1][6] != records[1][1]["iters"][1][6]  # and keeps its own BN statistics
    assert json_log(ours) == json_log(ref)
    assert [r["mode"] for r in json_log(ref)[1:]] == ["train", "train", "val"] * 3
    starts = ("Epoch", "Saving checkpoint", "Set random seed", "Distributed")
    assert text_log(ours, "mmcls", starts) == text_log(ref, "mmcls", starts)
    assert "Distributed training: True" in text_log(ref, "mmcls", starts)
    assert run_opening(ours) == run_opening(ref)
    assert "(NORMAL      ) DistSamplerSeedHook" in run_opening(ref)
    assert _without_work_dir((ours / config.name).read_text()) == _without_work_dir((ref / config.name).read_text())
    for name in ("epoch_2.pth", "epoch_3.pth"):
        mine, theirs = checkpoint(ours / name), checkpoint(ref / name)
        assert mine["meta"] == theirs["meta"], name
        assert_same_weights(mine["state_dict"], theirs["state_dict"], name)
        assert str(mine["optimizer"]) == str(theirs["optimizer"]), name
    assert os.readlink(ours / "latest.pth") == "epoch_3.pth"
    # each side resumed from its own epoch_2.pth (meta epoch 2: written after the first iteration of epoch 2): epoch
    # 3, validated
    resumed = fresh / "ours_resumed", fresh / "ref_resumed"
    mmcls_sides(config, fresh, *resumed, resumed=(ours / "epoch_2.pth", ref / "epoch_2.pth"))
    ours_resumed, ref_resumed = resumed
    records = _assert_same_rank_records(ours_resumed, ref_resumed, f"{config.name} resumed")
    assert [r[:3] for r in records[1][0]["iters"]] == [[2, 2, 0], [2, 3, 1]]
    mine, theirs = _resumed_json_logs(resumed, (ours, ref))
    assert mine == theirs
    assert [r["mode"] for r in theirs[1:]] == ["train", "train", "val"] and "WRITER" in theirs[0]["config"]
    starts = ("resumed", *starts)
    assert text_log(ours_resumed, "mmcls", starts) == text_log(ref_resumed, "mmcls", starts)
    assert "resumed epoch 2, iter 2" in text_log(ref_resumed, "mmcls", starts)
    assert_same_checkpoint(ours_resumed / "epoch_3.pth", ref_resumed / "epoch_3.pth")


ITER_RECORD = '''
import json
import multiprocessing
import os
import signal

import torch
from mmcv.parallel import MMDistributedDataParallel
from mmcv.runner import HOOKS, Hook


@HOOKS.register_module(force=True)
class IterRecord(Hook):
    """Each train iteration as this rank's runner shows it to its hooks, written as rank{R}.json after each iteration
    (a killed run leaves its iterations) with the wrapper it sees and the start method its data loader workers get;
    the final weights as weights_rank{R}.pth after the run."""

    def __init__(self):
        self.iters = []

    def after_train_iter(self, runner):
        loader = getattr(runner.data_loader, "_dataloader", runner.data_loader)  # IterBasedRunner's IterLoader
        stats = sum(m.running_mean.sum().item() for m in runner.model.modules() if isinstance(m, torch.nn.BatchNorm2d))
        self.iters.append([runner.epoch, runner.iter, runner.inner_iter, loader.sampler.epoch,
                           {k: round(v, 12) for k, v in runner.outputs["log_vars"].items()},
                           runner.current_lr()[0], stats, runner.outputs["loss"].item()])
        record = dict(iters=self.iters, rank=runner.rank, world_size=runner.world_size,
                      mmddp=isinstance(runner.model, MMDistributedDataParallel),
                      start_method=multiprocessing.get_start_method(allow_none=True))
        with open(f"{runner.work_dir}/rank{runner.rank}.json", "w") as f:
            json.dump(record, f)

    def after_run(self, runner):
        torch.save(runner.model.module.state_dict(), f"{runner.work_dir}/weights_rank{runner.rank}.pth")


@HOOKS.register_module(force=True)
class KillRank(Hook):
    """A crash or a preemption: SIGKILL of this process when train iteration ``runner.iter`` starts on rank R, where
    the environment has KILL_RANK_AT=R:ITER (no handler, hook or launcher code of the process runs after it)."""

    def before_train_iter(self, runner):
        if os.environ.get("KILL_RANK_AT") == f"{runner.rank}:{runner.iter}":
            os.kill(os.getpid(), signal.SIGKILL)
'''


def _two_sides(package: str, config: Path, tmp_path: Path, ours: Path, ref: Path, *flags: str,
               killed: str | None = None, resumed: tuple[Path, Path] | None = None) -> tuple[str, str]:  # fmt: skip
    """``lightning-hooks train CONFIG --devices 2`` in ``ours``, then the library's ``tools/train.py`` under torchrun
    in ``ref``, both with ``--seed 0`` and ``flags``, each in 2 processes with mmcv's ops stubbed
    (tests/helpers/mmcv_cpu_ops.py); ``killed``: see :func:`mmcv_ddp_runs.run`; ``resumed``: see
    :func:`_resume_from`. Returns their outputs."""
    common = ["--seed", "0", *flags]
    mine = run([sys.executable, str(HELPERS / "mmcv_cpu_ops.py"), package, "train", str(config), "--work-dir",
                str(ours), *common, *_resume_from(resumed, 0), "--accelerator", "cpu", "--devices", "2", "--strategy",
                "ddp"], cwd=tmp_path, paths=(HELPERS,), killed=killed)  # fmt: skip
    theirs = run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", port(),
                  str(HELPERS / "mmcv_dist_train.py"), package, str(config), "--work-dir", str(ref), *common,
                  *_resume_from(resumed, 1), "--launcher", "pytorch"], cwd=tmp_path, paths=(tmp_path, HELPERS),
                 killed=killed)  # fmt: skip
    return mine, theirs


def _assert_same_ranks(ours: Path, ref: Path, what: str, weights: bool = True) -> list[dict]:
    """Rank by rank, each iteration's record (tests/families/mmcv/test_train_ddp.py's ``IterRecord``) and the final
    weights (not a killed run's), bitwise. Returns the reference's records."""
    records = []
    for rank in (0, 1):
        mine, theirs = (json.loads((d / f"rank{rank}.json").read_text()) for d in (ours, ref))
        for i, (a, b) in enumerate(zip(mine["iters"], theirs["iters"])):
            assert a == b, (f"{what}: rank {rank}, iteration {i}: [epoch, iter, inner_iter, sampler epoch, log_vars, "
                            f"lr, BN running means, the rank's loss] {a} != {b}")
        assert mine == theirs, f"{what}: rank {rank}"
        assert theirs["rank"] == rank and theirs["world_size"] == 2 and theirs["mmddp"]
        if weights:
            assert_same_weights(*(torch.load(d / f"weights_rank{rank}.pth", weights_only=False) for d in (ours, ref)),
                                f"{what}: rank {rank}")  # fmt: skip  # arguments aligned under the call
        records.append(theirs)
    # each rank trains its own shard: its own loss (the libraries average log_vars over the ranks, not the loss)
    assert records[0]["iters"][0][7] != records[1]["iters"][0][7], what
    return records


def _newest_log(folder: Path, suffix: str) -> Path:
    return max(folder.glob(f"*{suffix}"), key=lambda p: p.name)


def test_an_iteration_based_mmseg_config_killed_and_resumed_in_two_processes_as_dist_train_sh(tmp_path):
    """mmseg 0.30's shipped FCN (IterBasedRunner, poly LR; :func:`mmcv_train_kit.tiny_fcn`: plain BN for the
    shipped SyncBN, on CPU), 8 train images (2 iterations a pass on each rank), DistEvalHook (mIoU) and a checkpoint
    every 3 iterations, 6 iterations, rank by rank as mmseg's ``tools/train.py`` under torchrun: rank 1 killed
    (SIGKILL) as its 5th iteration starts, after iter_3.pth was written (the launcher then ends rank 0, as after a
    crash or a preemption: torchrun's agent there, Lightning's process observer here), then the same command with
    ``--auto-resume`` in its work dir, on each side from its own checkpoint (mmseg's ``find_latest_checkpoint``:
    ``latest.pth``, mmcv's link to the last checkpoint written whole)."""
    (tmp_path / "iter_record.py").write_text(ITER_RECORD)
    config = tiny_fcn(tmp_path, train_images=8, imports=("iter_record",), lines="""
        runner = dict(max_iters=6)
        checkpoint_config = dict(interval=3)
        evaluation = dict(interval=3)
        custom_hooks = [dict(type='IterRecord'), dict(type='KillRank')]
        dist_params = dict(backend='gloo')
    """)  # fmt: skip  # the config's lines under the call
    ours, ref = tmp_path / "ours", tmp_path / "ref"
    _, theirs = _two_sides("mmseg", config, tmp_path, ours, ref, killed="1:4")
    assert "failed (exitcode: -9) local_rank: 1" in theirs  # torchrun's agent saw the kill, then ended rank 0
    names = [sorted(re.sub(r"^\d{8}_\d{6}", "TS", p.name) for p in d.iterdir()) for d in (ours, ref)]
    assert names[0] == names[1] == sorted(["TS.log", "TS.log.json", config.name, "iter_3.pth", "latest.pth",
                                           "rank0.json", "rank1.json"])  # fmt: skip
    assert os.readlink(ours / "latest.pth") == os.readlink(ref / "latest.pth") == "iter_3.pth"
    # each rank's iterations up to the kill: rank 0 never finished the 5th (its gradients wait for rank 1's)
    records = _assert_same_ranks(ours, ref, f"{config.name} killed", weights=False)
    assert [r[1] for r in records[0]["iters"]] == [0, 1, 2, 3] and [r[3] for r in records[0]["iters"]] == [0, 0, 1, 1]
    # mmcv's init_dist sets it where none is set, and mmseg's script sets its processes up after init_dist
    assert records[0]["start_method"] == "spawn"
    assert json_log(ours) == json_log(ref)
    assert [r["mode"] for r in json_log(ref)[1:]] == ["train"] * 3 + ["val", "train"]
    starts = ("Iter", "Saving checkpoint", "Set random seed", "Distributed")
    assert text_log(ours, "mmseg", starts) == text_log(ref, "mmseg", starts)
    assert_same_checkpoint(ours / "iter_3.pth", ref / "iter_3.pth")
    assert run_opening(ours) == run_opening(ref)
    # resumed: iterations 4 to 6, from a new pass as mmcv's IterLoader starts one
    _two_sides("mmseg", config, tmp_path, ours, ref, "--auto-resume")
    records = _assert_same_ranks(ours, ref, f"{config.name} resumed")
    # iter_3.pth holds meta iter 2 (IterBasedRunner records it before counting the iteration): iteration 3 again, then
    # 4 to 6, from a new pass (the sampler's epoch from 0 again) as mmcv's IterLoader starts one
    assert [r[1:4] for r in records[0]["iters"]] == [[2, 0, 0], [3, 0, 0], [4, 0, 1], [5, 0, 1]]
    logs = [_newest_log(d, ".log.json") for d in (ours, ref)]
    assert json_log(logs[0]) == json_log(logs[1])  # the config's record first (auto_resume = True on both sides)
    assert [(r["mode"], r["iter"]) for r in json_log(logs[1])[1:]] == [("train", 3), ("val", 1), ("train", 4),
                                                                        ("train", 5), ("train", 6), ("val", 1)]
    starts = ("resumed", *starts)
    texts = [text_log(_newest_log(d, ".log"), "mmseg", starts) for d in (ours, ref)]
    assert texts[0] == texts[1] and "resumed from epoch: 1, iter 2" in texts[1]
    assert_same_checkpoint(ours / "iter_6.pth", ref / "iter_6.pth")


def test_an_mmdet_config_validates_and_resumes_mid_epoch_in_two_processes_as_dist_train_sh(tmp_path):
    """mmdet 2.28's shipped RetinaNet (:func:`mmcv_train_kit.tiny_retinanet`: BN as shipped), 8 train images (2
    iterations an epoch on each rank, DistributedGroupSampler), 3 epochs with warmup and a step, a checkpoint every 3
    iterations (epoch_2.pth inside epoch 2), validated each epoch as shipped (``evaluation = dict(interval=1,
    metric='bbox')``: mmdet's DistEvalHook, COCO bbox mAP on 5 val images, 3 and 2 a rank with the sampler's padding):
    rank by rank as mmdet's ``tools/train.py`` under torchrun, the mAP records of the json log and the text log's
    lines; then each side resumed from its own mid-epoch checkpoint with ``--resume-from`` (the iteration rescaled
    from the checkpoint's 2 GPUs to the 2 processes: unchanged)."""
    (tmp_path / "iter_record.py").write_text(ITER_RECORD)
    config = tiny_retinanet(tmp_path, val=5, imports=("iter_record",), lines="""
        runner = dict(max_epochs=3)
        checkpoint_config = dict(interval=3, by_epoch=False)
        custom_hooks = [dict(type='IterRecord')]
        dist_params = dict(backend='gloo')
    """)  # fmt: skip  # the config's lines under the call
    ours, ref = tmp_path / "ours", tmp_path / "ref"
    _two_sides("mmdet", config, tmp_path, ours, ref)
    names = [sorted(re.sub(r"^\d{8}_\d{6}", "TS", p.name) for p in d.iterdir()) for d in (ours, ref)]
    assert names[0] == names[1] == sorted(["TS.log", "TS.log.json", config.name, "epoch_2.pth", "epoch_3.pth",
                                           "latest.pth", "rank0.json", "rank1.json", "weights_rank0.pth",
                                           "weights_rank1.pth"])  # fmt: skip
    records = _assert_same_ranks(ours, ref, config.name)
    assert records[0]["start_method"] == "fork"  # mmdet's config, set up before init_dist
    # [epoch, iter, inner_iter, the sampler's epoch] (DistSamplerSeedHook sets it before the custom hooks' turn)
    assert [r[:4] for r in records[0]["iters"]] == [[e, 2 * e + i, i, e] for e in range(3) for i in range(2)]
    _assert_same_map_records(json_log(ours), json_log(ref), config.name, epochs=[1, 2, 3])
    starts = ("Epoch", "Saving checkpoint", "Set random seed", "Distributed", "Evaluating")
    assert text_log(ours, "mmdet", starts) == text_log(ref, "mmdet", starts)
    # written after the first iteration of epoch 2 (meta epoch 2, iter 2): resumed, the run goes on at epoch 3
    assert torch.load(ref / "epoch_2.pth", weights_only=False)["meta"]["iter"] == 2
    for name in ("epoch_2.pth", "epoch_3.pth"):
        assert_same_checkpoint(ours / name, ref / name)
    # each side resumed from its own epoch_2.pth
    resumed = tmp_path / "ours_resumed", tmp_path / "ref_resumed"
    _two_sides("mmdet", config, tmp_path, *resumed, resumed=(ours / "epoch_2.pth", ref / "epoch_2.pth"))
    ours_resumed, ref_resumed = resumed
    records = _assert_same_ranks(ours_resumed, ref_resumed, f"{config.name} resumed")
    assert [r[:4] for r in records[0]["iters"]] == [[2, 2, 0, 2], [2, 3, 1, 2]]
    _assert_same_map_records(*_resumed_json_logs(resumed, (ours, ref)), f"{config.name} resumed", epochs=[3])
    starts = ("resumed", *starts)
    assert text_log(ours_resumed, "mmdet", starts) == text_log(ref_resumed, "mmdet", starts)
    assert "resumed epoch 2, iter 2" in text_log(ref_resumed, "mmdet", starts)
    assert run_opening(ours_resumed) == run_opening(ref_resumed)
    assert "(LOW         ) DistEvalHook" in run_opening(ref_resumed)
    assert_same_checkpoint(ours_resumed / "epoch_3.pth", ref_resumed / "epoch_3.pth")


def _assert_same_map_records(mine: list[dict], theirs: list[dict], what: str, epochs: list[int]) -> None:
    """The same json log records (ours, the reference's), the val ones with COCO's bbox mAPs (DistEvalHook's,
    evaluated on rank 0 over both ranks' results), one after each epoch of ``epochs``, some detection scored above
    0."""
    for i, (a, b) in enumerate(zip(mine, theirs)):
        assert a == b, f"{what}: json log record {i}: {a} != {b}"
    assert len(mine) == len(theirs), what
    val = [r for r in theirs if r.get("mode") == "val"]
    assert [r["epoch"] for r in val] == epochs, what
    assert all("bbox_mAP" in r and "bbox_mAP_copypaste" in r for r in val), (what, val)
    assert any(r["bbox_mAP_50"] > 0 for r in val), (what, val)
