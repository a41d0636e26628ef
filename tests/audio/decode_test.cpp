// decode_audio: WAV in every sample format (the exact floats llama.cpp's miniaudio makes), channels
// averaged, FLAC and MP3 (as llama.cpp's miniaudio decodes it) through libsndfile, other rates through
// libsoxr, and hostile bytes refused with a message that names the problem (empty, unknown, truncated, lying
// headers, over-long).
#include "audio/decode.h"

#include <gtest/gtest.h>
#include <sndfile.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "audio/resample.h"
#include "test_audio.h"
#include "test_data.h"

namespace kiln::audio {
namespace {

using test::WavSpec;

void expect_error(const Result<std::vector<float>>& r, const std::string& needle) {
  ASSERT_FALSE(r.ok()) << "decoded audio that should be refused (" << needle << ")";
  EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
  EXPECT_EQ(r.error().message.rfind("audio: ", 0), 0u) << r.error().message;
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << path;
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void set_le32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.at(at + i) = static_cast<uint8_t>(v >> (8 * i));
}

TEST(AudioDecode, WavEverySampleFormatExactly) {
  for (WavSpec spec : {WavSpec{.bits = 8}, WavSpec{.bits = 16}, WavSpec{.bits = 24}, WavSpec{.bits = 32},
                       WavSpec{.bits = 32, .is_float = true}}) {
    SCOPED_TRACE(std::to_string(spec.bits) + (spec.is_float ? "-bit float" : "-bit PCM"));
    auto got = decode_audio(test::write_wav(spec));
    ASSERT_TRUE(got.ok()) << got.error().message;
    ASSERT_EQ(got->size(), size_t(spec.frames));
    for (int64_t i = 0; i < spec.frames; ++i)
      ASSERT_EQ((*got)[i], test::wav_sample(spec, i, 0)) << "frame " << i;
  }
}

TEST(AudioDecode, ChannelsAveraged) {
  const WavSpec spec{.channels = 3, .frames = 800};
  auto got = decode_audio(test::write_wav(spec));
  ASSERT_TRUE(got.ok()) << got.error().message;
  ASSERT_EQ(got->size(), 800u);
  for (int64_t i = 0; i < spec.frames; ++i) {
    const float want =
        (test::wav_sample(spec, i, 0) + test::wav_sample(spec, i, 1) + test::wav_sample(spec, i, 2)) / 3;
    ASSERT_NEAR((*got)[i], want, 1e-7) << "frame " << i;
  }
}

TEST(AudioDecode, FlacIsLossless) {
  auto got = decode_audio(test::write_with_sndfile(SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 16000, 1, 4000));
  ASSERT_TRUE(got.ok()) << got.error().message;
  ASSERT_EQ(got->size(), 4000u);
  for (int64_t i = 0; i < 4000; ++i) ASSERT_EQ((*got)[i], test::wav_sample(WavSpec{}, i, 0)) << "frame " << i;
}

// The resampled sine equals the sine sampled at the new rate, away from the edges (where the
// filter sees the signal start and stop): SOXR_HQ's error is far below 16-bit quantization.
TEST(AudioDecode, OtherRatesResampledTo16k) {
  for (int rate : {8000, 22050, 44100, 48000}) {
    SCOPED_TRACE(std::to_string(rate) + " Hz");
    const WavSpec spec{.rate = rate, .bits = 32, .is_float = true, .frames = rate / 4};
    auto got = decode_audio(test::write_wav(spec));
    ASSERT_TRUE(got.ok()) << got.error().message;
    ASSERT_EQ(got->size(), 4000u);
    double worst = 0;
    for (int64_t i = 200; i < 3800; ++i)
      worst = std::max(worst, double(std::abs((*got)[i] - test::test_signal(i, 0, 16000))));
    EXPECT_LT(worst, 1e-4);
  }
}

std::vector<float> read_floats(const std::string& rel) {
  const std::vector<uint8_t> raw = read_file(test_data::path(rel));
  std::vector<float> out(raw.size() / sizeof(float));
  std::memcpy(out.data(), raw.data(), out.size() * sizeof(float));
  return out;
}

// Relative RMS difference of two signals over their common length.
double relative_rms(std::span<const float> got, std::span<const float> want) {
  double err = 0, energy = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    err += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    energy += double(want[i]) * want[i];
  }
  return std::sqrt(err / energy);
}

// Real speech as MP3 (tests/data/audio/mp3-ref.json): at the file's rate libmpg123 gives the
// samples llama.cpp's miniaudio gives (two MP3 decoders, within 1e-4); at 16 kHz libsoxr and
// miniaudio's linear resampler agree within 3% RMS (measured 2.3%: the linear resampler's
// filter differs from soxr's in the top kilohertz).
TEST(AudioDecode, Mp3AsLlamaCppDecodesIt) {
  const std::vector<uint8_t> mp3 = read_file(test_data::path("audio/speech-44k.mp3"));
  EXPECT_EQ(sniff_audio_format(mp3), "mp3");
  auto native = decode_audio(mp3, {.sample_rate = 44100});
  ASSERT_TRUE(native.ok()) << native.error().message;
  const std::vector<float> want = read_floats("audio/speech-44k.miniaudio-44100.f32");
  ASSERT_EQ(native->size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, double(std::abs((*native)[i] - want[i])));
  EXPECT_LT(worst, 1e-4);

  auto at16k = decode_audio(mp3);
  ASSERT_TRUE(at16k.ok()) << at16k.error().message;
  const std::vector<float> want16k = read_floats("audio/speech-44k.miniaudio-16000.f32");
  EXPECT_NEAR(double(at16k->size()), double(want16k.size()), 1.0);
  // miniaudio's low-pass filter delays its output by one sample; compare at that lag.
  EXPECT_LT(relative_rms(std::span(*at16k).subspan(0, at16k->size() - 1), std::span(want16k).subspan(1)),
            0.03);
}

TEST(AudioDecode, RefusesEmptyUnknownAndOggBytes) {
  expect_error(decode_audio({}), "no data (0 bytes)");
  const std::string text = "hello, this is not audio";
  expect_error(decode_audio({reinterpret_cast<const uint8_t*>(text.data()), text.size()}),
               "unrecognised format");
  const std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  expect_error(decode_audio(png), "first bytes 89 50 4e 47");
  expect_error(decode_audio(test::write_with_sndfile(SF_FORMAT_OGG | SF_FORMAT_VORBIS, 16000, 1, 1024)),
               "Ogg files are not supported");
}

TEST(AudioDecode, RefusesTruncatedAndLyingWavs) {
  const std::vector<uint8_t> wav = test::write_wav(WavSpec{});
  std::vector<uint8_t> cut(wav.begin(), wav.begin() + wav.size() / 2);
  expect_error(decode_audio(cut), "truncated WAV");
  expect_error(decode_audio(std::vector<uint8_t>(wav.begin(), wav.begin() + 44)), "truncated WAV");
  std::vector<uint8_t> empty_data(wav.begin(), wav.begin() + 44);
  set_le32(empty_data, 40, 0);
  expect_error(decode_audio(empty_data), "holds no samples");
  std::vector<uint8_t> sixteen_bit_float = test::write_wav(WavSpec{.bits = 16, .is_float = true});
  expect_error(decode_audio(sixteen_bit_float), "cannot read the WAV file");
  expect_error(decode_audio(std::vector<uint8_t>(wav.begin(), wav.begin() + 20)), "cannot read the WAV file");
  std::vector<uint8_t> no_channels = wav;
  no_channels[22] = 0;
  expect_error(decode_audio(no_channels), "WAV");
  std::vector<uint8_t> no_rate = wav;
  set_le32(no_rate, 24, 0);
  expect_error(decode_audio(no_rate), "WAV");
  std::vector<uint8_t> huge_data = wav;  // a data chunk of 4 GiB - 2 in a 3 KiB file
  set_le32(huge_data, 40, 0xFFFFFFFEu);
  expect_error(decode_audio(huge_data), "truncated WAV");
  std::vector<uint8_t> garbage_flac = {'f', 'L', 'a', 'C', 0, 0, 0, 34, 1, 2, 3};
  expect_error(decode_audio(garbage_flac), "FLAC");
}

TEST(AudioDecode, RefusesAudioOverTheLimit) {
  const std::vector<uint8_t> wav = test::write_wav(WavSpec{.frames = 16000});  // 1 s
  expect_error(decode_audio(wav, {.max_seconds = 0.5}), "longer than the limit of 0.5 s");
  EXPECT_TRUE(decode_audio(wav, {.max_seconds = 1.0}).ok());
  // A streamed WAV (sizes 0xFFFFFFFF: "to the end") declares no length: the limit stops the reading.
  std::vector<uint8_t> streamed = wav;
  set_le32(streamed, 40, 0xFFFFFFFFu);
  set_le32(streamed, 4, 0xFFFFFFFFu);
  expect_error(decode_audio(streamed, {.max_seconds = 0.5}), "longer than the limit of 0.5 s");
}

// Found by fuzz/audio_decode_fuzz.cpp: libsoxr crashed when asked for no output.
TEST(AudioDecode, RefusesAudioTooShortForTheRate) {
  expect_error(decode_audio(test::write_wav(WavSpec{.rate = 400000, .frames = 1})),
               "1 samples at 400000 Hz make no sample at 16000 Hz");
  auto none = resample(std::vector<float>(1, 0.5f), 400000, 16000);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(AudioDecode, ResampleKeepsLengthRatio) {
  std::vector<float> x(44100, 0.25f);
  auto y = resample(x, 44100, 16000);
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(y->size(), 16000u);
  EXPECT_NEAR((*y)[8000], 0.25f, 1e-4);
}

}  // namespace
}  // namespace kiln::audio
