"""A VISSL user's own module (vissl_project_ext.py: a trunk, a loss, a hook generator) trained by the user's launcher
script around VISSL's ``launch_distributed`` (vissl_project_launcher.py) and by ``lightning-hooks train --import
my_vissl_ext --hook-generator my_vissl_ext:hook_generator`` (the test side of test_vissl_project.py).

Each side runs as a program in a folder holding ``my_vissl_ext.py``, with ``scripts/vissl-site`` on ``PYTHONPATH``
(the documented step that puts VISSL on the path here). The config is VISSL's ``quick_simclr_synthetic``, made small
as in vissl_train_runs.py, with the user's ``tiny_trunk`` and ``scaled_info_nce``. Nothing here imports the module
for either side.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from lh_testing import HELPERS, ROOT, subprocess_env
from vissl_train_runs import RANK_VARIABLES, collect, overrides


def user(processes: int) -> list[str]:
    """The user's trunk, head and loss (the loss's buffer sized for the world, as VISSL sizes its own SimCLR loss)."""
    return ["config.MODEL.TRUNK.NAME=tiny_trunk", "config.MODEL.HEAD.PARAMS=[[mlp, {dims: [8, 16]}]]",
            "config.LOSS.name=scaled_info_nce",
            "+config.LOSS.scaled_info_nce={scale: 2.0, temperature: 0.2, buffer_params: {world_size: %d,"
            " embedding_dim: 16, effective_batch_size: %d}}" % (processes, 8 * processes)]  # fmt: skip


def folder(root: Path) -> Path:
    """The user's folder: ``my_vissl_ext.py``."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(HELPERS / "vissl_project_ext.py", root / "my_vissl_ext.py")
    return root


def run(root: Path, side: str, processes: int = 1) -> dict[str, Any]:
    """Train ``side`` (``vissl``: the launcher script; ``console``: the ``lightning-hooks`` script) in ``root`` on
    ``processes`` CPU processes (VISSL: ``NUM_PROC_PER_NODE``, spawned by its launcher; ours: ``--devices``)."""
    out = root / f"{side}_{processes}"
    # 3 iterations per epoch on each process: 12 images in batches of 4 per process
    arguments = [*overrides("simclr", out), *user(processes), f"config.DATA.TRAIN.DATA_LIMIT={12 * processes}"]
    if side == "vissl":
        command = [sys.executable, str(HELPERS / "vissl_project_launcher.py"), *arguments,
                   f"config.DISTRIBUTED.NUM_PROC_PER_NODE={processes}"]  # fmt: skip
    else:
        command = [str(Path(sys.prefix) / "bin" / "lightning-hooks"), "train", *arguments, "--import", "my_vissl_ext",
                   "--hook-generator", "my_vissl_ext:hook_generator", "--devices", str(processes)]  # fmt: skip
    env = subprocess_env(ROOT / "scripts" / "vissl-site", drop=RANK_VARIABLES)
    # one torch thread in every process of both sides, as the other VISSL differentials set it: Lightning's DDP sets
    # it per rank and VISSL's launch_distributed does not, and a sum over other thread counts differs in its last bits
    env["OMP_NUM_THREADS"] = "1"
    proc = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, (side, proc.stdout[-2000:] + proc.stderr[-6000:])
    norms = {r: [json.loads(line) for line in (out / f"trunk_norms_rank{r}.jsonl").read_text().splitlines()]
             for r in range(processes)}  # fmt: skip
    return {**collect(out), "norms": norms}
