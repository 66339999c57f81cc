"""Every config file the installed OpenMMLab libraries ship (``<package>/.mim/configs/**/*.py``, as ``tools/train.py``
takes them) loads with ``MMEngineAdapter.from_config`` of the file's ``Config`` (what ``from_file`` does) and builds the hooks MMEngine's ``Runner`` registers (class,
priority, order) and the train loop it builds (limits and validation schedule, through ``trainer_kwargs()``).

The reference is the Runner's own code on the same config: ``Runner.register_hooks`` under the config's
``default_scope`` and the train loop ``Runner.build_train_loop`` builds (``LOOPS``), asked where it validates. A file
the reference cannot take here (a library the venv lacks, a ``_base_`` that is not shipped) is not the adapter's to
load. The whole corpus runs in the default suite: each file is parsed once, the ``_base_`` files they share once in
all, and nothing the comparison does not read is built (about 45 s of CPU time for 2,450 files on this machine).
"""

from __future__ import annotations

import contextlib
import copy
import glob
import importlib.util
import itertools
import os
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mmengine.config import Config
from mmengine.registry import LOOPS, DefaultScope
from mmengine.runner import EpochBasedTrainLoop, IterBasedTrainLoop, Runner, TestLoop, ValLoop, get_priority
from mmengine.utils import ManagerMixin
from mmengine.visualization import Visualizer
from openmmlab_stubs import MMAGIC, import_modules, import_openmmlab
from torch.utils.data import DataLoader

from lightning_hooks.families.mmengine import MMEngineAdapter
from lightning_hooks.families.mmengine.iter_based import EpochLoopConfig
from lightning_hooks.families.mmengine.train import EvalLoopError, check_eval_loops

#: the libraries whose shipped configs the corpus covers, each with the modules whose import registers what its
#: configs name (None: the library's ``register_all_modules``); one that is not installed is skipped
LIBRARIES = (
    ("mmdet", None),
    ("mmpretrain", None),
    ("mmseg", None),
    ("mmpose", None),  # its datasets import xtcocotools (scripts/setup.sh builds it), its visualizers torchvision
    ("mmagic", list(MMAGIC)),  # its models need diffusers: its engine and visualizers
)
INSTALLED = tuple((name, modules) for name, modules in LIBRARIES if importlib.util.find_spec(name))
_names = itertools.count()


def shipped_configs() -> list[Path]:
    """The runnable configs of the installed libraries (``_base_`` files are parts of others)."""
    files = []
    for library, _ in INSTALLED:
        root = Path(importlib.util.find_spec(library).origin).parent / ".mim" / "configs"
        files += sorted(Path(f) for f in glob.glob(str(root / "**" / "*.py"), recursive=True) if "/_base_/" not in f)
    return files


@pytest.fixture(autouse=True)
def _default_scope_restored() -> Iterator[None]:
    """Each adapter (as each Runner) makes its config's default scope the process's current one: put the scope of
    before the test back, so later tests do not build in mmpose's scope."""
    saved = DefaultScope._instance_dict.copy()
    yield
    DefaultScope._instance_dict.clear()
    DefaultScope._instance_dict.update(saved)


@pytest.fixture(scope="module", autouse=True)
def _libraries() -> None:
    for name, modules in INSTALLED:
        if modules is None:
            import_openmmlab([name])
        else:
            import_modules(modules)


@pytest.fixture
def _parse_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the comparison does not need, left out: the ``_base_`` files thousands of configs share are parsed once
    (``Config._file2dict``, which writes each file to a temporary folder; a copy of the result for each use),
    visualizers make no matplotlib axes."""
    parse = Config._file2dict
    parsed: dict[tuple, tuple] = {}

    def file2dict(filename: str, *args: Any, **kwargs: Any) -> tuple:
        key = (os.path.abspath(filename), args, tuple(sorted(kwargs.items())))
        if key not in parsed:
            parsed[key] = parse(filename, *args, **kwargs)
        return copy.deepcopy(parsed[key])

    monkeypatch.setattr(Config, "_file2dict", staticmethod(file2dict))
    monkeypatch.setattr(Visualizer, "_initialize_fig", _figure_without_axes)
    if os.access("/dev/shm", os.W_OK):  # the temporary copies in memory, where the machine has a tmpfs
        monkeypatch.setattr(tempfile, "tempdir", "/dev/shm")


def _figure_without_axes(self: Visualizer, fig_cfg: dict) -> tuple[Any, Any, None]:
    """``Visualizer._initialize_fig`` without the axes (most of its time): nothing is drawn."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(**fig_cfg)
    return FigureCanvasAgg(figure), figure, None


