"""MMEngine configs: hooks from ``default_hooks`` / ``custom_hooks`` as MMEngine's ``Runner`` builds them, and a whole
config's runtime keys as ``MMEngineAdapter`` options (:func:`adapter_from_config`)."""

from __future__ import annotations

import copy
import functools
import warnings
from typing import Any, Protocol, TypeVar

from mmengine.hooks import Hook
from mmengine.registry import HOOKS, Registry
from mmengine.runner import Priority, Runner, get_priority

from lightning_hooks.core.errors import UnknownNameError, close_names
from lightning_hooks.core.introspect import keywords


class _FromConfig(Protocol):
    """What :func:`adapter_from_config` needs of ``MMEngineAdapter`` (not imported: the adapter imports this module)."""

    ckpt_path: str | None
    auto_resume: bool

    def __init__(self, hooks: Any, **options: Any) -> None: ...


#: the adapter class ``adapter_from_config`` builds (``MMEngineAdapter`` or a subclass)
Adapter = TypeVar("Adapter", bound=_FromConfig)


class _Registrar:
    """Just enough of a runner for MMEngine's own ``register_*`` methods: the same merge, build and priority queue."""

    register_hooks = Runner.register_hooks
    register_default_hooks = Runner.register_default_hooks
    register_custom_hooks = Runner.register_custom_hooks

    def __init__(self) -> None:
        self._hooks: list[Hook] = []

    def register_hook(self, hook: Hook | dict, priority: Any = None) -> None:
        """``Runner.register_hook``; a hook that takes the current ``Visualizer`` when none exists yet (the Runner
        builds its visualizer before its hooks) gets an error that says how to build it."""
        try:
            Runner.register_hook(self, hook, priority)
        except RuntimeError as err:
            if "get_instance(name=xxx) at least once" not in str(err) or not isinstance(hook, dict):
                raise
            name = getattr(hook["type"], "__name__", hook["type"])
            raise RuntimeError(
                f"build_hooks: {name} takes the current mmengine Visualizer when it is built, and none exists yet: "
                "MMEngine's Runner builds its visualizer before its hooks. Build the hooks with "
                "MMEngineAdapter.from_config(default_hooks=..., custom_hooks=..., visualizer=dict(...)), which does the "
                "same, or build the Visualizer (Visualizer.get_instance(...)) before build_hooks and pass it to "
                "MMEngineAdapter(visualizer=...)."
            ) from None


def build_hooks(
    default_hooks: dict[str, dict | Hook | None] | None = None,
    custom_hooks: list[dict | Hook] | None = None,
    default_scope: str | None = None,
) -> list[Hook]:
    """MMEngine's hook list for ``default_hooks`` merged over its defaults plus ``custom_hooks``, in priority order.

    A ``default_hooks`` key set to ``None`` removes that default hook; a ``priority`` key in a config overrides the
    class priority; equal priorities keep registration order (defaults first). Types resolve through MMEngine's
    ``HOOKS`` registry under ``default_scope`` (a downstream project's scope, as ``Runner(default_scope=...)``), its
    parents and its children (``"scope.Name"``).

    Example::

        hooks = build_hooks(default_hooks=dict(checkpoint=dict(type="CheckpointHook", interval=2), timer=None),
                            custom_hooks=[dict(type="EMAHook", priority="NORMAL")])
        trainer = Trainer(callbacks=[MMEngineAdapter(hooks, work_dir="work")])
    """
    # configs are consumed (``priority`` is popped) so copy them; hook instances are registered as given
    default_hooks = None if default_hooks is None else {k: _copy(v) for k, v in default_hooks.items()}
    custom_hooks = None if custom_hooks is None else [_copy(c) for c in custom_hooks]
    configs = [c for c in (default_hooks or {}).values() if isinstance(c, dict)]
    configs += [c for c in custom_hooks or [] if isinstance(c, dict)]
    for cfg in configs:  # a config's _scope_ replaces the default scope, as in MMEngine's build_from_cfg
        with HOOKS.switch_scope_and_registry(cfg.get("_scope_") or default_scope) as registry:
            check_type(cfg, registry)
        if "priority" in cfg:
            priority_of(cfg["priority"], cfg["type"].__name__)
    with HOOKS.switch_scope_and_registry(default_scope):
        registrar = _Registrar()
        registrar.register_hooks(default_hooks, custom_hooks)
    return registrar._hooks


