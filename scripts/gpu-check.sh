#!/usr/bin/env bash
# The checks that need a GPU, in one run of under 8 minutes on one GPU:
#   - a 2-step FSDP and DeepSpeed run of mmpretrain's MAE ViT-L FlexibleRunner configs (a 2-layer ViT, generated
#     images) under lightning-hooks train, and under MMEngine's FlexibleRunner (scripts/gpu_check_flexible.py);
#   - every CUDA-only test of the suite (AMP / --amp resume, the fp16 optimizer hooks, EMA and loss scale on GPU);
#   - the MMEngine train benchmark (benchmarks/mmengine_train.py).
#
#   bash scripts/gpu-check.sh --fetch [DIR]        on a machine with the package index: the wheels of REQUIREMENTS
#                                                  for the GPU machine, into DIR (default .gpu-wheels, 64 MiB at most)
#   bash scripts/gpu-check.sh                      on the GPU machine (Python 3.12 with torch, lightning, torchvision;
#                                                  no network): installs the fetched wheels into .gpu-site and runs
#                                                  each check whose modules are installed, saying which are not
#   bash scripts/gpu-check.sh --dry-run            anywhere, before spending device time: installs the wheels as on
#                                                  the GPU machine, says which checks would run, collects each CUDA
#                                                  test (pytest --collect-only: it exists and imports) and writes and
#                                                  loads the MAE configs; trains nothing, needs no GPU
# Without a GPU (and without --dry-run) it says so and exits 0. GPU_WHEELS: the wheels to install (default .gpu-wheels;
# a dry run on another Python names wheels built for it); GPU_CHECK_BUDGET_S: the run's time (default 450 s).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
LIMIT_MIB=64
GPU_PYTHON_VERSION=${GPU_PYTHON_VERSION:-3.12}

# What the checks import beyond what the GPU machine's image has (its Python 3.12 with torch, lightning,
# torchvision, numpy, OpenCV, matplotlib, pytest, tensorboard, scipy, pydantic's needs, ...: the package list in
# the device tool's KINDS.md): pure-Python wheels (pure: the pure one where a compiled one exists too), and for
# CPython $GPU_PYTHON_VERSION on x86-64 Linux the compiled ones. The versions scripts/setup.sh's .venv has; 64 MiB at
# most, since that is what travels to the GPU machine with the checkout. DeepSpeed: the newest that MMEngine 0.10.7's
# FlexibleRunner imports (0.19 dropped deepspeed.runtime.fp16.onebit).
REQUIREMENTS=(
  mmengine==0.10.7 mmpretrain==1.2.0 mmcv-lite==2.0.1 mmdet==3.3.0 mmsegmentation==1.2.2 addict==2.4.0 yapf==0.43.0
  platformdirs==4.14.8 termcolor==3.3.0 mat4py==0.6.0 model-index==0.1.11 ordered-set==4.1.0 omegaconf==2.3.1
  antlr4-python3-runtime==4.9.3 importlib-metadata==9.1.0 hydra-core==1.3.8 jsonargparse==4.53.0 docstring-parser==0.18.0 deepspeed==0.18.9 hjson pydantic==2.14.4
  pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 yacs
  classy-vision==0.7.0 imix==0.1.0 fvcore==0.1.5.post20221221 iopath==0.1.10 easydict==1.14 progressbar2==4.6.0
  python-utils==4.2.0 visdom==0.2.4 jsonpatch==1.48 jsonpointer==3.12 websocket-client==1.9.2 ftfy==6.3.1 wcwidth==0.9.4
  terminaltables==3.1.10 pycocotools==2.0.11 shapely==2.2.0 prettytable==3.18.0
)

