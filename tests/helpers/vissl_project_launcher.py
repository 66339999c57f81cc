"""A VISSL user's launcher script, as VISSL's docs have users extend it (the reference of test_vissl_project.py):
``tools/run_distributed_engines.py``'s ``hydra_main``, with the user's module imported first (its decorators register
the trunk and loss the config names) and its ``hook_generator`` given to ``launch_distributed``. Run in the folder
holding ``my_vissl_ext.py``: ``python vissl_project_launcher.py config=... [overrides]``. VISSL's spawned workers import
this file again (``__mp_main__``), so the module is imported at the top, in every process.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.getcwd())  # the user's folder, where ./launcher.py would have it

import my_vissl_ext  # noqa: E402
from vissl.utils.distributed_launcher import launch_distributed  # noqa: E402
from vissl.utils.hydra_config import compose_hydra_configuration, convert_to_attrdict  # noqa: E402

if __name__ == "__main__":
    _, config = convert_to_attrdict(compose_hydra_configuration(sys.argv[1:]))
    launch_distributed(config, node_id=0, engine_name="train", hook_generator=my_vissl_ext.hook_generator)
