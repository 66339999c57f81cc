"""A VISSL user's own trunk, loss and hook (registered by a module of theirs) train under ``lightning-hooks train
config=... --import my_vissl_ext --hook-generator my_vissl_ext:hook_generator`` exactly as under the user's launcher
script, which imports the module and gives VISSL's ``launch_distributed`` its ``hook_generator`` (VISSL has no way to
name a module in a config). Both run as programs in the folder holding the module (vissl_project_runs.py), on one
process and on two (``--devices 2`` against ``NUM_PROC_PER_NODE=2``). Compared:
``stdout.json`` (losses and LRs per iteration), the user hook's file, the checkpoint files and their contents."""

from __future__ import annotations

import pytest
import real_torchvision

pytestmark = pytest.mark.skipif(not real_torchvision.available(), reason="run `bash scripts/setup.sh test`")


def _without_times(rows: list[dict]) -> list[dict]:
    """stdout.json's rows without the fields that hold times and memory, which differ between any two runs."""
    return [{k: v for k, v in row.items() if not k.startswith(("btime", "eta", "rolling_eta", "peak_mem"))} for row in rows]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    import vissl_project_runs

    root = vissl_project_runs.folder(tmp_path_factory.mktemp("vissl_project"))
    return {(side, n): vissl_project_runs.run(root, side, n) for side in ("vissl", "console") for n in (1, 2)}


@pytest.mark.parametrize("processes", [1, 2])
def test_a_users_vissl_module_trains_as_under_their_launcher(runs, processes):
    theirs, ours = runs["vissl", processes], runs["console", processes]
    assert len(theirs["stdout"]) == 6  # 2 epochs of 3 iterations (12 images per process, batches of 4)
    assert _without_times(ours["stdout"]) == _without_times(theirs["stdout"])
    assert all(len(rows) == 6 for rows in theirs["norms"].values())
    assert ours["norms"] == theirs["norms"]  # the user's hook, from hook_generator, on every rank
    assert ours["files"] == theirs["files"] and ours["checkpoints"] == theirs["checkpoints"]
