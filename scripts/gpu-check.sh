#!/usr/bin/env bash
# The checks that need a GPU, in one run of under 8 minutes on one GPU:
#   - every CUDA-only test of the suite (AMP / --amp resume, the fp16 optimizer hooks, EMA and loss scale on GPU);
#   - a 2-step FSDP and DeepSpeed run of mmpretrain's MAE ViT FlexibleRunner configs (tiny ViT, generated data) under
#     lightning-hooks train, and the same under MMEngine's FlexibleRunner where it runs;
#   - the MMEngine train benchmark (benchmarks/mmengine_train.py).
#
#   bash scripts/gpu-check.sh --fetch [DIR]  on a machine with the package index: the wheels the GPU machine lacks,
#                                            into DIR (default .gpu-wheels, at most 64 MiB)
#   bash scripts/gpu-check.sh                on the GPU machine (Python 3.12 with torch, lightning, torchvision, no
#                                            network): installs from .gpu-wheels into .gpu-venv and runs the checks
# Without a GPU it says so and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
LIMIT_MIB=64

# What the legacy libraries, the tests and benchmarks import beyond the GPU machine's torch, lightning and torchvision
# (with their numpy, pillow, PyYAML, fsspec, tqdm, ...), pinned as in scripts/setup.sh's .venv: pure-Python wheels, and
# for the few compiled ones a wheel for CPython $GPU_PYTHON_VERSION on x86-64 Linux.
GPU_PYTHON_VERSION=${GPU_PYTHON_VERSION:-3.12}
REQUIREMENTS=(
  mmengine==0.10.7 mmpretrain==1.2.0 mmcv-lite==2.0.1 classy-vision==0.7.0 imix==0.1.0 deepspeed==0.19.8
  addict yapf termcolor rich markdown-it-py mdurl pygments einops mat4py modelindex ordered-set fvcore iopath
  portalocker easydict tabulate progressbar2 python-utils omegaconf antlr4-python3-runtime==4.9.3 hydra-core
  jsonargparse docstring-parser visdom jsonpatch jsonpointer websocket-client pytest pluggy iniconfig hjson py-cpuinfo
  nvidia-ml-py pydantic annotated-types typing-inspection platformdirs opencv-python-headless==4.10.0.84 regex
  pydantic-core msgpack psutil ninja
)

fetch() {  # fetch DIR: each requirement's wheel for the GPU machine, or one built here from a pure-Python sdist
  local dir=$1 req size
  mkdir -p "$dir"
  local target=(--only-binary=:all: --python-version "$GPU_PYTHON_VERSION" --implementation cp --platform any
                --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64)
  for req in "${REQUIREMENTS[@]}"; do
    "$PYTHON" -m pip download --quiet --no-deps "${target[@]}" -d "$dir" "$req" 2>/dev/null ||
      DS_BUILD_OPS=0 "$PYTHON" -m pip wheel --quiet --no-deps --no-build-isolation -w "$dir" "$req"
  done
  if ls "$dir"/*.whl | grep -v -e "-none-any.whl" -e "-py3-none-" -e "-abi3-" -e "-cp${GPU_PYTHON_VERSION/./}-"; then
    echo "gpu-check: the wheels above were built for this machine's Python, not the GPU machine's" >&2
    return 1
  fi
  size=$(du -sm "$dir" | cut -f1)
  echo "gpu-check: ${size} MiB of wheels in $dir (limit ${LIMIT_MIB} MiB)"
  if [ "$size" -gt "$LIMIT_MIB" ]; then
    echo "gpu-check: more than ${LIMIT_MIB} MiB of wheels" >&2
    return 1
  fi
}

if [ "${1:-}" = --fetch ]; then
  fetch "${2:-.gpu-wheels}"
  exit
fi

if ! "$PYTHON" -c "import torch, sys; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then
  echo "gpu-check: no GPU on this machine (torch.cuda.is_available() is not True): nothing to check, exit 0"
  exit 0
fi

# the GPU machine: a venv that sees its torch, lightning and torchvision, with the fetched wheels
[ -d .gpu-wheels ] || { echo "gpu-check: no .gpu-wheels: run 'bash scripts/gpu-check.sh --fetch' first" >&2; exit 1; }
"$PYTHON" -m venv --system-site-packages .gpu-venv
py=.gpu-venv/bin/python
"$py" -m pip install --quiet --no-index --no-deps .gpu-wheels/*.whl
"$py" -m pip install --quiet --no-index --no-deps --no-build-isolation -e .
export PYTHONPATH="$PWD:$PWD/tests/helpers" OMP_NUM_THREADS=4
failed=0
step() {  # step NAME SECONDS COMMAND...: run it, report, go on
  local name=$1 seconds=$2
  shift 2
  echo "=== gpu-check: $name"
  if timeout "$seconds" "$@"; then echo "=== gpu-check: $name passed"; else echo "=== gpu-check: $name FAILED"; failed=1; fi
}

# every test of the suite marked to run only with CUDA
step "CUDA-only tests" 240 "$py" -m pytest -q -p no:cacheprovider \
  "tests/families/mmengine/test_train.py::test_amp_train_matches_tools_train_amp_on_cuda" \
  "tests/families/imix/test_optimizer.py::test_fp16_hook_on_cuda_runs_real_fp16_and_matches_reference_scaler" \
  "tests/families/classy/test_hooks.py::test_classy_ema_gpu_matches_cpu" \
  "tests/callbacks/test_ema.py::test_cpu_offload_on_cuda" "tests/callbacks/test_loss_scale.py::test_cuda_fp16" \
  "tests/integration/reliability/test_bad_input.py::test_reliability_imix_optimizer_hook_with_lightning_grad_scaler"

if "$py" -c "import deepspeed" 2>/dev/null; then
  kinds=(fsdp ds)
else
  echo "gpu-check: DeepSpeed cannot be had here (import deepspeed fails): its run is skipped, the rest runs"
  kinds=(fsdp)
fi
for kind in "${kinds[@]}"; do
  step "2-step $kind run of mmpretrain's MAE ViT-L config" 150 "$py" scripts/gpu_check_flexible.py "$kind"
done
step "MMEngine train benchmark" 120 "$py" benchmarks/mmengine_train.py --rounds 2 --iters 10
exit $failed
