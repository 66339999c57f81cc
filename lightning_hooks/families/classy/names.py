"""``lightning-hooks train``'s short error for a name that no Classy Vision or VISSL registry knows (a dataset, model,
head, loss, hook, meter, optimizer, transform, trunk...), from the library's own ``KeyError`` / ``AssertionError``:
:func:`explain_classy`, :func:`explain_vissl`."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from lightning_hooks.core.config_kind import ConfigFileError
from lightning_hooks.core.errors import InputError, UnknownNameError, close_names
from lightning_hooks.core.unknown_names import chain, module_registry_unknown_name

#: Classy's registries (the global each ``build_*`` function indexes) and what they hold
CLASSY_REGISTRIES = {"DATASET_REGISTRY": "Classy dataset", "MODEL_REGISTRY": "Classy model",
                     "HEAD_REGISTRY": "Classy head", "LOSS_REGISTRY": "Classy loss", "HOOK_REGISTRY": "Classy hook",
                     "METER_REGISTRY": "Classy meter", "OPTIMIZER_REGISTRY": "Classy optimizer",
                     "TRANSFORM_REGISTRY": "Classy transform", "PARAM_SCHEDULER_REGISTRY": "Classy param scheduler",
                     "TASK_REGISTRY": "Classy task"}  # fmt: skip  # one entry per registry, aligned
#: VISSL's registries (those its ``get_*`` functions assert a name is in), and Classy's, which VISSL also builds from
VISSL_REGISTRIES = {"MODEL_TRUNKS_REGISTRY": "VISSL model trunk", "MODEL_HEADS_REGISTRY": "VISSL model head",
                    "COLLATOR_REGISTRY": "VISSL collator", **CLASSY_REGISTRIES}  # fmt: skip  # one entry per registry, aligned

CLASSY_WHERE = ("Registrations come from the packages of the project folder (--project_folder, default: the folder "
                "lightning-hooks train runs in), imported as classy_train.py imports those of its folder, and from "
                "Classy Vision itself.")  # fmt: skip  # one sentence, wrapped at 120
VISSL_WHERE = ("Registrations come from VISSL itself and from the modules given with --import MODULE, whose VISSL "
               "register_* decorators run when lightning-hooks train imports them.")  # fmt: skip  # one sentence, wrapped at 120


def explain_classy(err: BaseException) -> UnknownNameError | None:
    """``err`` (raised by ``lightning-hooks train TASK.json``) as an :class:`UnknownNameError` when a Classy registry
    did not know a name, else None."""
    return module_registry_unknown_name(err, CLASSY_REGISTRIES, CLASSY_WHERE)


def explain_vissl(err: BaseException) -> InputError | None:
    """``err`` (raised by ``lightning-hooks train config=...``) as an :class:`UnknownNameError` when a VISSL or Classy
    registry did not know a name, or a :class:`ConfigFileError` when Hydra found no config of that name; else None."""
    return missing_vissl_config(err) or module_registry_unknown_name(err, VISSL_REGISTRIES, VISSL_WHERE)


def missing_vissl_config(err: BaseException) -> ConfigFileError | None:
    """Hydra's ``MissingConfigException`` for ``config=NAME`` as a short error naming the config, the folders VISSL
    looks in (``configs/config/`` of the working folder and of VISSL's ``configs`` package) and the close names."""
    for exception in chain(err):
        found = re.search(r"Could not find 'config/(.+?)'", str(exception))
        if type(exception).__name__ != "MissingConfigException" or not found:
            continue
        name, roots = found.group(1), [Path.cwd() / "configs" / "config"]
        spec = importlib.util.find_spec("configs")
        roots += [Path(folder) / "config" for folder in (spec.submodule_search_locations or [])] if spec else []
        known = [str(path.relative_to(root).with_suffix("")) for root in roots if root.is_dir()
                 for path in root.rglob("*.yaml")]  # fmt: skip  # the comprehension's second for clause under its first
        close = close_names(name, known)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        return ConfigFileError(
            f"config={name}: VISSL has no such config (it looks for {name}.yaml in "
            f"{' and '.join(str(root) for root in roots)}).{hint} Check the name, or run from the folder whose "
            "configs/config/ holds it."
        )
    return None
