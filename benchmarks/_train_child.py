"""One train run for benchmarks/train_commands.py, in a process of its own: ``HOST LIBRARY CONFIG WORK_DIR OUT.json [ARGS]``.

``HOST`` is ``tools`` (the library's own ``tools/train.py``, run as ``__main__`` with ``CONFIG --work-dir WORK_DIR``
and the extra arguments; for ``LIBRARY`` ``vissl``, what VISSL's ``tools/run_distributed_engines.py`` runs with the
overrides ``CONFIG ARGS config.CHECKPOINT.DIR=WORK_DIR``) or ``lightning`` (``lightning-hooks train CONFIG --work-dir WORK_DIR`` and the same extra
arguments, through ``lightning_hooks.cli.main``). Before either, this process

* imports the library with an ``mmcv._ext`` module in ``sys.modules`` when the installed mmcv has no compiled ops
  (mmcv-lite in ``.venv``, the CPU build in ``.venv-mmcv1``): mmdet and mmseg import mmcv's ops modules, which look
  their functions up at import; each function raises if called, and none is called by these training-only runs;
* registers :class:`IterClock`, a hook of the host's own ``Hook`` class (MMEngine's, or mmcv 1.x's
  ``mmcv.runner.Hook``) that the derived configs name in ``custom_hooks``, and, for MMEngine's libraries, the tiny
  generated datasets of ``_tiny_data.py`` (``LIBRARY``: the library whose ``tools/train.py`` runs).

``IterClock`` stamps process CPU time (``time.process_time``) after every train iteration and writes the stamps, the
RSS at the first iteration and the peak RSS at the end to ``OUT.json`` when training ends; the driver turns them into
seconds per iteration past the warm-up and the peak's growth during training, and reads the process's peak RSS from
``os.wait4``.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import resource
import runpy
import sys
import time
import types
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def memory_mib(field: str) -> float:
    """``VmRSS`` (now) or ``VmHWM`` (the peak so far) of this process, in MiB (Linux's /proc/self/status)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


class Mallinfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (glibc >= 2.33): the main arena's size, the mmapped blocks and their bytes, ..."""

    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]  # fmt: skip