def priority_of(priority: Any, hook: str) -> int:
    """MMEngine's ``get_priority``, with an error that names the hook and the valid priorities."""
    try:
        return get_priority(priority)
    except (KeyError, ValueError, TypeError):
        raise ValueError(
            f"MMEngine hook {hook}: priority {priority!r} does not exist. Use an int from 0 (highest) to 100 (lowest) "
            f"or one of {[p.name for p in Priority]}."
        ) from None


def _copy(cfg: Any) -> Any:
    return copy.deepcopy(cfg) if isinstance(cfg, dict) else cfg


def check_type(cfg: dict, registry: Registry) -> None:
    """Resolve ``cfg["type"]`` to a registered ``Hook`` subclass and put the class in its place.

    Names are looked up in the registry tree only: MMEngine's ``Registry.get`` would import any other dotted (or
    module) name, so a config could otherwise call ``subprocess.Popen``.
    """
    if "type" not in cfg:
        raise KeyError(f"build_hooks: hook config {cfg!r} has no 'type' key; name a registered hook class")
    kind = cfg["type"]
    cls = lookup(registry, kind) if isinstance(kind, str) else kind
    if cls is None:
        names = registered_names(registry._get_root_registry())
        close = close_names(kind, names, n=3, cutoff=0.5)
        hint = f"Did you mean {', '.join(repr(c) for c in close)}?" if close else f"Registered: {', '.join(names)}."
        raise UnknownNameError(
            f"build_hooks: hook type {kind!r} is not registered in the {registry.name!r} registry "
            f"(scope {registry.scope!r}) or its children. {hint} Register your class with @HOOKS.register_module()."
        )
    if not (isinstance(cls, type) and issubclass(cls, Hook)):
        raise TypeError(f"build_hooks: hook type {kind!r} is {cls!r}, not a subclass of mmengine.hooks.Hook")
    cfg["type"] = cls


def lookup(registry: Registry, key: str) -> Any:
    """``Registry.get`` without its imports (so a config cannot import any module it names): this registry and its parents, ``scope.Name`` in the registry tree."""
    registry.import_from_location()
    scope, name = Registry.split_scope_key(key)
    if scope is None or scope == registry.scope:
        node: Registry | None = registry
        while node is not None:
            if name in node.module_dict:
                return node.module_dict[name]
            node = node.parent if scope is None else None
        return None
    if scope in registry.children:
        return lookup(registry.children[scope], name)
    root = registry._get_root_registry()
    return lookup(root, key) if root is not registry and (scope == root.scope or scope in root.children) else None


def registered_names(registry: Registry = HOOKS) -> list[str]:
    """Every hook name ``registry`` can build: its own, and its children's as ``scope.Name``."""
    names = list(registry.module_dict)
    for scope, child in registry.children.items():
        names += [f"{scope}.{n}" for n in registered_names(child)]
    return sorted(names)


#: keys of an MMEngine config that MMEngine's Runner reads but that, under Lightning, the LightningModule, the
#: LightningDataModule or the Trainer own: ``MMEngineAdapter.from_config`` ignores them and says where each goes.
OWNED_ELSEWHERE = {
    "model": "the LightningModule; runner.model is the MMEngine model it holds",
    "data_preprocessor": "the LightningModule",
    "train_dataloader": "trainer.fit(module, train_dataloaders) or a LightningDataModule",
    "val_dataloader": "trainer.fit(module, val_dataloaders=...) or a LightningDataModule",
    "test_dataloader": "trainer.test(module, dataloaders) or a LightningDataModule",
    "val_evaluator": "the LightningModule (an mmengine Evaluator fed in validation_step, logged with self.log_dict)",
    "test_evaluator": "the LightningModule (an mmengine Evaluator fed in test_step, logged with self.log_dict)",
    "optim_wrapper": "LightningModule.configure_optimizers",
    "auto_scale_lr": "LightningModule.configure_optimizers",
    "env_cfg": "Trainer(accelerator=..., strategy=...) and your torch settings",
    "launcher": "Trainer(strategy=..., devices=..., num_nodes=...)",
    "model_wrapper_cfg": "Trainer(strategy=DDPStrategy(find_unused_parameters=..., ...)), as lightning-hooks train "
    "maps it",
    "randomness": "lightning.seed_everything(seed) before building the model",
    "compile": "torch.compile in the LightningModule",
    "tta_model": "the LightningModule's test_step",
    "tta_pipeline": "the test dataloader",
    "custom_imports": "Config.fromfile, which already imported them",
}
#: config keys ``from_config`` maps to something other than an adapter option of the same name.
MAPPED = ("param_scheduler", "resume", "val_cfg", "test_cfg", "default_hooks", "custom_hooks")
_EVAL_LOOPS = {"val_cfg": "ValLoop", "test_cfg": "TestLoop"}


