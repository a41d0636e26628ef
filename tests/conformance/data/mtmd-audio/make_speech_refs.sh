#!/bin/bash
# Regenerates the speech references of tests/conformance/audio_speech_test.cpp (in speech/ here) from
# llama.cpp's libmtmd, on two clips of real and synthetic speech:
#   librivox-0880  Debian's pocketsphinx-testdata: a 16 kHz LibriVox clip ("he was not an ill disposed
#                  young man"), read from /usr/share/pocketsphinx (scripts/deps.sh test installs it);
#   espeak         tests/data/audio/espeak-16k.wav (tools/fixtures/mkspeech.py: Debian's espeak-ng).
#   tests/conformance/data/mtmd-audio/make_speech_refs.sh LCPP [BUILD]
# LCPP: llama.cpp's source as node-llama-cpp@3.22.1 bundles it (npm pack node-llama-cpp@3.22.1; clone
# its llama/gitRelease.bundle), built with cmake into BUILD (default LCPP/build; target mtmd). Needs build/test-data/models/llama-spm-e128-f32.gguf (tools/fixtures/make_test_data.py)
# and python3-numpy.
#
# Writes speech/:
#   mel-CLIP-NMEL.f32      mtmd's log-mel of the clip's first chunk (tools/fixtures/mtmd_audio_oracle.cpp),
#                          its first `mel_frames` frames (the speech; the rest is the padding's),
#                          [n_mel][mel_frames] float32;
#   PROJ-CLIP.ref.json     mtmd_oracle's exact run (F32 attention without flash, F32 KV cache) with the
#                          fixture mmprojs of this folder and the prompt "USER: <__media__>Describe the
#                          image.\nASSISTANT:" (chunk layout, top logits, the 8 greedy tokens libmtmd's
#                          helper generates as llama-mtmd-cli does: compact_ref.py);
#   PROJ-CLIP.rows.f32     every 8th row of the audio embeddings (rows 0, 8, 16, ...), float32;
#   speech.json            the clips, the oracle's commit and the CPU that computed them.
set -euo pipefail
D=$(cd "$(dirname "$0")" && pwd)
L=$(realpath "$1")
B=$(realpath "${2:-$L/build}")
T=$(realpath "$D/../../../../tools/fixtures")
PY=/usr/bin/python3
TEXT=$(realpath "$D/../../../../build/test-data/models/llama-spm-e128-f32.gguf")
LIBRIVOX=/usr/share/pocketsphinx/test/data/librivox/sense_and_sensibility_01_austen_64kb-0880.wav
ESPEAK=$(realpath "$D/../../../data/audio/espeak-16k.wav")
[[ -f $LIBRIVOX ]] || { echo "missing $LIBRIVOX: run scripts/deps.sh test" >&2; exit 1; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
mkdir -p "$D/speech"
cd "$D/speech"

gcc -O2 -std=c11 -o "$W/mtmd_oracle" "$T/mtmd_oracle.c" -I"$L/include" -I"$L/ggml/include" \
  -I"$L/tools/mtmd" -L"$B/bin" -lmtmd -lllama -lggml -lggml-base -Wl,-rpath,"$B/bin" -lm
g++ -O2 -std=c++17 -o "$W/mtmd_audio_oracle" "$T/mtmd_audio_oracle.cpp" "$L/tools/mtmd/mtmd-audio.cpp" \
  -I"$L/include" -I"$L/ggml/include" -I"$L/tools/mtmd" -L"$B/bin" -lggml-base -Wl,-rpath,"$B/bin"

PROMPT=$'USER: <__media__>Describe the image.\nASSISTANT:'
for clip in librivox-0880:$LIBRIVOX:128 espeak:$ESPEAK:80; do
  IFS=: read -r name wav n_mel <<<"$clip"
  $PY - "$wav" "$W/$name.f32" <<'EOF'
import sys, wave
import numpy as np
with wave.open(sys.argv[1]) as w:
    assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2
    (np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768).astype("<f4").tofile(sys.argv[2])
EOF
  "$W/mtmd_audio_oracle" --n-mel "$n_mel" "$W/$name.f32" "$W/$name.mel.f32" >/dev/null
  $PY - "$W/$name.f32" "$W/$name.mel.f32" "$n_mel" "mel-$name-$n_mel.f32" <<'EOF'
import sys
import numpy as np
n = np.fromfile(sys.argv[1], "<f4").size
frames = n // 160 + 1
mel = np.fromfile(sys.argv[2], "<f4").reshape(-1, int(sys.argv[3]), 3000)[0]
np.ascontiguousarray(mel[:, :frames]).astype("<f4").tofile(sys.argv[4])
EOF
  for p in ultravox qwen2a voxtral glma musicflamingo; do
    "$W/mtmd_oracle" -m "$TEXT" --mmproj "../mmproj-$p.gguf" --image "$wav" -o "$W/out-$p-$name" --n-gen 8 -t 2 \
      -p "$PROMPT" >/dev/null 2>&1
    (cd "$W" && $PY "$D/../mtmd/compact_ref.py" "out-$p-$name" "$p-$name" >/dev/null)
    cp "$W/$p-$name.ref.json" .
    $PY - "$W/$p-$name" "$p-$name" <<'EOF'
import json, sys
import numpy as np
src, name = sys.argv[1:3]
rows, dim = json.load(open(src + ".ref.json"))["image_embd_shape"]
np.fromfile(src + ".embd.f32", "<f4").reshape(rows, dim)[::8].astype("<f4").tofile(name + ".rows.f32")
EOF
  done
done
$PY - <<EOF
import json
info = {}
for l in open("/proc/cpuinfo"):
    k, _, v = l.partition(":")
    info.setdefault(k.strip(), v.strip())
avx512 = "avx512f" in info["flags"].split()
zen4 = info["vendor_id"] == "AuthenticAMD" and info["cpu family"] == "25" and avx512  # family 25 with AVX-512
cpu = info["model name"] + f" (family {info['cpu family']} model {info['model']}" + (": Zen 4" if zen4 else "") + \
      (", AVX-512" if avx512 else "") + ")"
json.dump({"source": "llama.cpp's libmtmd at $(git -C "$L" rev-parse HEAD) (node-llama-cpp@3.22.1), via "
                     "tools/fixtures/mtmd_oracle.c and mtmd_audio_oracle.cpp",
           "cpu": cpu,
           "clips": [{"name": "librivox-0880", "debian": "$LIBRIVOX", "n_mel": 128,
                      "text": "he was not an ill disposed young man"},
                     {"name": "espeak", "file": "tests/data/audio/espeak-16k.wav", "n_mel": 80,
                      "text": "The quick brown fox jumps over the lazy dog."}],
           "projectors": ["ultravox", "qwen2a", "voxtral", "glma", "musicflamingo"], "rows_every": 8},
          open("speech.json", "w"), indent=1)
EOF
echo "wrote $(ls | wc -l) files in $D/speech"
