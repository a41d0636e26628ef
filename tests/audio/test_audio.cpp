#include "test_audio.h"

#include <sndfile.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <stdexcept>

namespace kiln::audio::test {
namespace {

void put_le(std::vector<uint8_t>& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void put_tag(std::vector<uint8_t>& out, const char* tag) {
  for (const char* c = tag; *c; ++c) out.push_back(static_cast<uint8_t>(*c));
}

int64_t quantize(float x, int bits) {
  const double scale = std::ldexp(1.0, bits - 1);
  return std::clamp<int64_t>(std::llround(x * scale), -static_cast<int64_t>(scale),
                             static_cast<int64_t>(scale) - 1);
}

struct Growing {
  std::vector<uint8_t> bytes;
  sf_count_t pos = 0;
};

}  // namespace

float test_signal(int64_t i, int c, int rate) {
  const double f = 220.0 * (c + 1);
  return static_cast<float>(0.5 * std::sin(2.0 * std::numbers::pi * f * double(i) / rate));
}

float wav_sample(const WavSpec& spec, int64_t i, int c) {
  const float x = test_signal(i, c, spec.rate);
  if (spec.is_float) return x;
  if (spec.bits == 8) return static_cast<float>(quantize(x, 8)) / 128.0f;
  return static_cast<float>(static_cast<double>(quantize(x, spec.bits)) / std::ldexp(1.0, spec.bits - 1));
}

std::vector<uint8_t> write_wav(const WavSpec& spec) {
  const int bytes = spec.bits / 8;
  const uint64_t data = static_cast<uint64_t>(spec.frames) * spec.channels * bytes;
  std::vector<uint8_t> out;
  put_tag(out, "RIFF");
  put_le(out, 36 + data, 4);
  put_tag(out, "WAVEfmt ");
  put_le(out, 16, 4);
  put_le(out, spec.is_float ? 3 : 1, 2);
  put_le(out, spec.channels, 2);
  put_le(out, spec.rate, 4);
  put_le(out, static_cast<uint64_t>(spec.rate) * spec.channels * bytes, 4);
  put_le(out, spec.channels * bytes, 2);
  put_le(out, spec.bits, 2);
  put_tag(out, "data");
  put_le(out, data, 4);
  for (int64_t i = 0; i < spec.frames; ++i) {
    for (int c = 0; c < spec.channels; ++c) {
      const float x = test_signal(i, c, spec.rate);
      if (spec.is_float) {
        uint32_t u;
        std::memcpy(&u, &x, 4);
        put_le(out, u, 4);
      } else if (spec.bits == 8) {
        put_le(out, static_cast<uint64_t>(quantize(x, 8) + 128), 1);
      } else {
        put_le(out, static_cast<uint64_t>(quantize(x, spec.bits)), bytes);
      }
    }
  }
  return out;
}

std::vector<uint8_t> write_with_sndfile(int format, int rate, int channels, int64_t frames) {
  Growing g;
  SF_VIRTUAL_IO io{
      [](void* u) -> sf_count_t { return static_cast<sf_count_t>(static_cast<Growing*>(u)->bytes.size()); },
      [](sf_count_t off, int whence, void* u) -> sf_count_t {
        auto* g = static_cast<Growing*>(u);
        g->pos = (whence == SEEK_SET ? 0 : whence == SEEK_CUR ? g->pos : sf_count_t(g->bytes.size())) + off;
        return g->pos;
      },
      [](void* p, sf_count_t n, void* u) -> sf_count_t {
        auto* g = static_cast<Growing*>(u);
        const sf_count_t k =
            std::max<sf_count_t>(0, std::min<sf_count_t>(n, sf_count_t(g->bytes.size()) - g->pos));
        std::memcpy(p, g->bytes.data() + g->pos, size_t(k));
        g->pos += k;
        return k;
      },
      [](const void* p, sf_count_t n, void* u) -> sf_count_t {
        auto* g = static_cast<Growing*>(u);
        if (g->bytes.size() < size_t(g->pos + n)) g->bytes.resize(size_t(g->pos + n));
        std::memcpy(g->bytes.data() + g->pos, p, size_t(n));
        g->pos += n;
        return n;
      },
      [](void* u) -> sf_count_t { return static_cast<Growing*>(u)->pos; }};
  SF_INFO info{};
  info.samplerate = rate;
  info.channels = channels;
  info.format = format;
  SNDFILE* f = sf_open_virtual(&io, SFM_WRITE, &info, &g);
  if (!f) throw std::runtime_error(std::string("libsndfile cannot write: ") + sf_strerror(nullptr));
  std::vector<short> buf(static_cast<size_t>(frames) * channels);
  for (int64_t i = 0; i < frames; ++i)
    for (int c = 0; c < channels; ++c)
      buf[size_t(i) * channels + c] = short(quantize(test_signal(i, c, rate), 16));
  sf_writef_short(f, buf.data(), frames);
  sf_close(f);
  return g.bytes;
}

}  // namespace kiln::audio::test