class HookConfig:
    """``default_hooks`` / ``custom_hooks`` as ``from_config`` got them, built once the adapter's runner exists (its
    default scope and visualizer), as MMEngine's ``Runner`` builds its hooks.

    Example::

        MMEngineAdapter(HookConfig(dict(checkpoint=dict(type="CheckpointHook")), None), default_scope="mmdet")
    """

    def __init__(self, default_hooks: dict | None, custom_hooks: list | None) -> None:
        self.default_hooks, self.custom_hooks = default_hooks, custom_hooks

    def build(self, default_scope: str | None) -> list[Hook]:
        return build_hooks(default_hooks=self.default_hooks, custom_hooks=self.custom_hooks, default_scope=default_scope)


def adapter_from_config(
    cls: type[Adapter], default_hooks: dict | None, custom_hooks: list | None, options: dict[str, Any]
) -> Adapter:
    """``MMEngineAdapter.from_config``: the adapter ``cls`` of a whole MMEngine config (see :func:`runtime_options`),
    warning once about the keys it ignores; the hooks are built after the runner, as the Runner builds them."""
    accepted = keywords(cls.__init__, skip=("self", "hooks"))
    if accepted is None:
        raise TypeError(
            f"{cls.__name__}.from_config reads the config keys {cls.__name__}.__init__ takes by name, but it takes "
            "**kwargs: list its options as parameters."
        )
    config = dict(options, default_hooks=default_hooks, custom_hooks=custom_hooks)
    options, ckpt_path, notes, differences = runtime_options(config, accepted)
    if notes:  # stacklevel: the caller of from_config
        warnings.warn(f"MMEngineAdapter.from_config ignores keys that Lightning objects own: {'; '.join(notes)}.",
                      stacklevel=3)  # fmt: skip  # arguments aligned under the call
    if differences:
        warnings.warn(f"MMEngineAdapter.from_config: {'; '.join(differences)}.", stacklevel=3)
    adapter = cls(HookConfig(default_hooks, custom_hooks), **options)
    adapter.ckpt_path = ckpt_path
    adapter.auto_resume = bool(config.get("resume")) and not config.get("load_from")
    return adapter


def runtime_options(
    config: dict[str, Any], accepted: list[str]
) -> tuple[dict[str, Any], str | None, list[str], list[str]]:
    """Split a whole MMEngine config (``default_runtime.py`` + schedule + model/data keys) for ``from_config``.

    Returns the adapter options (``param_scheduler`` becomes ``param_schedulers``; ``load_from`` stays ``load_from``
    only without ``resume``), the checkpoint a ``resume=True`` config resumes from (``load_from``, else the
    ``last_checkpoint`` in ``work_dir``, as the Runner finds it; None to start fresh), notes on the keys ignored and
    on the keys that run differently from the Runner (``val_cfg`` / ``test_cfg``). A key that looks like a misspelled
    runtime key raises a ``ValueError`` with a "did you mean"; other unknown keys are the config's own variables
    (``vis_backends``, ``train_pipeline``, ...), never errors.
    """
    from mmengine.runner import find_latest_checkpoint

    if not isinstance(config.get("model"), (str, type(None))):  # the config's model, not the adapter's model= path
        accepted = [k for k in accepted if k != "model"]
    options = {k: v for k, v in config.items() if k in accepted}
    if "param_scheduler" in config:
        if "param_schedulers" in config:
            raise ValueError(
                "MMEngineAdapter.from_config: both 'param_scheduler' (MMEngine's key) and 'param_schedulers' are set; "
                "keep one."
            )
        options["param_schedulers"] = config["param_scheduler"]
    differences = [note for key, loop in _EVAL_LOOPS.items() for note in _eval_cfg_notes(key, loop, config.get(key))]
    ckpt_path = None
    load_from, resume = config.get("load_from"), config.get("resume", False)
    if resume:  # Runner.load_or_resume: the checkpoint is resumed, not also loaded as weights before it
        options.pop("load_from", None)
        work_dir = config.get("work_dir")
        ckpt_path = load_from or (find_latest_checkpoint(str(work_dir)) if work_dir else None)
    elif load_from:
        options["load_from"] = load_from  # weights into runner.model after before_run, as Runner.load_or_resume
    known = (*accepted, *MAPPED, *OWNED_ELSEWHERE)
    notes, variables = [], []
    for key in config:
        if key in accepted or key in MAPPED:
            continue
        if key in OWNED_ELSEWHERE:
            notes.append(f"{key} ({OWNED_ELSEWHERE[key]})")
            continue
        meant = _misspelled(key, known)
        if meant:
            raise ValueError(
                f"MMEngineAdapter.from_config: unknown config key {key!r}. Did you mean {meant!r}? Keys it takes: "
                f"{', '.join(sorted(set(known)))}."
            )
        variables.append(key)
    if variables:
        notes.append(f"config variables not read by the Runner: {', '.join(variables)}")
    return options, ckpt_path, notes, differences


