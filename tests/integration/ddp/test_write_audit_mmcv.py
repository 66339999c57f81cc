"""Only rank 0 writes, OpenMMLab 1.x (mmcv.runner), in ``.venv-mmcv1`` (run from the main suite by
tests/families/mmcv/test_venv_ddp.py, with the family's other 2-process tests): ``lightning-hooks train --devices 2``
with every Lightning logger against mmcls 0.x's own ``tools/train.py --launcher pytorch`` under torchrun
(tests/helpers/mmcv_dist_train.py, as its ``dist_train.sh``), on mmcv_train_kit's tiny ResNet CIFAR config (3 epochs,
evaluation, checkpoints, loaders with workers), each rank's writes under its work dir (tests/helpers/write_audit.py)
compared rank by rank. The run is tests/helpers/mmcv_ddp_runs.py's fresh mmcls run, which
tests/families/mmcv/test_train_ddp.py compares rank by rank too (one run for both)."""

from __future__ import annotations

import pytest
import write_audit
from mmcv_testkit import mmcv_runner  # noqa: F401  (skips outside .venv-mmcv1)

pytest.importorskip("mmcls", reason="mmcls 0.x lives in .venv-mmcv1")
from mmcv_ddp_runs import fresh_mmcls
from mmcv_mlflow_clients import clients_by_rank


def test_mmcv_ranks_write_what_dist_train_sh_ranks_write(tmp_path_factory):
    root = fresh_mmcls(tmp_path_factory)
    sides = write_audit.by_side(write_audit.writes(root / "writes"))
    assert "write epoch_3.pth" in sides["ref"][0] and 1 in sides["ref"]  # the host's rank 1 ran here
    assert write_audit.differences(sides["ref"], sides["ours"]) == {}


def test_rank_1_makes_no_mlflow_client(tmp_path_factory):
    """MLflow's client is made on the rank that logs alone (``trainer_options._client_made_when_used``): rank 1 writes
    nothing under ``mlruns/`` (the audit above), but a client made there writes the ``file:`` store's folders and
    ``0/meta.yaml`` only where it gets there before rank 0 and otherwise only checks that they are there, which no
    write audit sees; so each rank of the same run counts the clients it holds at the end of the fit
    (tests/helpers/mmcv_mlflow_clients.py). Mutation: the client made on every rank fails it ({0: 1, 1: 1})."""
    assert clients_by_rank(fresh_mmcls(tmp_path_factory) / "mlflow_clients") == {0: 1, 1: 0}
