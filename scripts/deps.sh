#!/usr/bin/env bash
# Installs the Debian packages kiln needs to build and test, only those not installed yet.
# Usage: scripts/deps.sh [build|test|all]   (default: build)
set -euo pipefail
# libedit-dev: line editing and history in `kiln chat` (BSD licence). libboost-dev: Boost.Asio and
# Boost.Beast (header-only) for the server's HTTP layer. libpng-dev and libjpeg62-turbo-dev: image
# inputs; libssl-dev: SHA-256 content ids of images (libcrypto). libsndfile1-dev: audio inputs (WAV,
# FLAC, MP3 through libmpg123); libsoxr-dev: their sample-rate conversion. libcpp-httplib-dev: the server
# tests' HTTP client. libvulkan-dev (headers and the Khronos loader) and glslc (shaderc: GLSL to
# SPIR-V at build time): the Vulkan backend; mesa-vulkan-drivers: lavapipe, the software Vulkan
# device the tests run the backend on (and a GPU's driver where the machine has none of its own).
want=(g++ cmake make libgtest-dev libgmock-dev nlohmann-json3-dev libboost-dev libcpp-httplib-dev
      libedit-dev libpng-dev libjpeg62-turbo-dev libssl-dev libsndfile1-dev libsoxr-dev libvulkan-dev glslc
      mesa-vulkan-drivers)
if [[ "${1:-build}" != build ]]; then
  # clang + its runtime: the libFuzzer targets (fuzz/). python3-numpy: the test data
  # generator (tools/fixtures); git: it reads llama.cpp's vocabularies out of a git bundle.
  want+=(clang libclang-rt-14-dev python3-numpy git)
  # Test speech: pocketsphinx-testdata's 16 kHz LibriVox clips (read in place by the audio
  # conformance tests); espeak-ng and lame make the committed synthetic speech and its MP3
  # (tools/fixtures/mkspeech.py).
  want+=(pocketsphinx-testdata espeak-ng lame)
  # The C API's tests (tests/api): pkg-config finds the installed libkiln (kiln.pc) for the C
  # test; python3-pip and python3-setuptools install the Python package offline
  # (--no-build-isolation), python3-pytest runs its tests, python3-jsonschema checks a chat
  # reply against the JSON schema it was asked to follow.
  want+=(pkg-config python3-pip python3-setuptools python3-pytest python3-jsonschema)
  # The Khronos validation layer: the Vulkan tests' pass under it (ctest: vulkan_validation).
  want+=(vulkan-validationlayers)
  # node + npm: the OpenAI Node SDK test (tests/server/node). Only when missing: a node installed
  # another way (NodeSource, nvm) must stay, and Debian's npm conflicts with NodeSource's nodejs.
  command -v node >/dev/null || want+=(nodejs)
  command -v npm >/dev/null || want+=(npm)
fi
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "kiln: installing Debian packages: ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}"
fi
