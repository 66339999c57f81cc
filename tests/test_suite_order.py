"""The suite's file order (tests/helpers/suite_order.py, applied by tests/conftest.py): the timed files exist, and they
are collected first, longest first."""

from __future__ import annotations

import suite_order
from lh_testing import ROOT


def test_every_timed_file_exists():
    missing = [path for path in suite_order.FILE_SECONDS if not (ROOT / path).is_file()]
    assert missing == [], (
        f"tests/helpers/suite_order.py FILE_SECONDS names files that do not exist: {missing}; "
        "rename or drop them there (a moved file is no longer started first)"
    )


def test_the_timed_files_are_collected_first_longest_first(request):
    files = list(dict.fromkeys(suite_order.file_of(item) for item in request.session.items))
    timed = [path for path in files if path in suite_order.FILE_SECONDS]
    assert files[: len(timed)] == timed, "a file not in FILE_SECONDS is collected before a timed one"
    seconds = [suite_order.FILE_SECONDS[path] for path in timed]
    assert seconds == sorted(seconds, reverse=True), list(zip(timed, seconds, strict=True))
