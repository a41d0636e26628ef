#!/usr/bin/env bash
# The Vulkan backend on a real GPU, in one run (issue 31): the Vulkan loader unpacked where the
# machine lacks it, the devices listed, the `vulkan` tests run on the card (vulkan0), and `kiln
# bench` of a 1B-class model of real shape on vulkan0 and on the CPU.
# Usage: scripts/gpu_check.sh [OUT_DIR]     (after scripts/build.sh release and the test data)
# The device machine (see /work/.library/device/README.md) gets the built binaries and the loader
# packages carried: build/release/{kiln,test_vulkan}, build/test-data/models, .gl/*.deb.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-/tmp/kiln-gpu-check}}
mkdir -p "$out"
if ! ldconfig -p | grep -q libvulkan.so.1 && compgen -G ".gl/*.deb" >/dev/null; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
nvidia_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[[ -f $nvidia_icd && -z ${VK_DRIVER_FILES:-} ]] && export VK_DRIVER_FILES=$nvidia_icd
kiln=build/release/kiln
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>/dev/null; "$kiln" --version;
  "$kiln" run --list-devices; } 2>&1 | tee "$out/devices.txt"
# The vulkan tests on the card (vulkan0 must be the GPU: KILN_VULKAN_DEVICES picks it when the
# loader lists lavapipe first).
KILN_VULKAN_FORCE_STAGING=1 KILN_VULKAN_POISON=1 KILN_TEST_DATA_GEN_DIR=build/test-data \
  timeout 300 build/release/test_vulkan 2>&1 | tee "$out/test_vulkan.txt" | grep -E "^\[  (PASSED|FAILED) |FAILED"
# A 1B-class model of real shape (Llama 3.2 1B's sizes, random weights), F16 and Q4_0.
# GPU_CHECK_SHAPE overrides the shape (a small one for a dry run on lavapipe).
shape=${GPU_CHECK_SHAPE:---embd 2048 --layers 16 --heads 32 --kv-heads 8 --ff 8192}
model=/tmp/kiln-gpu-check-f16.gguf
# shellcheck disable=SC2086
/usr/bin/python3 tools/fixtures/mkmodel.py --vocab build/test-data/vocab/ggml-vocab-llama-bpe.gguf --out "$model" \
  $shape --type f16 >/dev/null &&
  "$kiln" quantize "$model" /tmp/kiln-gpu-check-q4_0.gguf Q4_0 >/dev/null || echo "gpu_check: making the model failed"
for dev in vulkan0 cpu; do
  timeout 300 "$kiln" bench -m "$model",/tmp/kiln-gpu-check-q4_0.gguf -dev "$dev" -p 512 -n 64 -r 3 2>&1 |
    tee "$out/bench-$dev.txt"
done