fetch() {  # fetch DIR LIMIT_MIB REQUIREMENT...: each wheel for the GPU machine, or one built here from a pure sdist
  local dir=$1 limit=$2 req size
  shift 2
  mkdir -p "$dir"
  local target=(--only-binary=:all: --python-version "$GPU_PYTHON_VERSION" --implementation cp --platform any
                --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64)
  local pure=(--only-binary=:all: --python-version "$GPU_PYTHON_VERSION" --implementation py --abi none --platform any)
  for req in "$@"; do
    if [ "${req#pure:}" != "$req" ]; then
      "$PYTHON" -m pip download --quiet --no-deps "${pure[@]}" -d "$dir" "${req#pure:}"
    else
      "$PYTHON" -m pip download --quiet --no-deps "${target[@]}" -d "$dir" "$req" 2>/dev/null ||
        DS_BUILD_OPS=0 "$PYTHON" -m pip wheel --quiet --no-deps --no-build-isolation -w "$dir" "$req"
    fi
  done
  if ls "$dir"/*.whl | grep -v -e "-none-any.whl" -e "-py3-none-" -e "-abi3-" -e "-cp${GPU_PYTHON_VERSION/./}-"; then
    echo "gpu-check: the wheels above were built for this machine's Python, not the GPU machine's" >&2
    return 1
  fi
  size=$(du -sm "$dir" | cut -f1)
  echo "gpu-check: ${size} MiB of wheels in $dir (limit ${limit} MiB)"
  if [ "$size" -gt "$limit" ]; then
    echo "gpu-check: more than ${limit} MiB of wheels" >&2
    return 1
  fi
}

DRY_RUN=
case "${1:-}" in
  --fetch) fetch "${2:-.gpu-wheels}" "$LIMIT_MIB" "${REQUIREMENTS[@]}"; exit ;;
  --dry-run) DRY_RUN=1 ;;
  "") ;;
  *) echo "gpu-check: unknown option $1 (--fetch [DIR], --dry-run, or none)" >&2; exit 2 ;;
esac

if [ -z "$DRY_RUN" ] && ! "$PYTHON" -c "import torch, sys; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then
  echo "gpu-check: no GPU on this machine (torch.cuda.is_available() is not True): nothing to check, exit 0"
  exit 0
fi

# the GPU machine: its Python (itself a venv, so no venv made from it would see its torch) with the fetched wheels
# (GPU_WHEELS, default .gpu-wheels) in GPU_SITE (default .gpu-site; a dry run: a temporary folder) and the checkout on PYTHONPATH
# (lightning_hooks, tests/helpers, scripts)
WHEELS=${GPU_WHEELS:-.gpu-wheels}
[ -d "$WHEELS" ] || { echo "gpu-check: no $WHEELS: run 'bash scripts/gpu-check.sh --fetch' first" >&2; exit 1; }
SITE=${GPU_SITE:-$PWD/.gpu-site}
if [ -n "$DRY_RUN" ]; then
  SITE=$(mktemp -d)
  trap 'rm -rf "$SITE"' EXIT
fi
rm -rf "$SITE"  # pip install --target --upgrade left classy_vision without its __init__.py (an H200, 2026-11-27)
# (classy-vision's wheel also puts its classy_train.py in a data folder classy_vision/, which pip then reports as a
# target folder already there and leaves: the package stays whole)
"$PYTHON" -m pip install --quiet --no-index --no-deps --no-compile --target "$SITE" "$WHEELS"/*.whl 2>&1 |
  { grep -v "Target directory .*/classy_vision already exists" || true; } >&2
# mmpretrain 1.2 imports its multimodal models when transformers>=4.28 is installed, and they fail to import under
# the image's transformers 5 (upstream: names that left transformers.modeling_utils); a version-0 record of
# transformers ahead of the image's makes mmpretrain skip them, as on the machines without transformers
mkdir -p "$SITE/transformers-0.dist-info"
printf 'Metadata-Version: 2.1\nName: transformers\nVersion: 0\n' > "$SITE/transformers-0.dist-info/METADATA"
py=$PYTHON
export PYTHONPATH="$SITE:$PWD:$PWD/tests/helpers:$PWD/scripts" OMP_NUM_THREADS=4
failed=0
# the whole run's budget (8 minutes less the start and the install): no step runs past it, so one command of the device
# tool (10 minutes at most) always ends with the report; a step that would start with less than 15 s left is skipped
BUDGET_S=${GPU_CHECK_BUDGET_S:-450}
step() {  # step NAME SECONDS MODULES COMMAND...: run it where MODULES import, within the budget, report, go on
  local name=$1 seconds=$2 modules=$3
  shift 3
  local left=$((BUDGET_S - SECONDS))
  if [ "$left" -lt 15 ]; then
    echo "=== gpu-check: $name SKIPPED: the run's ${BUDGET_S} s are spent"
    failed=1
    return
  fi
  [ "$seconds" -le "$left" ] || seconds=$left
  if ! "$py" -c "import $modules" 2>/dev/null; then
    echo "=== gpu-check: $name SKIPPED: it needs $modules (bash scripts/gpu-check.sh --fetch fetches them)"
    return
  fi
  echo "=== gpu-check: $name${DRY_RUN:+ (dry run)}"
  local start=$SECONDS out
  out=$(mktemp)
  if timeout "$seconds" "$@" 2>&1 | tee "$out"; then
    if grep -qE "(^| )[0-9]+ skipped( |,|$)" "$out"; then  # pytest's summary: a CUDA test that skipped did not check anything
      echo "=== gpu-check: $name FAILED: a test skipped (its reason above) ($((SECONDS - start)) s of $seconds)"
      failed=1
    else
      echo "=== gpu-check: $name passed ($((SECONDS - start)) s of $seconds)"
    fi
  else
    echo "=== gpu-check: $name FAILED ($((SECONDS - start)) s of $seconds)"
    failed=1
  fi
  rm -f "$out"
}
# without pyproject's -n 2 (the GPU machine has no pytest-xdist; these few tests run in one process); a dry run
# collects them (each exists and its module imports) and runs none
tests=("$py" -m pytest -q -p no:cacheprovider -p no:xdist -o "addopts=-ra --import-mode=importlib" ${DRY_RUN:+--collect-only})

step "2-step FSDP run of mmpretrain's MAE ViT-L config" 120 mmpretrain,cv2 \
  "$py" scripts/gpu_check_flexible.py fsdp ${DRY_RUN:+--dry-run}
if "$py" -c "import deepspeed" 2>/dev/null; then
  step "2-step DeepSpeed run of mmpretrain's MAE ViT-L config" 120 mmpretrain,cv2 \
    "$py" scripts/gpu_check_flexible.py ds ${DRY_RUN:+--dry-run}
else
  echo "=== gpu-check: DeepSpeed cannot be had here (import deepspeed fails; --fetch fetches it): its run is" \
    "skipped, the rest runs"
fi
step "CUDA tests: EMA and loss scale" 60 pytest \
  "${tests[@]}" tests/callbacks/test_ema.py::test_cpu_offload_on_cuda tests/callbacks/test_loss_scale.py::test_cuda_fp16
step "CUDA test: MMEngine --amp against tools/train.py" 120 pytest,mmdet,mmseg \
  "${tests[@]}" tests/families/mmengine/test_train.py::test_amp_train_matches_tools_train_amp_on_cuda
step "CUDA tests: iMIX Fp16OptimizerHook, Lightning's GradScaler" 60 pytest,imix,tensorboard "${tests[@]}" \
  tests/families/imix/test_optimizer.py::test_fp16_hook_on_cuda_runs_real_fp16_and_matches_reference_scaler \
  tests/integration/reliability/test_bad_input.py::test_reliability_imix_optimizer_hook_with_lightning_grad_scaler
step "CUDA test: Classy EMA on GPU" 60 pytest,classy_vision,tensorboard \
  "${tests[@]}" tests/families/classy/test_hooks.py::test_classy_ema_gpu_matches_cpu
if [ -n "$DRY_RUN" ]; then
  step "MMEngine train benchmark (its imports)" 90 mmpretrain,cv2 "$py" benchmarks/mmengine_train.py --help
else
  step "MMEngine train benchmark" 90 mmpretrain,cv2 "$py" benchmarks/mmengine_train.py --rounds 2 --iters 10
fi
echo "gpu-check: $SECONDS s in all${DRY_RUN:+ (dry run)}"
exit $failed