@functools.lru_cache(maxsize=4096)
def _misspelled(key: str, known: tuple[str, ...]) -> str | None:
    """The runtime key of ``known`` that config key ``key`` misspells (the closest, if few enough edits away: see
    :func:`_typo_edits`), else None. Cached: shipped configs share their variables (``train_pipeline``,
    ``data_root``, ...), so a process loading many configs runs difflib once per name, not once per config."""
    close = close_names(key, known, n=1, cutoff=0.8)
    return close[0] if close and _edits(key, close[0]) <= _typo_edits(close[0]) else None


def _typo_edits(name: str) -> int:
    """The most edits (insert, delete, substitute, swap two neighbours) a misspelling of runtime key ``name`` is from
    it: 1, 2 for names over 8 letters, none for names of 5 letters or fewer, whose neighbours are words (``models``).
    The variables of every shipped OpenMMLab config are further: ``train_pipeline``, ``test_pipeline`` and
    ``val_pipeline`` are 3 edits from ``tta_pipeline``, ``conv_cfg`` 2 from ``env_cfg``."""
    return 0 if len(name) <= 5 else 1 if len(name) <= 8 else 2


def _edits(a: str, b: str) -> int:
    """The edit distance of ``a`` and ``b``, a swap of two neighbouring letters counting as one edit."""
    rows = [list(range(len(b) + 1))]
    for i, x in enumerate(a, 1):
        row = [i]
        for j, y in enumerate(b, 1):
            row.append(min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + (x != y)))
            if i > 1 and j > 1 and x == b[j - 2] and a[i - 2] == y:
                row[j] = min(row[j], rows[-2][j - 2] + 1)
        rows.append(row)
    return rows[-1][-1]


def _eval_cfg_notes(key: str, loop: str, cfg: Any) -> list[str]:
    """``val_cfg`` / ``test_cfg``: the MMEngine loop that Lightning's validation/test loop stands for. Returns what
    runs differently from the Runner: a custom loop type's own ``run()`` does not run (Lightning runs one evaluation
    loop over the stage's dataloaders; hooks still see ``runner.{stage}_loop`` as a ``ValLoop`` / ``TestLoop``), and
    ``fp16=True`` evaluates at the Trainer's precision. A typo in a ``ValLoop`` / ``TestLoop`` option raises."""
    if cfg is None:
        return []
    cfg = dict(cfg)
    kind = cfg.pop("type", loop)
    cfg.pop("_scope_", None)  # the registry scope of the loop type
    name = kind if isinstance(kind, str) else getattr(kind, "__name__", repr(kind))
    stage, step = ("validation", "validation_step") if key == "val_cfg" else ("test", "test_step")
    notes = []
    if name.rpartition(".")[2] != loop:
        notes.append(
            f"{key}=dict(type={name!r}): Lightning's {stage} loop runs this stage over the {stage} dataloaders "
            f"(hooks see runner.{key[:-4]}_loop as MMEngine's {loop}), so what {name}.run() adds to {loop} (several "
            f"dataloaders and evaluators, a teacher and a student, ...) belongs in the LightningModule's {step}"
        )
        cfg.clear()  # the custom loop's own options
    if cfg.pop("fp16", False):
        notes.append(
            f"{key}=dict(fp16=True): {stage} runs at the Trainer's precision; for fp16 autocast as {loop}(fp16=True), "
            "build the Trainer with precision='16-mixed' (training then runs in it too)"
        )
    if cfg:
        raise ValueError(f"MMEngineAdapter.from_config: {key} has options {sorted(cfg)} that {loop} does not take.")
    return notes
