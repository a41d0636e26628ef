// What the Vulkan tests share: the vulkan0 device of a registry (a test fails, naming why, when the
// build has the backend and the machine no Vulkan device: CI installs lavapipe, scripts/deps.sh),
// and the normalized mean squared error of llama.cpp's test-backend-ops.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backends/device_registry.h"

namespace kiln::test {

inline std::unique_ptr<DeviceRegistry> vulkan_registry() {
  DeviceRegistryOptions o;
  o.n_threads = 2;
  o.vulkan = true;
  auto r = DeviceRegistry::create(o);
  EXPECT_TRUE(r.ok()) << r.error().message;
  if (!r.ok()) return nullptr;
  auto dev = (*r)->find("vulkan0");
  EXPECT_TRUE(dev.ok()) << dev.error().message;
  return dev.ok() ? std::move(*r) : nullptr;
}

// sum((a - b)^2) / sum(a^2) over the values; infinity when either has a NaN or the sizes differ.
// ref: test-backend-ops' nmse.
inline double nmse(const std::vector<float>& want, const std::vector<float>& got) {
  if (want.size() != got.size()) return INFINITY;
  double err = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i]) != std::isnan(got[i])) return INFINITY;
    if (std::isnan(want[i])) continue;
    const double d = static_cast<double>(want[i]) - got[i];
    err += d * d;
    norm += static_cast<double>(want[i]) * want[i];
  }
  return norm == 0 ? err : err / norm;
}

}  // namespace kiln::test