def process_counters() -> dict[str, float]:
    """This process's counters that load does not move: page faults (minor, major), context switches (voluntary,
    involuntary), OS threads alive, and glibc malloc's state (``mallinfo2``: ``arena`` bytes in the heap,
    ``ordblks`` free chunks in its bins and ``fordblks`` their bytes, ``hblks``/``hblkhd`` blocks and bytes mapped by
    mmap, ``uordblks`` bytes in use)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    counters = {"minflt": usage.ru_minflt, "majflt": usage.ru_majflt, "nvcsw": usage.ru_nvcsw,
                "nivcsw": usage.ru_nivcsw, "threads": len(os.listdir("/proc/self/task"))}  # fmt: skip
    if hasattr(LIBC, "mallinfo2"):
        info = LIBC.mallinfo2()
        counters.update({name: getattr(info, name) for name in ("arena", "ordblks", "fordblks", "hblks", "hblkhd", "uordblks")})
    return counters


LIBC = ctypes.CDLL(None)
if hasattr(LIBC, "mallinfo2"):
    LIBC.mallinfo2.restype = Mallinfo2


class Stamps(list):
    """CPU time after each train iteration, and :func:`process_counters` then; at the first, the RSS then (the model,
    data and both hosts' imports built)."""

    def tick(self) -> None:
        if not self:
            self.rss_at_first = memory_mib("VmRSS")
            self.counters: list[dict[str, float]] = []
        self.append(time.process_time())
        self.counters.append(process_counters())

    def dump(self, out: str) -> None:
        with open(out, "w") as f:
            json.dump({"stamps": list(self), "rss_at_first": self.rss_at_first, "peak": memory_mib("VmHWM"),
                       "counters": self.counters}, f)  # fmt: skip


def import_library(library: str) -> None:
    """Import ``library``'s modules with an ``mmcv._ext`` whose every function raises when called (unless mmcv has its
    compiled ops), then take that module out again: mmengine treats any ``mmcv._ext`` as mmcv's compiled ops."""
    try:
        if importlib.util.find_spec("mmcv._ext") is not None:
            return
    except ImportError:
        pass
    module = types.ModuleType("mmcv._ext", "benchmarks/_train_child.py: mmcv without compiled ops")

    def missing(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)

        def unavailable(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError(f"mmcv._ext.{name}: this mmcv has no compiled ops (benchmarks/_train_child.py)")

        return unavailable

    module.__getattr__ = missing  # type: ignore[method-assign]
    sys.modules["mmcv._ext"] = module
    try:
        import mmcv

        if mmcv.__version__.startswith("1."):
            for name in ("models", "apis", "datasets", "utils"):
                importlib.import_module(f"{library}.{name}")
            import mmcv.ops

            for name in ("get_compiler_version", "get_compiling_cuda_version"):  # collect_env asks them
                setattr(mmcv.ops, name, lambda: "n/a")
        else:
            importlib.import_module(f"{library}.utils").register_all_modules(init_default_scope=False)
    finally:
        del sys.modules["mmcv._ext"]


def register_clock(out: str) -> None:
    """Register ``IterClock`` with the host's hook registry (MMEngine's, or mmcv 1.x's when mmcv is 1.x)."""
    import mmcv

    stamps = Stamps()

    def dump(*args: Any) -> None:
        stamps.dump(out)

    def tick(*args: Any, **kwargs: Any) -> None:
        stamps.tick()

    if mmcv.__version__.startswith("1."):
        from mmcv.runner import HOOKS, Hook

        attrs = {"after_train_iter": tick, "after_run": dump}  # its priority: the config's custom_hooks entry
    else:
        from mmengine.hooks import Hook
        from mmengine.registry import HOOKS

        attrs = {"after_train_iter": tick, "after_train": dump, "priority": "LOWEST"}
    HOOKS.register_module(name="IterClock", module=type("IterClock", (Hook,), attrs), force=True)


def vissl_clock(out: str) -> None:
    """Append a Classy hook stamping each train step to VISSL's ``default_hook_generator`` (both commands call it)."""
    import vissl.hooks
    from classy_vision.hooks.classy_hook import ClassyHook

    generator = vissl.hooks.default_hook_generator
    stamps = Stamps()

    class IterClock(ClassyHook):
        on_start = on_phase_start = on_forward = on_loss_and_meter = on_backward = on_update = ClassyHook._noop
        on_phase_end = ClassyHook._noop

        def on_step(self, task: Any) -> None:
            if task.train:
                stamps.tick()

        def on_end(self, task: Any) -> None:
            stamps.dump(out)

    vissl.hooks.default_hook_generator = lambda cfg: [*generator(cfg), IterClock()]


def run_vissl(host: str, overrides: list[str], out: str) -> None:
    """VISSL's ``tools/run_distributed_engines.py`` (its hydra composition, then ``launch_distributed``) or
    ``lightning-hooks train`` with the same overrides."""
    import torch

    torch.set_num_threads(1)
    vissl_clock(out)
    if host == "tools":
        import vissl.hooks
        from vissl.utils.distributed_launcher import launch_distributed
        from vissl.utils.hydra_config import compose_hydra_configuration, convert_to_attrdict

        _, config = convert_to_attrdict(compose_hydra_configuration(overrides))
        launch_distributed(config, node_id=0, engine_name="train", hook_generator=vissl.hooks.default_hook_generator)
    else:
        from lightning_hooks.cli import main as cli

        cli(["train", *overrides])


def main() -> None:
    host, library, config, work_dir, out, *extra = sys.argv[1:]
    if library == "vissl":
        run_vissl(host, [config, *extra, f"config.CHECKPOINT.DIR={work_dir}"], out)
        return
    import_library(library)
    register_clock(out)
    sys.path.insert(0, str(HERE))
    import _tiny_data

    _tiny_data.register(library)
    if host == "tools":
        script = Path(importlib.util.find_spec(library).origin).parent / ".mim" / "tools" / "train.py"
        sys.argv = [str(script), config, "--work-dir", work_dir, *extra]
        runpy.run_path(str(script), run_name="__main__")
    else:
        from lightning_hooks.cli import main as cli

        cli(["train", config, "--work-dir", work_dir, *extra])
    if not os.path.exists(out):
        raise SystemExit(f"{host}: training ended without IterClock's stamps ({config})")


if __name__ == "__main__":
    main()