def runner_view(cfg: Config) -> tuple[list[tuple[str, int]], dict[str, Any] | None]:
    """What MMEngine's Runner builds from the config: its hooks (class, priority) in order, and its train loop.

    Hooks that take the current ``Visualizer`` in ``__init__`` get the one the adapter built just before (the Runner
    builds its own first, likewise)."""
    runner = Runner.__new__(Runner)  # the Runner's own register_hooks / loop classes, without building the model
    runner._hooks = []
    runner._visualizer = Visualizer.get_current_instance()
    with DefaultScope.overwrite_default_scope(cfg.get("default_scope")):
        runner.register_hooks(copy.deepcopy(cfg.get("default_hooks")), copy.deepcopy(cfg.get("custom_hooks")))
        hooks = [(type(h).__qualname__, get_priority(h.priority)) for h in runner._hooks]
        return hooks, _loop(runner, cfg.get("train_cfg"))


def _loop(runner: Runner, train_cfg: Any) -> dict[str, Any] | None:
    """The train loop ``Runner.build_train_loop`` builds: its kind, length and the epochs (iterations) after which it
    validates, asked at :func:`_probes`."""
    if not train_cfg:
        return None
    cfg = copy.deepcopy(dict(train_cfg))
    data = DataLoader(list(range(4)))
    if "type" in cfg:
        loop = LOOPS.build(cfg, default_args=dict(runner=runner, dataloader=data))
    elif cfg.pop("by_epoch"):
        loop = EpochBasedTrainLoop(**cfg, runner=runner, dataloader=data)
    else:
        loop = IterBasedTrainLoop(**cfg, runner=runner, dataloader=data)
    by_epoch = isinstance(loop, EpochBasedTrainLoop)
    end = loop.max_epochs if by_epoch else loop.max_iters
    validates = {}
    for done in _probes(loop, end):
        setattr(loop, "_epoch" if by_epoch else "_iter", done)
        loop._decide_current_val_interval()  # as the loop does after each epoch (iteration)
        validates[done] = done >= loop.val_begin and (done % loop.val_interval == 0 or done == end)
    return dict(by_epoch=by_epoch, end=end, validates=validates)


def _probes(loop: Any, end: int) -> list[int]:
    """Where to ask the loop whether it validates: the start, around each milestone and interval, and the end."""
    points = set(range(1, 40))
    for milestone, interval in zip(loop.dynamic_milestones, loop.dynamic_intervals):
        points |= {milestone + k * interval + d for k in (0, 1, 2) for d in (-2, -1, 0, 1, 2)}
    points |= {end + d for d in range(-3, 1)}
    return sorted(p for p in points if 1 <= p <= end)


def adapter_view(adapter: MMEngineAdapter, probes: list[int]) -> tuple[list[tuple[str, int]], dict[str, Any] | None]:
    """The same from the adapter ``from_file`` built: its hooks, and the Lightning loop it plans (``trainer_kwargs()``
    and, where the adapter decides, its validation schedule), asked at ``probes``."""
    hooks = [(type(h).__qualname__, get_priority(h.priority)) for h in adapter.hooks]
    cfg, kwargs = adapter.loop_cfg, adapter.trainer_kwargs()
    if cfg is None:
        return hooks, None
    by_epoch = isinstance(cfg, EpochLoopConfig)
    end = kwargs["max_epochs"] if by_epoch else kwargs["max_steps"]
    if by_epoch and not cfg.scheduled:  # Lightning's own schedule: Trainer(check_val_every_n_epoch)
        validates = {done: done % kwargs["check_val_every_n_epoch"] == 0 for done in probes}
    else:  # planned by the adapter at each epoch's end (iteration)
        validates = {done: cfg.validates_at(done) for done in probes}
    return hooks, dict(by_epoch=by_epoch, end=end, validates=validates)


def compare(paths: list[Path], work_dir: str) -> tuple[int, int, list[str]]:
    """(files the Runner takes, files the adapter loads as the Runner builds them, the differences). Each file is
    parsed once: ``from_file`` does ``from_config`` of that ``Config`` with ``work_dir``, and the Runner's view is
    of the same ``Config``."""
    taken, same, differences = 0, 0, []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for path in paths:
            with _instances_dropped():
                result = _compare_one(path, work_dir)
            if result is not None:
                taken += 1
                same += result is True
                if result is not True:
                    differences.append(result)
    return taken, same, differences


def _compare_one(path: Path, work_dir: str) -> bool | str | None:
    """True if the adapter loads ``path`` as the Runner builds it, else the difference; None if the Runner does not
    take the file here."""
    try:
        cfg = Config.fromfile(str(path))
    except Exception:  # noqa: BLE001 - not a config this venv parses (an uninstalled _base_ library)
        return None
    try:
        adapter = MMEngineAdapter.from_config(**{**copy.deepcopy(cfg), "work_dir": work_dir}, cfg=cfg)
    except Exception as err:  # noqa: BLE001 - a difference if the Runner takes the file
        return f"{path}: {type(err).__name__}: {str(err)[:300]}" if _runner_takes(cfg) else None
    try:
        expected = runner_view(cfg)
    except Exception:  # noqa: BLE001 - not a config the Runner takes in this venv
        return None
    actual = adapter_view(adapter, list(expected[1]["validates"]) if expected[1] else [])
    if actual != expected:
        return f"{path}: adapter {actual} != runner {expected}"
    own, refused = eval_loops_with_their_own_run(cfg), eval_loops_train_refuses(cfg)
    return True if own == refused else f"{path}: the Runner runs its own run() of {own}, train refuses {refused}"


