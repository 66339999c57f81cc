#!/usr/bin/env bash
# Create .venv and install lightning-hooks with the legacy frameworks its demo and tests drive.
#   bash scripts/setup.sh        -> runtime + legacy hook libraries (for the demo)
#   bash scripts/setup.sh test   -> the same plus the test dependencies: OpenMMLab libraries, the real torchvision and
#                                   VISSL outside the venv's import path (.venv/vissl-site), and .venv-lt24: the
#                                   oldest supported Lightning (2.4, both namespaces) for the reduced suite that
#                                   tests/core/test_lightning_versions.py runs there, and .venv-mmcv1:
#                                   mmcv 1.x (mmcv.runner) with mmdet 2.x / mmcls 0.x / mmseg 0.x for tests/families/mmcv
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

# .venv-lt24: the oldest supported Lightning (2.4, both namespaces) for the reduced suite that
# tests/core/test_lightning_versions.py runs there.
lt24() {
  install .venv-lt24 legacy lightning==2.4.0 pytorch-lightning==2.4.0 "pytest>=8" "pytest-xdist>=3.6"
}

mmcv1() {
  # .venv-mmcv1: OpenMMLab 1.x (mmcv.runner), whose import name `mmcv` the main venv's mmcv-lite 2.x takes, for
  # tests/families/mmcv (run from the main suite by tests/families/mmcv/test_venv.py). mmcv 1.7.2 builds from its sdist without
  # compiled ops (the tests stub mmcv._ext); its setup.py needs pkg_resources (setuptools<70) and wheel, unisolated.
  # wandb and mlflow-skinny for WandbLoggerHook / MlflowLoggerHook on local stores (offline run, file: tracking URI);
  # mlflow-skinny 2.9 needs protobuf<5, which wandb 0.31 (>=5) and tensorboard (>=6.31.1) refuse; 3.11 to 3.13 take
  # protobuf 7 and still pickle models by default (3.14+ default to pt2, which fails on mmcv's log_model call: no
  # input_example); mlflow.pytorch imports pandas.
  install .venv-mmcv1 legacy "pytest>=8" "pytest-xdist>=3.6" addict yapf pycocotools terminaltables prettytable wandb==0.31.0 \
    mlflow-skinny==3.12.0 pandas
  mmcv_pip=(.venv-mmcv1/bin/python -m pip install --quiet --disable-pip-version-check)
  "${mmcv_pip[@]}" "setuptools<70" wheel
  MMCV_WITH_OPS=0 "${mmcv_pip[@]}" --no-deps --no-build-isolation mmcv==1.7.2
  # mmcv.runner imports torchvision: the registry's CUDA build, which imports on the CPU torch once its op schemas
  # exist (scripts/torchvision_cpu_ops.py, loaded by a .pth at interpreter start); the OpenMMLab 1.x libraries pin
  # old mmcv-full/torch builds, so alone
  "${mmcv_pip[@]}" --no-deps torchvision==0.28.0 mmdet==2.28.2 mmcls==0.25.0 mmsegmentation==0.30.0
  mmcv_site=$(.venv-mmcv1/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  cp scripts/torchvision_cpu_ops.py "$mmcv_site/"
  echo "import torchvision_cpu_ops" > "$mmcv_site/torchvision_cpu_ops.pth"
}

if [ "${1:-}" = test ]; then
  install .venv legacy,test  # the test extra has wandb and mlflow-skinny at .venv-mmcv1's versions (see mmcv1 above)
  # The two side venvs build while the main one gets its OpenMMLab and VISSL packages (pip runs on one core): after
  # the first install, so that the sdists all three share (visdom, fvcore) are built once into pip's wheel cache.
  lt24 > .venv-lt24.log 2>&1 & lt24_pid=$!
  mmcv1 > .venv-mmcv1.log 2>&1 & mmcv1_pid=$!
  trap 'kill "$lt24_pid" "$mmcv1_pid" 2>/dev/null || true' EXIT  # a failure below stops them too
  pip=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
  # OpenMMLab libraries whose engine hooks the tests drive; they pin mmcv builds and torchvision, so alone: what
  # their hook modules import comes from the `test` extra. mmcv-lite has no compiled ops (tests stub mmcv._ext);
  # 2.0.1 is the newest that all of them accept (mmyolo 0.6 asserts mmcv<2.1 when imported). mmagic pulls diffusers and
  # transformers: the tests import only its engine (hooks, loops) and visualization, which need imageio besides.
  "${pip[@]}" --no-deps mmcv-lite==2.0.1 mmdet==3.3.0 mmpretrain==1.2.0 mmsegmentation==1.2.2 mmyolo==0.6.0 mmpose==1.3.2 \
    mmagic==1.2.0 imageio==2.38.1
  # mmpose's modules import xtcocotools, munkres and json_tricks, and (mmpose.apis) pkg_resources: setuptools<81.
  # xtcocotools' wheels are built against numpy 1 (they fail to import under numpy 2): built from its sdist, whose
  # setup.py imports numpy and Cython, unisolated
  "${pip[@]}" cython "setuptools<81" munkres==1.1.4 json_tricks==3.17.3
  "${pip[@]}" --no-deps --no-build-isolation --no-binary xtcocotools xtcocotools==1.14.3
  "${pip[@]}" --no-deps albumentations==1.4.20 albucore==0.0.19 stringzilla==5.3.2  # RTMPose's pipelines: 2.x lacks the albumentations.augmentations.transforms mmpose 1.3.2 reads and seeds from OS entropy; with deps, opencv-python-headless would shadow opencv-python's cv2
  # The tests run Classy's ClassificationTask and VISSL's trainer in subprocesses that import the real torchvision
  # from .venv/vissl-site, outside the venv's import path (tests/helpers/real_torchvision.py says why): torchvision
  # (CUDA build, without its CUDA ops), fairscale, setuptools<81 for pkg_resources, and VISSL's own packages
  # extracted from its wheel, which is never installed (it bundles its own classy_vision and fairscale).
  site=.venv/vissl-site
  .venv/bin/python -m pip download --quiet --disable-pip-version-check --no-deps vissl==0.1.6 -d .venv/wheels
  "${pip[@]}" --upgrade --no-deps --target "$site" torchvision==0.28.0 "setuptools<81"
  "${pip[@]}" --upgrade --no-deps --no-build-isolation --target "$site" fairscale==0.4.13
  .venv/bin/python - "$site" <<'PY'
import sys, zipfile
with zipfile.ZipFile(".venv/wheels/vissl-0.1.6-py3-none-any.whl") as wheel:
    wheel.extractall(sys.argv[1], [n for n in wheel.namelist() if n.split("/")[0] in ("vissl", "configs", "hydra_plugins")])
PY
  DS_BUILD_OPS=0 "${pip[@]}" --upgrade --no-deps --no-build-isolation --target .venv/deepspeed-site deepspeed==0.18.9 hjson==3.1.0 py-cpuinfo==9.0.0 msgpack==1.2.4  # DeepSpeed for tests/helpers/deepspeed_strategies.py, outside the venv's import path: MMEngine imports it (and it mlflow, ~5-12 s) in every process wherever it can
  wait "$lt24_pid" || { cat .venv-lt24.log; echo "setup.sh: building .venv-lt24 failed" >&2; exit 1; }
  wait "$mmcv1_pid" || { cat .venv-mmcv1.log; echo "setup.sh: building .venv-mmcv1 failed" >&2; exit 1; }
  rm -f .venv-lt24.log .venv-mmcv1.log
else
  install .venv legacy
fi
