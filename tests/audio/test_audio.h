// Test audio: WAV files written byte by byte (so a test controls every header field), and other
// formats written by libsndfile (the library kiln decodes them with).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::audio::test {

// The sample of channel c at frame i of the test signal: a sine whose pitch depends on the channel,
// in [-0.5, 0.5].
float test_signal(int64_t i, int c, int rate);

struct WavSpec {
  int rate = 16000;
  int channels = 1;
  int bits = 16;  // 8, 16, 24, 32 (PCM), or 32 with is_float
  bool is_float = false;
  int64_t frames = 1600;
};

// A RIFF WAV of test_signal quantized to the spec's format.
std::vector<uint8_t> write_wav(const WavSpec& spec);
// What a decoder must give for frame i, channel c of write_wav(spec): the quantized sample as a float.
float wav_sample(const WavSpec& spec, int64_t i, int c);

// test_signal quantized to 16 bits as write_wav does, written by libsndfile as `format` (SF_FORMAT_*
// major | subtype), frames x channels.
std::vector<uint8_t> write_with_sndfile(int format, int rate, int channels, int64_t frames);

}  // namespace kiln::audio::test
