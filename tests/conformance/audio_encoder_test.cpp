// The Whisper audio encoder and its projectors (models/clip/whisper_encoder.h) against llama.cpp's
// libmtmd (tests/conformance/data/mtmd-audio: tools/fixtures/mtmd_oracle.c's outputs for the
// random-weight mmprojs of tools/fixtures/mkmmproj_audio.py on tests/data/audio/voiced-16k.wav,
// exact mode: F32 attention without flash). Every embedding within 1e-3 of the largest value, and
// the normalised mean squared error reported.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "audio/decode.h"
#include "audio/log_mel.h"
#include "conformance/reference_check.h"
#include "llm/cpu_engine.h"
#include "models/clip/whisper_encoder.h"
#include "runtime/planner.h"

namespace kiln {
namespace {

const std::string kData = std::string(KILN_SOURCE_DIR) + "/tests/conformance/data/mtmd-audio/";
const std::string kWav = std::string(KILN_SOURCE_DIR) + "/tests/data/audio/voiced-16k.wav";

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  return {std::istreambuf_iterator<char>(in), {}};
}

struct AudioCase {
  std::string name;  // mmproj-NAME.gguf, NAME-voiced.{ref.json,embd.f32}
};
void PrintTo(const AudioCase& c, std::ostream* os) { *os << c.name; }

class AudioEncoderConformance : public ::testing::TestWithParam<AudioCase> {};

TEST_P(AudioEncoderConformance, EmbeddingsMatchLlamaCpp) {
  const AudioCase& ac = GetParam();
  const auto ref = testing::load_json(kData + ac.name + "-voiced.ref.json");
  auto file = GgufFile::open(kData + "mmproj-" + ac.name + ".gguf");
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto hp = read_audio_hparams(**file);
  ASSERT_TRUE(hp.ok()) << hp.error().message;
  const int64_t n_embd_out = ref["image_embd_shape"][1].get<int64_t>();
  auto w = bind_audio_weights(**file, *hp, n_embd_out);
  ASSERT_TRUE(w.ok()) << w.error().message;

  auto samples = audio::decode_audio(read_file(kWav));
  ASSERT_TRUE(samples.ok()) << samples.error().message;
  auto mel = audio::WhisperLogMel::create(static_cast<int32_t>(hp->n_mel));
  ASSERT_TRUE(mel.ok());
  auto chunks = mel->chunks(*samples);
  ASSERT_TRUE(chunks.ok()) << chunks.error().message;
  ASSERT_EQ(chunks->size(), 1u);
  const audio::MelChunk& chunk = chunks->front();

  Graph g;
  auto eg = build_audio_encoder(g, *hp, *w, chunk.n_frames, AttentionPath::Plain);
  ASSERT_TRUE(eg.ok()) << eg.error().message;
  CpuEngine engine(2);
  ComputeArena arena(engine.device, "audio");
  ASSERT_TRUE(arena.reserve(g).ok());
  ASSERT_TRUE(arena.allocate().ok());
  auto plan = arena.plan(g);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  ASSERT_TRUE(engine.backend.prepare(*plan).ok());
  ASSERT_TRUE(plan->bind(eg->mel, contiguous_view(DType::F32, {chunk.n_frames, chunk.n_mel, 1, 1},
                                                  const_cast<float*>(chunk.data.data())))
                  .ok());
  const Status st = engine.backend.execute(*plan);
  ASSERT_TRUE(st.ok()) << st.error().message;
  const TensorView out = plan->view(eg->embeddings);

  const int64_t n_tokens = ref["image_embd_shape"][0].get<int64_t>();
  ASSERT_EQ(out.ne[0], n_embd_out);
  ASSERT_EQ(out.ne[1], n_tokens);
  EXPECT_EQ(hp->n_output_tokens(chunk.n_frames), n_tokens);
  std::vector<float> got(static_cast<size_t>(out.nelements()));
  ASSERT_TRUE(engine.device.download(out, got.data(), out.span_bytes()).ok());
  const std::vector<uint8_t> want_bytes = read_file(kData + ac.name + "-voiced.embd.f32");
  ASSERT_EQ(want_bytes.size(), got.size() * 4);
  std::vector<float> want(got.size());
  std::memcpy(want.data(), want_bytes.data(), want_bytes.size());

  double max_ref = 0, max_err = 0, err2 = 0, ref2 = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(double{want[i]}));
    const double e = double{got[i]} - double{want[i]};
    max_err = std::max(max_err, std::fabs(e));
    err2 += e * e;
    ref2 += double{want[i]} * want[i];
  }
  if (hp->projector == AudioProjector::Glma) {
    // Its first and last rows are the file's v.boi and v.eoi as they are, in llama.cpp's too.
    const size_t last = static_cast<size_t>((n_tokens - 1) * n_embd_out);
    const auto* boi = static_cast<const float*>(w->projector.boi.view.data);
    const auto* eoi = static_cast<const float*>(w->projector.eoi.view.data);
    for (size_t j = 0; j < static_cast<size_t>(n_embd_out); ++j) {
      ASSERT_EQ(want[j], boi[j]) << j;
      ASSERT_EQ(want[last + j], eoi[j]) << j;
      EXPECT_EQ(got[j], boi[j]) << j;
      EXPECT_EQ(got[last + j], eoi[j]) << j;
    }
  }
  const double nmse = err2 / ref2;
  std::printf("%s: %lld x %lld embeddings, max |err| %.3g of max |ref| %.3g, NMSE %.3g\n", ac.name.c_str(),
              static_cast<long long>(n_tokens), static_cast<long long>(n_embd_out), max_err, max_ref, nmse);
  EXPECT_LE(max_err, 1e-3 * max_ref);
  EXPECT_LE(nmse, 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Mtmd, AudioEncoderConformance,
                         ::testing::Values(AudioCase{"ultravox"}, AudioCase{"qwen2a"}, AudioCase{"voxtral"},
                                           AudioCase{"glma"}, AudioCase{"musicflamingo"}),
                         [](const ::testing::TestParamInfo<AudioCase>& i) { return i.param.name; });

}  // namespace
}  // namespace kiln
