// Helpers of the tests that encode the fixture images (tests/conformance/data/mtmd) with the fixture
// projectors on a device: loading, preparing, encoders on a registry's device.
#pragma once

#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "llm/model_test_util.h"
#include "llm/vision_encoder.h"

namespace kiln::test {

inline const std::string kMtmd = std::string(KILN_SOURCE_DIR) + "/tests/conformance/data/mtmd/";

inline std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  return {std::istreambuf_iterator<char>(in), {}};
}

inline std::shared_ptr<const VisionModel> mmproj(const std::string& file, const Model& text) {
  auto v = VisionModel::load(kMtmd + file, text);
  EXPECT_TRUE(v.ok()) << v.error().message;
  return v.ok() ? *v : nullptr;
}

inline std::shared_ptr<const PreparedImage> image(const VisionModel& v, const std::string& file) {
  auto p = v.prepare_image(read_file(kMtmd + file));
  EXPECT_TRUE(p.ok()) << p.error().message;
  return p.ok() ? *p : nullptr;
}

inline std::unique_ptr<VisionEncoder> encoder(DeviceRegistry& devices, const std::string& device,
                                       const std::shared_ptr<const VisionModel>& v, const VisionEncoderOptions& opt) {
  Device& dev = **devices.find(device);
  auto e = VisionEncoder::create(v, devices.backend(dev), opt);
  EXPECT_TRUE(e.ok()) << e.error().message;
  return e.ok() ? std::move(*e) : nullptr;
}

// The fixture images: PNG and JPEG, square and not.
inline const char* const kImages[] = {"test-224.png", "test-300x200.png", "photo-160x120.jpg"};

}  // namespace kiln::test
