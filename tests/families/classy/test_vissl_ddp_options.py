"""``VisslConfigModule`` hands Lightning's DDP the arguments VISSL's own task wraps its model with
(``vissl_ddp_options``): the reference is VISSL's ``SelfSupervisionTask._set_ddp_options`` /
``set_ddp_bucket_cap_mb`` and Classy's ``init_distributed_data_parallel_model``, run on the same composed config."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import real_torchvision
from lh_testing import subprocess_env

pytestmark = pytest.mark.skipif(
    not real_torchvision.available(), reason=f"{real_torchvision.SITE} missing: run `bash scripts/setup.sh test`"
)

CHILD = r"""
import inspect, json, sys, types
import real_torchvision
real_torchvision.activate()
from classy_vision.tasks import ClassificationTask as ClassyTask
from vissl.trainer.train_task import SelfSupervisionTask
from lightning_hooks.families.classy.vissl_module import vissl_ddp_options
from lightning_hooks.families.classy.vissl import compose

def options(overrides):
    config = compose(["config=test/integration_test/quick_simclr_synthetic", *overrides])
    recorded = {"broadcast_buffers_mode": None}
    host = types.SimpleNamespace(config=config)
    host.set_distributed_options = lambda **kw: recorded.update(kw)
    SelfSupervisionTask._set_ddp_options(host)
    SelfSupervisionTask.set_ddp_bucket_cap_mb(host)
    default_mode = inspect.signature(ClassyTask.set_distributed_options).parameters["broadcast_buffers_mode"].default
    mode = recorded["broadcast_buffers_mode"] or default_mode
    vissl = {"broadcast_buffers": mode.name == "FORWARD_PASS", "bucket_cap_mb": host.ddp_bucket_cap_mb,
             "find_unused_parameters": inspect.signature(ClassyTask.set_distributed_options).parameters[
                 "find_unused_parameters"].default}
    return {"vissl": vissl, "ours": vissl_ddp_options(config)}

print(json.dumps([options(overrides) for overrides in json.loads(sys.argv[1])]))
"""


#: the override sets compared, each by its test id
OVERRIDES = {"defaults": [], "no-broadcast-bucket-7": ["config.DISTRIBUTED.BROADCAST_BUFFERS=false",
                                                       "config.DATA.DDP_BUCKET_CAP_MB=7"]}  # fmt: skip


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, dict]:
    """Both sides' options for each of :data:`OVERRIDES`, from one subprocess."""
    # in a temporary folder: composing dumps VISSL's train_config.yaml into CHECKPOINT.DIR, "." by default
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(list(OVERRIDES.values()))], env=subprocess_env(),
                          capture_output=True, text=True, timeout=300, cwd=tmp_path_factory.mktemp("ddp_options"))  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    return dict(zip(OVERRIDES, json.loads(proc.stdout.strip().splitlines()[-1]), strict=True))


@pytest.mark.parametrize("name", OVERRIDES)
def test_vissl_ddp_options_are_what_vissl_wraps_its_model_with(results: dict[str, dict], name: str) -> None:
    result = results[name]
    assert result["ours"] == result["vissl"]
    assert result["vissl"]["broadcast_buffers"] is (not OVERRIDES[name])
