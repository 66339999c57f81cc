"""Put ``.venv/vissl-site`` (torchvision, fairscale and VISSL, installed there by ``bash scripts/setup.sh test``) on the
import path of every Python started with this folder on ``PYTHONPATH``:

    export PYTHONPATH=$PWD/scripts/vissl-site    # from the checkout's root
    lightning-hooks train config=test/integration_test/quick_simclr_synthetic ...

``scripts/setup.sh test`` keeps these packages off the venv's own path (tests/helpers/real_torchvision.py says why):
the registry's torchvision is a CUDA build whose import fails on the CPU torch unless its ``nms`` / ``qnms`` op schemas
are defined first. Python imports this module at start-up (``sitecustomize``): it appends the folder to ``sys.path``
(after the venv's packages, which it never shadows) and installs ``scripts/torchvision_cpu_ops.py``'s finder, which
defines the op schemas right before the first ``import torchvision``. Processes that Lightning or ``torchrun`` start
inherit ``PYTHONPATH``, so every rank gets the same path.
"""

from __future__ import annotations

import importlib.util
import os
import sys

SITE = os.path.join(sys.prefix, "vissl-site")


def _install() -> None:
    if not os.path.isdir(SITE):
        print(f"scripts/vissl-site: {SITE} does not exist: run `bash scripts/setup.sh test`", file=sys.stderr)
        return
    ops = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "torchvision_cpu_ops.py")
    spec = importlib.util.spec_from_file_location("torchvision_cpu_ops", ops)
    module = importlib.util.module_from_spec(spec)
    sys.modules["torchvision_cpu_ops"] = module
    spec.loader.exec_module(module)  # installs the finder that defines the op schemas before torchvision imports
    if SITE not in sys.path:
        sys.path.append(SITE)


_install()
