#!/usr/bin/env bash
# spread on an NVIDIA GPU: builds against a CUDA LibTorch into build-cuda/, then trains shape B of
# bench/bench_lm.sh (6 layers, 6 heads, width 384, block 256, batch 8, char vocabulary of tiny shakespeare) on
# run.device = "cuda" for 200 steps, in float32 and in bf16, and checks and prints:
#   - the step-1 loss on cuda equals the step-1 loss of the same recipe and seed on cpu (same binary) to 1e-3
#     (initial weights are drawn on the CPU, batches depend only on the seed and the step; dropout is off);
#   - tokens/s (median of the logged windows after step 20) and MFU = tokens/s x (6N + 12 L C T) over the GPU's
#     peak: dense bf16 tensor-core FLOP/s for the bf16 run, plain float32 (no TF32) for the float32 run, from the
#     table below by `nvidia-smi --query-gpu=name` (GPU_PEAK_BF16_TFLOPS / GPU_PEAK_FP32_TFLOPS override it);
#   - with 2 or more GPUs, the same 200 steps on 2 ranks (spread train --nproc 2, NCCL, batch 8 per rank).
# Usage: scripts/gpu_check.sh [LIBTORCH_PREFIX]
#   LIBTORCH_PREFIX (or SPREAD_CUDA_TORCH): the CMake prefix of a CUDA LibTorch (unpacked libtorch/, or a pip
#   torch's package folder, the one holding lib/ and share/); by default the one of the reference environment's
#   torch (scripts/python_env.sh) or python3's, if it was built with CUDA. Not torch.utils.cmake_prefix_path
#   (share/cmake): with that prefix TorchConfig's find_library searches the system first and, on a machine with
#   Debian's libtorch-dev, links Debian's libtorch.so 1.13 under the wheel's 2.x headers (seen here).
#   DATA (default $SPREAD_DATA/tinyshakespeare/input.txt; SPREAD_DATA defaults to ../shared/data), STEPS (default 200).
# Exit codes: 0 checks passed, 1 a check failed, 2 no GPU or no CUDA LibTorch here (nothing is built then).
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
data="${DATA:-${SPREAD_DATA:-../shared/data}/tinyshakespeare/input.txt}"
steps=${STEPS:-200}

# --- what this machine has; nothing is built unless both a GPU and a CUDA LibTorch are there ---------------
if ! command -v nvidia-smi >/dev/null || ! gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null) \
   || [[ -z "$gpus" ]]; then
  echo "gpu_check: no NVIDIA GPU found (nvidia-smi is missing or lists none); nothing was built or run"
  exit 2
fi
gpu=$(head -1 <<<"$gpus")
n_gpus=$(wc -l <<<"$gpus")
prefix=${1:-${SPREAD_CUDA_TORCH:-}}
if [[ -z "$prefix" ]]; then
  python=$(scripts/python_env.sh 2>/dev/null | tail -1) || python=python3
  prefix=$("$python" -c 'import os, torch; assert torch.version.cuda; print(os.path.dirname(torch.__file__))' \
           2>/dev/null) || prefix=""
fi
if [[ -z "$prefix" ]]; then
  echo "gpu_check: no CUDA LibTorch found: python3's torch is missing or was built without CUDA;" \
       "pass the CMake prefix of one (scripts/gpu_check.sh /path/to/libtorch, or SPREAD_CUDA_TORCH=...)"
  exit 2
fi
if ! find "$prefix" -name TorchConfig.cmake -print -quit 2>/dev/null | grep -q .; then
  echo "gpu_check: $prefix holds no TorchConfig.cmake: not the CMake prefix of a LibTorch"
  exit 2
fi
torch_root=${prefix%/}
[[ $torch_root == */share/cmake ]] && torch_root=${torch_root%/share/cmake}  # a pip torch: <site-packages>/torch
if ! find "$torch_root" -maxdepth 3 -name 'libtorch_cuda.so*' -print -quit 2>/dev/null | grep -q .; then
  echo "gpu_check: the LibTorch at $torch_root has no libtorch_cuda.so: it was built without CUDA"
  exit 2
fi
[[ -f "$data" ]] || { echo "gpu_check: no data file $data (set DATA=...)"; exit 2; }

# Dense peaks in TFLOP/s (bf16 tensor cores without sparsity; float32 without TF32), from NVIDIA's data sheets.
peaks() {
  case "$1" in
    *H200*NVL*) echo "835 60" ;;
    *H200*) echo "989 67" ;;
    *H100*PCIe*) echo "756 51" ;;
    *H100*NVL*) echo "835 60" ;;
    *H100*) echo "989 67" ;;     # SXM ("NVIDIA H100 80GB HBM3")
    *A100*) echo "312 19.5" ;;
    *L40S*) echo "362 91.6" ;;
    *L4*) echo "121 30.3" ;;
    *A10*) echo "125 31.2" ;;
    *) echo "0 0" ;;
  esac
}
read -r bf16_peak fp32_peak < <(peaks "$gpu")
bf16_peak=${GPU_PEAK_BF16_TFLOPS:-$bf16_peak}
fp32_peak=${GPU_PEAK_FP32_TFLOPS:-$fp32_peak}
echo "GPU: $gpu ($n_gpus on this machine); peaks: bf16 ${bf16_peak} TFLOP/s, fp32 ${fp32_peak} TFLOP/s" \
     "$([[ "$bf16_peak" == 0 ]] && echo '(not in the table: set GPU_PEAK_BF16_TFLOPS and GPU_PEAK_FP32_TFLOPS)')"
