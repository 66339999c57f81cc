"""The order in which the suite's two xdist workers get the test files (tests/conftest.py applies it).

``--dist loadfile --no-loadscope-reorder`` (pyproject's addopts) keeps each file on one worker and hands the files
out in collection order, a new one to a worker as it runs short of tests. Handed out longest first, the long files
run side by side from the start and the suite ends on short files on both workers, instead of one worker running a
long file alone at the end. :data:`FILE_SECONDS` holds the files over ~10 s; the others follow them in their
collection order.

The seconds are a file's time on CI's two cores: its tests' setup, call and teardown (``--durations``) from the
fresh-clone CI logs, or their CPU time (the pytest worker's and its subprocesses', ``os.times``) from a run on a
shared machine, which matches CI's wall time for the tests timed both ways; for a few files (marked) whose longest
test CI logged but not the rest, an estimate from that test and their number of tests. Only the order counts: a file
listed too high starts early, which costs nothing; a long file left off may end the suite alone. Refresh them when a
file grows or moves: test_suite_order.py fails on a listed file that no longer exists.

Example::

    items.sort(key=suite_order.rank)
"""

from __future__ import annotations

from typing import Protocol

#: test file (from the checkout) -> seconds it runs on CI; the longest first (see the module's docstring)
FILE_SECONDS = {
    "tests/families/mmcv/test_venv.py": 270,  # the .venv-mmcv1 suite but its 2-process files
    "tests/families/mmcv/test_venv_ddp.py": 230,  # those, in .venv-mmcv1
    "tests/families/mmengine/test_train_ddp.py": 190,  # 220 -> 241 s CPU with the shipped loader workers (load ~20)
    "tests/docs/test_snippets.py": 175,  # migration-classy.md's python page 40 -> 13 s CPU
    "tests/families/classy/test_train_ddp.py": 130,  # 128 s CPU (os.times) with the narrow ResNet-50
    "tests/families/classy/test_vissl_resume.py": 125,  # 80 s CPU (os.times) here, was 120
    "tests/integration/reliability/test_fault_injection.py": 120,  # estimate
    "tests/families/mmengine/test_resume_corpus.py": 120,  # estimate
    "tests/families/classy/test_vissl_train.py": 115,  # 111 s CPU (load ~12): one-process ResNet-50s narrow, 30 -> 16
    "tests/families/classy/test_project.py": 100,  # its 4 runs 188 -> 105 s CPU with 2 loader workers, not 4
    "tests/families/mmengine/test_corpus.py": 100,  # estimate
    "tests/integration/ddp/test_write_audit.py": 100,  # 79 s CPU here: MMEngine 31 (+5 with loader workers), VISSL 27, Classy 21
    "tests/integration/ddp/test_spawn.py": 70,
    "tests/test_tools.py": 60,
    "tests/families/classy/test_vissl_module.py": 60,  # 58 s CPU (os.times): its ResNet-50 trunk narrow
    "tests/families/classy/test_vissl_project.py": 55,
    "tests/families/mmengine/test_downstream.py": 53,
    "tests/families/classy/test_loggers.py": 50,  # 99 -> 47 s CPU: narrow ResNet-50s
    "tests/families/mmengine/test_resume_shipped.py": 50,  # estimate: its 3 loader-worker cases, ~5-7 s each
    "tests/core/test_lightning_versions.py": 50,
    "tests/families/mmengine/test_project.py": 45,
    "tests/families/mmengine/test_train.py": 40,
    "tests/families/classy/test_vissl_trainer.py": 35,
    "tests/test_train.py": 33,
    "tests/test_train_output.py": 33,
    "tests/families/mmengine/test_mmagic.py": 30,  # estimate
    "tests/integration/reliability/test_resume.py": 30,  # estimate (its first test 20 s)
    "tests/families/classy/test_train_resume.py": 25,  # 147 -> 20.5 s CPU: narrow ResNet-50, the worker forked
    "tests/test_cli_build_errors.py": 20,
    "tests/integration/ddp/test_imix_engine_ddp.py": 20,  # 14 s CPU here (os.times: the test and its ranks)
    "tests/test_config_examples.py": 20,
    "tests/families/classy/test_train.py": 20,
    "tests/test_cli.py": 17,
    "tests/families/mmengine/test_strategy.py": 17,
    "tests/families/mmengine/test_openmmlab_more.py": 16,
    "tests/families/classy/test_vissl_ddp_options.py": 15,
    "tests/core/test_namespaces.py": 15,
    "tests/families/classy/test_compat.py": 10,
    "tests/families/mmengine/test_loggers.py": 10,
    "tests/integration/ddp/test_ddp.py": 9,
    "tests/loggers/test_visdom.py": 9,
    "tests/notebooks/test_quickstart.py": 8,
}


class _Item(Protocol):
    nodeid: str


def file_of(item: _Item) -> str:
    """The test file of a collected item (its node id up to the first ``::``)."""
    return item.nodeid.split("::")[0]


def rank(item: _Item) -> float:
    """The sort key of an item: a listed file's minus seconds, 0 for the others (a stable sort keeps their order)."""
    return -FILE_SECONDS.get(file_of(item), 0)
