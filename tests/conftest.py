"""Fixtures shared by every test directory."""

from __future__ import annotations

import os
import sys

import pytest
import suite_order
import torch
from lh_testing import DDP_LAUNCH_VARIABLES

torch.set_num_threads(1)
# the test subprocesses too: the suite runs on two xdist workers (pyproject's addopts), two cores between them
os.environ.setdefault("OMP_NUM_THREADS", "1")

#: what a launcher (torchrun, Lightning's, VISSL's, Classy's) sets: left in the pytest process by a test, a variable
#: reaches the subprocesses of the tests after it (``RANK`` made a resumed run a torchrun rank)
LAUNCHER_VARIABLES = (*DDP_LAUNCH_VARIABLES, "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files that take longest first, longest first (tests/helpers/suite_order.py); the others after them in
    their usual order, so that the two xdist workers finish together."""
    items.sort(key=suite_order.rank)


def put_back(before: dict[str, str | None]) -> None:
    """The environment variables of ``before`` set to its values again (None: unset)."""
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(autouse=True)
def no_launcher_variable_left():
    """Each test ends with the launcher variables it started with: one it leaves set (or changed, or removed) is put
    back and the test errors at teardown naming it, as the tests after it would run under it."""
    before = {name: os.environ.get(name) for name in LAUNCHER_VARIABLES}
    yield
    left = {name: os.environ.get(name) for name in LAUNCHER_VARIABLES if os.environ.get(name) != before[name]}
    put_back(before)
    if left:
        changes = ", ".join(f"{name}={value!r} (was {before[name]!r})" for name, value in left.items())
        pytest.fail(
            f"the test left launcher variables in the pytest process: {changes}; restore them where they are set"
        )


#: what ``lightning.seed_everything`` exports (``LightningCLI`` calls it with ``workers=True``): left in the pytest
#: process, ``PL_SEED_WORKERS=1`` makes every later fit in it and its subprocesses seed loader workers Lightning's way
#: (``pl_worker_init_function``), not the legacy host's; and ``PYTHONWARNINGS``, which the console script's entry
#: points extend for the processes a run starts (``console.quiet_upstream_notices``)
SEED_VARIABLES = ("PL_GLOBAL_SEED", "PL_SEED_WORKERS", "PYTHONWARNINGS")


@pytest.fixture(autouse=True)
def no_lightning_seed_left():
    """Each test ends with the seed and warning variables it started with (Lightning and the entry points set them by
    design: put back quietly)."""
    before = {name: os.environ.get(name) for name in SEED_VARIABLES}
    yield
    put_back(before)


@pytest.fixture(autouse=True)
def no_process_group_left():
    """Lightning's DDP strategy leaves its default process group after a single-process fit (the process may fit
    again); tests that build their own then fail with "initialize the default process group twice", depending on
    the order tests run in. Each test starts without one."""
    yield
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


@pytest.fixture
def lightning_ddp_in_this_process():
    """For a test that fits under Lightning's DDP strategy in the pytest process: Lightning's launcher exports
    ``MASTER_ADDR``, ``MASTER_PORT``, ``NODE_RANK`` and ``LOCAL_RANK`` (for the ranks it would start) into the process
    that fits and leaves them there, as it does in a user's script; they are put back after the test (with
    ``LOCAL_RANK`` set, a later Lightning run takes its processes as launched by someone else)."""
    before = {name: os.environ.get(name) for name in LAUNCHER_VARIABLES}
    yield
    put_back(before)


@pytest.fixture(autouse=True)
def mmengine_current_instances_restored():
    """MMEngine's current ``DefaultScope`` / ``Visualizer`` / ``MessageHub`` / ``MMLogger`` are process-wide (the
    latest instance of each class): a test that creates one (a Runner, a config with ``default_scope``) would leave
    it current for the tests after it. Each test ends with the current instances it started with; the default
    scopes it created are dropped (no scope current means MMEngine's own), other instances stay reachable by name."""
    mixin = getattr(sys.modules.get("mmengine.utils.manager"), "ManagerMixin", None)
    classes = [c for c in _subclasses(mixin) if "_instance_dict" in vars(c)] if mixin is not None else []
    saved = {c: list(c._instance_dict) for c in classes}
    yield
    for cls, names in saved.items():
        instances = cls._instance_dict
        if cls.__name__ == "DefaultScope":
            for name in [n for n in instances if n not in names]:
                del instances[name]
        elif names and names[-1] in instances:
            instances.move_to_end(names[-1])


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


@pytest.fixture
def trainer_kwargs(tmp_path):
    """Quiet, CPU-only Trainer settings writing under tmp_path."""
    return dict(
        default_root_dir=tmp_path,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