echo "LibTorch: $prefix"

# --- build -------------------------------------------------------------------------------------------------
mkdir -p build-cuda
cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" -DSPREAD_BUILD_TESTS=OFF \
  >build-cuda/gpu_check.log 2>&1 || { echo "gpu_check: cmake failed, see build-cuda/gpu_check.log"; exit 1; }
cmake --build build-cuda --target spread -j"$(nproc)" >>build-cuda/gpu_check.log 2>&1 \
  || { echo "gpu_check: the build failed, see build-cuda/gpu_check.log"; exit 1; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
common=(--set run.out_dir="$out" --set data.source=text --set data.path="$data" --set tokenizer.kind=char
        --set train.eval_every=0 --set train.ckpt_every=0 --set train.log_every=10 --set model.dropout=0.0
        --set train.warmup_steps=5 --set model.n_layer=6 --set model.n_head=6 --set model.n_embd=384
        --set model.block_size=256 --set train.batch_size=8)

train() {  # NAME ARGS...: a run whose output goes to $out/NAME.log; its exit code is returned
  local name=$1; shift
  build-cuda/spread train recipes/shakespeare_char.toml --set run.name="$name" "${common[@]}" "$@" \
    >"$out/$name.log" 2>&1
}

# "step1_loss tokens_per_s mfu_percent" of a run directory; PEAK in TFLOP/s (0: no MFU).
summary() {
  python3 - "$out/$1" "$2" <<'PY'
import json, statistics, sys, tomllib
run, peak = sys.argv[1], float(sys.argv[2])
lines = [json.loads(l) for l in open(run + "/metrics.jsonl")]
steps = [l for l in lines if "loss" in l and "event" not in l]
late = [l["tokens_per_s"] for l in steps if l["step"] > 20] or [l["tokens_per_s"] for l in steps]
n = json.load(open(run + "/run.json"))["parameters"]
m = tomllib.load(open(run + "/recipe.toml", "rb"))["model"]
flops = 6 * n + 12 * m["n_layer"] * m["n_embd"] * m["block_size"]
tps = statistics.median(late)
mfu = 100 * tps * flops / (peak * 1e12) if peak > 0 else float("nan")
print(f'{steps[0]["loss"]:.6f} {tps:.0f} {mfu:.2f}')
PY
}

status=0
train cpu1 --set run.device=cpu --set train.max_steps=1 || { echo "gpu_check: the cpu run failed:"; tail -5 "$out/cpu1.log"; exit 1; }
read -r cpu_loss _ _ < <(summary cpu1 0)
for precision in fp32 bf16; do
  peak=$fp32_peak
  [[ $precision == bf16 ]] && peak=$bf16_peak
  if ! train "cuda_$precision" --set run.device=cuda --set train.precision="$precision" --set train.max_steps="$steps"; then
    echo "gpu_check: the cuda $precision run failed:"; tail -5 "$out/cuda_$precision.log"; status=1; continue
  fi
  grep -m1 '^precision\|^warning' "$out/cuda_$precision.log" || true
  read -r loss tps mfu < <(summary "cuda_$precision" "$peak")
  tol=0.001
  [[ $precision == bf16 ]] && tol=0.05  # bf16 products round inputs to 8 bits: the float32 check is the exact one
  verdict=$(python3 -c "print('ok' if abs($loss - $cpu_loss) <= $tol else 'FAIL')")
  [[ $verdict == ok ]] || status=1
  echo "cuda $precision: step-1 loss $loss vs cpu $cpu_loss (tolerance $tol: $verdict); $tps tokens/s;" \
       "MFU ${mfu}% of the $precision peak (${peak} TFLOP/s), $steps steps"
done

if (( n_gpus >= 2 )); then
  if train nccl --set run.device=cuda --set train.max_steps="$steps" --nproc 2; then
    read -r loss tps mfu < <(summary nccl "$fp32_peak")
    echo "cuda fp32, 2 ranks (NCCL, batch 8 per rank): $tps tokens/s in all, MFU ${mfu}% of one GPU's fp32 peak" \
         "(halve it per GPU); step-1 loss $loss (global batch 16: not comparable to the runs above)"
  else
    echo "gpu_check: the 2-rank NCCL run failed:"; tail -5 "$out/nccl.log"; status=1
  fi
else
  echo "(one GPU: no 2-rank NCCL run)"
fi
exit $status
