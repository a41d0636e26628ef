#!/usr/bin/env bash
# The C API as a user gets it: installs the build (`cmake --install`) into a folder of the build
# tree, compiles tests/api/c_api_test.c and examples/c/simple.c with `gcc -std=c99 -Wall -Wextra
# -Werror` against the installed header and `pkg-config --cflags --libs kiln`, then for the
# embedded default model and every fixture model: the tokens `kiln run` generates (greedy, and
# sampled with a seed) equal kiln_generate's, and c_api_test's checks pass (evict/restore,
# 4 sequences in one batch, state files, every function's errors); with both fixture mmprojs, the
# greedy tokens of `kiln run --image` equal kiln_generate's with the image, and the image checks
# pass; with the three fixture audio mmprojs, the same for `kiln run --audio` and the audio checks. Two runtimes sharing an arbiter directory take turns on the device (arbiter-checks). The
# example runs once.
# Usage: c_api_test.sh BUILD_DIR SOURCE_DIR KILN_BINARY FIXTURE_MODELS_DIR
# KILN_API_TEST_CFLAGS: more compiler flags for the C programs (scripts/sanitize.sh:
# -fsanitize=address,undefined, against the sanitized library, whose runtime they then bring).
set -euo pipefail
build=$(realpath "$1") src=$(realpath "$2") kiln=$(realpath "$3") models=$(realpath "$4")
work="$build/api-test"
rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
pc=$(dirname "$(find "$work/prefix" -name kiln.pc | head -n 1)")
export PKG_CONFIG_PATH="$pc"
libdir=$(pkg-config --variable=libdir kiln)
read -ra flags <<<"$(pkg-config --cflags --libs kiln)"
read -ra extra <<<"${KILN_API_TEST_CFLAGS:-}"
cc=(gcc -std=c99 -Wall -Wextra -Werror -pedantic "${extra[@]}")
"${cc[@]}" "$src/tests/api/c_api_test.c" -o "$work/c_api_test" "${flags[@]}" -lm "-Wl,-rpath,$libdir"
"${cc[@]}" "$src/examples/c/simple.c" -o "$work/simple" "${flags[@]}" "-Wl,-rpath,$libdir"

cd "$work"
prompt="In the beginning God created"
failed=0
for model in "$src/models/kjv-llama-q8_0.gguf" "$models"/*.gguf; do
  name=$(basename "$model")
  for sampling in "0 0" "0.8 42"; do
    read -r temp seed <<<"$sampling"
    expected=$("$kiln" run -m "$model" -p "$prompt" -n 24 --temp "$temp" --seed "$seed" --no-display-prompt 2>/dev/null)
    got=$(./c_api_test generate "$model" "$prompt" 24 "$temp" "$seed")
    if [[ "$expected" != "$got" ]]; then
      echo "FAIL $name --temp $temp --seed $seed: kiln run gave [$expected], kiln_generate [$got]" >&2
      failed=1
    fi
  done
  if ! ./c_api_test checks "$model"; then
    echo "FAIL $name: c_api_test checks" >&2
    failed=1
  fi
done
# Images: the fixture text model with its random-weight mmproj, as `kiln run --image` decodes them.
text_model="$models/llama-spm-e128-f32.gguf" image="$src/tests/conformance/data/mtmd/test-224.png"
image_prompt='USER: <__media__>Describe the image.
ASSISTANT:'
for mmproj in "$models/../mtmd/mmproj-gemma3.gguf" "$models/../mtmd/mmproj-mlp.gguf"; do
  name=$(basename "$mmproj")
  expected=$("$kiln" run -m "$text_model" --mmproj "$mmproj" --image "$image" -p "$image_prompt" -n 8 --temp 0 \
    --no-display-prompt 2>/dev/null)
  got=$(./c_api_test generate "$text_model" "$image_prompt" 8 0 0 "$mmproj" "$image")
  if [[ -z "$expected" || "$expected" != "$got" ]]; then
    echo "FAIL $name: kiln run --image gave [$expected], kiln_generate with the image [$got]" >&2
    failed=1
  fi
  if ! ./c_api_test image-checks "$text_model" "$mmproj" "$image"; then
    echo "FAIL $name: c_api_test image-checks" >&2
    failed=1
  fi
done
# Audio: the same text model with its random-weight audio mmprojs, as `kiln run --audio` decodes them.
wav="$src/tests/data/audio/voiced-16k.wav"
for proj in ultravox qwen2a voxtral; do
  mmproj="$src/tests/conformance/data/mtmd-audio/mmproj-$proj.gguf"
  expected=$("$kiln" run -m "$text_model" --mmproj "$mmproj" --audio "$wav" -p "$image_prompt" -n 8 --temp 0 \
    --no-display-prompt 2>/dev/null)
  got=$(./c_api_test generate "$text_model" "$image_prompt" 8 0 0 "$mmproj" "$wav")
  if [[ -z "$expected" || "$expected" != "$got" ]]; then
    echo "FAIL $proj: kiln run --audio gave [$expected], kiln_generate with the audio [$got]" >&2
    failed=1
  fi
  if ! ./c_api_test audio-checks "$text_model" "$mmproj" "$wav"; then
    echo "FAIL $proj: c_api_test audio-checks" >&2
    failed=1
  fi
done
# The arbiter: two runtimes sharing a directory take turns (a few hundred ms of grace and probes).
if ! timeout 60 ./c_api_test arbiter-checks "$src/models/kjv-llama-q8_0.gguf" "$work/arbiter"; then
  echo "FAIL c_api_test arbiter-checks" >&2
  failed=1
fi
example=$(./simple "$src/models/kjv-llama-q8_0.gguf" "$prompt")
[[ -n "$example" ]] || { echo "FAIL examples/c/simple.c printed nothing" >&2; failed=1; }
exit "$failed"