def eval_loops_with_their_own_run(cfg: Config) -> list[str]:
    """The ``val_cfg`` / ``test_cfg`` whose loop the Runner builds (``LOOPS`` in the config's scope) runs a ``run()``
    other than MMEngine's ``ValLoop`` / ``TestLoop``'s, leaving out mmagic's ``MultiValLoop`` / ``MultiTestLoop``
    (the command runs them over each dataloader, tests/families/mmengine/test_mmagic.py)."""
    own = []
    for key, base in (("val_cfg", ValLoop), ("test_cfg", TestLoop)):
        loop = dict(cfg.get(key) or {})
        if "type" not in loop:
            continue
        kind, scope = loop["type"], loop.get("_scope_", cfg.get("default_scope"))
        if isinstance(kind, str) and scope and "." not in kind:
            kind = f"{scope}.{kind}"  # the registry of the config's scope, where the Runner's LOOPS.build looks
        cls = kind if isinstance(kind, type) else LOOPS.get(kind)
        if cls.run is not base.run and cls.__name__ not in ("MultiValLoop", "MultiTestLoop"):
            own.append(key)
    return own


def eval_loops_train_refuses(cfg: Config) -> list[str]:
    """The keys ``lightning-hooks train`` refuses (:func:`check_eval_loops`, one key at a time)."""
    refused = []
    for key in ("val_cfg", "test_cfg"):
        try:
            check_eval_loops({key: cfg.get(key)})
        except EvalLoopError:
            refused.append(key)
    return refused


@contextlib.contextmanager
def _instances_dropped() -> Iterator[None]:
    """The MMEngine instances one file's adapter and Runner view create (a ``DefaultScope``, a ``Visualizer``, a
    ``MessageHub``, ...) dropped after it: ``DefaultScope.overwrite_default_scope`` deep-copies every scope instance
    at each call, so each file would be slower than the one before."""
    classes = [c for c in _subclasses(ManagerMixin) if "_instance_dict" in vars(c)]
    saved = {c: dict(c._instance_dict) for c in classes}
    try:
        yield
    finally:
        for cls, instances in saved.items():
            cls._instance_dict.clear()
            cls._instance_dict.update(instances)


def _subclasses(cls: type) -> Iterator[type]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _runner_takes(cfg: Config) -> bool:
    try:
        Visualizer.get_instance(f"corpus-{next(_names)}")  # what the adapter would have built first
        runner_view(cfg)
    except Exception:  # noqa: BLE001
        return False
    return True


def test_mmengine_every_shipped_config_loads_as_the_runner_builds_it(tmp_path, _parse_once):
    files = shipped_configs()
    taken, same, differences = compare(files, str(tmp_path))
    assert not differences, f"{len(differences)} of {taken} differ:\n" + "\n".join(differences[:50])
    assert taken >= 0.8 * len(files) and same == taken, f"the Runner takes {taken} of {len(files)}"


def test_mmengine_scheduler_types_resolve_in_the_configs_scope_as_the_runner_resolves_them(tmp_path):
    # mmseg's PolyLRRatio (also mmdet's / mmpretrain's own schedulers): in default_scope, or a config's _scope_
    poly = dict(type="PolyLRRatio", eta_min_ratio=0.1, power=1.0, begin=0, end=10, by_epoch=False)
    runtime = dict(default_hooks=dict(checkpoint=None), work_dir=str(tmp_path))
    for options in (dict(default_scope="mmseg", param_scheduler=[poly]), dict(param_scheduler=[dict(poly, _scope_="mmseg")])):
        adapter = MMEngineAdapter.from_config(**runtime, **options)
        assert adapter.runner.param_schedulers[0]["type"] == "PolyLRRatio"
    with pytest.raises(TypeError, match=r"unknown PolyLRRatio argument 'powr'\. Did you mean: power\?"):
        MMEngineAdapter.from_config(**runtime, default_scope="mmseg", param_scheduler=[dict(poly, powr=1.0)])
    with pytest.raises(KeyError, match=r"unknown scheduler type 'PolyLRRatio'\. .*Registered: .*mmseg\.PolyLRRatio"):
        MMEngineAdapter.from_config(**runtime, default_scope="mmengine", param_scheduler=[poly])
