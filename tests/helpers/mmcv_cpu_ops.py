"""mmdet 2.x and mmseg 0.x in a test's subprocess on the CPU build of mmcv 1.7 (built without its compiled ops):
:func:`without_compiled_ops` imports the library with ``mmcv._ext`` stubbed (tests/helpers/openmmlab_stubs.py: NMS,
which a detector's test calls, by a pure-torch stand-in; no other op is called) and has ``collect_env`` answer "n/a" for the ops' compiler versions, as
``mmcv_testkit.stub_collect_env`` does in-process. Both sides of a multi-process differential run it first
(tests/helpers/mmcv_dist_train.py for the library's ``tools/train.py``).

Usage: ``python mmcv_cpu_ops.py PACKAGE train CONFIG [lightning-hooks train arguments ...]``: ``lightning-hooks``
with PACKAGE imported so (Lightning's DDP launcher starts the other processes with the same command).
"""

from __future__ import annotations

import importlib
import sys

from openmmlab_stubs import stubs

#: the modules of each library that import mmcv's compiled ops
MODULES = ("models", "apis", "datasets", "utils", "core")


def without_compiled_ops(package: str) -> None:
    """Import ``package`` (mmdet, mmseg) with the ops stubbed (``nms``, which a detector's test calls under
    ``DistEvalHook``, by tests/helpers/torch_ops.py's stand-in), and ``collect_env`` without the ops' versions."""
    if package == "mmcls":  # imports no op
        return
    with stubs():
        for module in MODULES:
            importlib.import_module(f"{package}.{module}")
    ops = sys.modules["mmcv.ops"]
    for name in ("get_compiler_version", "get_compiling_cuda_version"):
        setattr(ops, name, lambda: "n/a")


def main() -> None:
    without_compiled_ops(sys.argv[1])
    from lightning_hooks.cli import main as lightning_hooks

    lightning_hooks(sys.argv[2:])  # sys.argv as it is: Lightning's DDP launcher starts the others with it


if __name__ == "__main__":
    main()
