// WhisperLogMel against llama.cpp's mtmd (tests/data/audio/mel-ref.json, made by
// tools/fixtures/mkaudio_refs.py): 80 and 128 mel bins, one chunk and two, every value of the first
// 80 frames of each chunk within 1e-5; the silent tail equal to the clamp; chunk counts at the
// boundaries. The FFT against a double-precision DFT.
#include "audio/log_mel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <numbers>
#include <random>

#include "audio/decode.h"
#include "audio/fft.h"
#include "test_data.h"

namespace kiln::audio {
namespace {

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << path;
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

nlohmann::json reference() {
  std::ifstream f(test_data::path("audio/mel-ref.json"));
  return nlohmann::json::parse(f);
}

TEST(AudioLogMel, EqualsMtmdWithinOneInHundredThousand) {
  const nlohmann::json ref = reference();
  auto clip = decode_audio(read_file(test_data::path("audio/" + ref["wav"].get<std::string>())));
  ASSERT_TRUE(clip.ok()) << clip.error().message;
  for (const auto& c : ref["cases"]) {
    const int repeat = c["repeat"], n_mel = c["n_mel"], frames = c["frames"];
    SCOPED_TRACE("repeat " + std::to_string(repeat) + ", " + std::to_string(n_mel) + " mel bins");
    std::vector<float> samples;
    for (int r = 0; r < repeat; ++r) samples.insert(samples.end(), clip->begin(), clip->end());
    auto mel = WhisperLogMel::create(n_mel);
    ASSERT_TRUE(mel.ok());
    auto chunks = mel->chunks(samples);
    ASSERT_TRUE(chunks.ok()) << chunks.error().message;
    ASSERT_EQ(chunks->size(), c["n_chunks"].get<size_t>());
    const auto raw = read_file(test_data::path("audio/" + c["file"].get<std::string>()));
    ASSERT_EQ(raw.size(), chunks->size() * n_mel * frames * sizeof(float));
    const auto* want = reinterpret_cast<const float*>(raw.data());
    double worst = 0.0;
    for (size_t k = 0; k < chunks->size(); ++k) {
      const MelChunk& chunk = (*chunks)[k];
      ASSERT_EQ(chunk.n_mel, n_mel);
      ASSERT_EQ(chunk.n_frames, WhisperLogMel::kChunkFrames);
      for (int m = 0; m < n_mel; ++m) {
        for (int t = 0; t < frames; ++t) {
          const double d =
              std::abs(chunk.data[size_t(m) * chunk.n_frames + t] - want[(k * n_mel + m) * frames + t]);
          worst = std::max(worst, d);
        }
      }
    }
    EXPECT_LE(worst, 1e-5);
    if (repeat == 1) {  // 0.75 s: every frame past the first 80 is silence, at the clamp
      const float floor = c["floor"].get<float>();
      const MelChunk& chunk = chunks->front();
      for (int m = 0; m < n_mel; ++m)
        for (int t = frames; t < chunk.n_frames; ++t)
          ASSERT_NEAR(chunk.data[size_t(m) * chunk.n_frames + t], floor, 1e-6);
    }
  }
}

TEST(AudioLogMel, ChunkCountsAsMtmd) {
  const nlohmann::json ref = reference();  // items() below refers into it: it must outlive the loop
  for (const auto& [len, count] : ref["chunk_counts"].items()) {
    EXPECT_EQ(WhisperLogMel::chunk_count(std::stoll(len)), count.get<int64_t>()) << len << " samples";
  }
  auto mel = WhisperLogMel::create(80);
  ASSERT_TRUE(mel.ok());
  for (size_t n : {size_t{1}, size_t{479839}, size_t{479840}}) {
    auto chunks = mel->chunks(std::vector<float>(n, 0.25f));
    ASSERT_TRUE(chunks.ok());
    EXPECT_EQ(static_cast<int64_t>(chunks->size()), WhisperLogMel::chunk_count(int64_t(n)))
        << n << " samples";
  }
}

TEST(AudioLogMel, RefusesBadMelCountsAndNoSamples) {
  for (int n : {0, -3, 257}) {
    auto mel = WhisperLogMel::create(n);
    ASSERT_FALSE(mel.ok());
    EXPECT_NE(mel.error().message.find(std::to_string(n) + " mel bins"), std::string::npos)
        << mel.error().message;
  }
  auto mel = WhisperLogMel::create(128);
  ASSERT_TRUE(mel.ok());
  auto chunks = mel->chunks({});
  ASSERT_FALSE(chunks.ok());
  EXPECT_NE(chunks.error().message.find("no samples"), std::string::npos);
}

TEST(AudioFft, MatchesADoublePrecisionDft) {
  std::mt19937 rng(36);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int n : {1, 2, 3, 25, 50, 400, 512}) {
    std::vector<float> x(n), out(2 * n), scratch;
    for (float& v : x) v = u(rng);
    RealFft(n).forward(x.data(), out.data(), scratch);
    for (int k = 0; k < n; ++k) {
      std::complex<double> want = 0;
      for (int j = 0; j < n; ++j) want += double(x[j]) * std::polar(1.0, -2.0 * std::numbers::pi * k * j / n);
      ASSERT_NEAR(out[2 * k], want.real(), 1e-4 * n) << "n " << n << " bin " << k;
      ASSERT_NEAR(out[2 * k + 1], want.imag(), 1e-4 * n) << "n " << n << " bin " << k;
    }
  }
}

}  // namespace
}  // namespace kiln::audio
