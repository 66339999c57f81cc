"""Run a Classy project's own ``classy_train.py`` as its getting-started command does (``./classy_train.py --config
configs/template_config.json``), in a test subprocess: ``python classy_project_host.py ./classy_train.py ARGS...``.

Python would put the script's folder first on ``sys.path`` and run it as ``__main__``; so does this file. One thing
differs from a user's shell, and it is the test environment's: ``hydra-core`` is installed here (for VISSL), and
``classy_train.py`` takes Hydra's parser whenever it can import hydra, which rejects the documented ``--config`` as
ambiguous (``--config-path``, ``--config-name``, ``--config-dir``). The script runs as in an environment without
hydra, the one Classy's getting-started assumes: its ``argparse`` flags (``classy_vision.generic.opts``).
"""

from __future__ import annotations

import os
import runpy
import sys

if __name__ == "__main__":
    sys.modules["hydra"] = None  # type: ignore[assignment]  # `import hydra` raises ImportError: classy_train.py's argparse path
    script = os.path.abspath(sys.argv[1])
    sys.argv = sys.argv[1:]
    sys.path[0] = os.path.dirname(script)
    runpy.run_path(script, run_name="__main__")
