#!/usr/bin/env bash
# Create .venv and install lightning-hooks with the legacy frameworks its demo and tests drive.
#   bash scripts/setup.sh        -> runtime + legacy hook libraries (for the demo)
#   bash scripts/setup.sh test   -> the same plus the test dependencies, and .venv-lt24: the oldest supported
#                                   Lightning (2.4, both namespaces) for the reduced suite that
#                                   tests/core/test_core_lightning_versions.py runs there
set -euo pipefail
cd "$(dirname "$0")/.."

# install VENV EXTRAS [REQUIREMENT...]: a fresh venv with the package (editable), its extras and the requirements.
install() {
  local venv=$1 extras=$2
  shift 2
  "${PYTHON:-python3}" -m venv "$venv"
  local pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
  "${pip[@]}" --upgrade "pip>=25.3"  # --build-constraint appeared in pip 25.3
  # torch is pinned so that the local CPU wheel is used instead of the newest CUDA build.
  "${pip[@]}" --build-constraint scripts/build-constraints.txt torch==2.13.0 "$@" -e ".[$extras]"
  # classy-vision and imix pin ancient torch/torchvision: install the packages alone; their hooks'
  # real imports come from the `legacy` extra.
  "${pip[@]}" --no-deps classy-vision==0.7.0 imix==0.1.0
}

if [ "${1:-}" = test ]; then
  install .venv legacy,test
  # VISSL's wheel bundles its own classy_vision, so it is never installed: the tests load its hooks from the wheel.
  .venv/bin/python -m pip download --quiet --disable-pip-version-check --no-deps vissl==0.1.6 -d .venv/wheels
  install .venv-lt24 legacy lightning==2.4.0 pytorch-lightning==2.4.0 "pytest>=8"
else
  install .venv legacy
fi
