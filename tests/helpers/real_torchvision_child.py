"""``python real_torchvision_child.py FOLDER MODULE OUT``: the subprocess of ``real_torchvision.run_child``, which runs
``MODULE.child_main(OUT)`` (``MODULE`` in ``FOLDER`` or in this one) with the real torchvision importable.

The site is activated at the top of this file, not in ``child_main``, because a loader worker started with ``spawn``
(Classy's ``ClassificationTask`` default ``dataloader_mp_context``) runs the parent's main file again, as
``__mp_main__``, before it unpickles the dataset and its torchvision transforms: without the op schemas that import
fails (``operator torchvision::nms does not exist``) and the worker exits with code 1. A torchvision with its
compiled ops (what Classy's users have) needs none of this.
"""

import importlib
import sys

import real_torchvision

real_torchvision.activate()

if __name__ == "__main__":
    folder, module, out = sys.argv[1:4]
    sys.path.insert(0, folder)
    importlib.import_module(module).child_main(out)
