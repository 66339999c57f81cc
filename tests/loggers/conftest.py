# Make tests/ importable (for `from visdom_server import visdom_server`): with pytest's default
# "prepend" import mode only this file's directory (tests/loggers) is put on sys.path. Setting
# `pythonpath = ["tests"]` under [tool.pytest.ini_options] would make this unnecessary.
import sys
from pathlib import Path

_TESTS_DIR = str(Path(__file__).resolve().parents[1])
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)
