// libFuzzer target for audio decoding (libsndfile behind kiln's checks, then libsoxr): any input
// must decode to samples or a clean Error, never crash, read out of bounds or leak (built with
// ASan+UBSan by the `fuzz` preset). The limit of 10 s bounds each input's memory and time.
// Run: fuzz/run_fuzz.sh audio_decode [SECONDS]
#include <cstddef>
#include <cstdint>
#include <span>

#include "audio/decode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  (void)kiln::audio::sniff_audio_format(bytes);
  auto samples = kiln::audio::decode_audio(bytes, {.sample_rate = 16000, .max_seconds = 10.0});
  if (samples.ok() && samples->front() == 12345.0f) return 0;  // keeps the decode from being dropped
  return 0;
}
