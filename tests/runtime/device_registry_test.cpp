// DeviceRegistry: the CPU and the named sim devices, each with a backend over one thread pool.
#include "backends/device_registry.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

TEST(DeviceRegistry, HasTheCpuAndTheNamedSimDevices) {
  auto r = DeviceRegistry::create(
      {.n_threads = 1,
       .sim = {{.name = "sim1", .capacity = 3 << 20}, {.name = "sim0", .capacity = 1 << 20}},
       .budgets = {}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto list = (*r)->describe();
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].name, "cpu");
  EXPECT_EQ(list[0].kind, "cpu");
  EXPECT_GT(list[0].memory.total, 0u);
  EXPECT_EQ(list[1].name, "sim1");
  EXPECT_EQ(list[1].kind, "sim");
  EXPECT_EQ(list[1].memory.total, 3u << 20);
  EXPECT_EQ(list[1].memory.free, 3u << 20);
  EXPECT_EQ(list[2].name, "sim0");

  auto sim0 = (*r)->find("sim0");
  ASSERT_TRUE(sim0.ok());
  EXPECT_FALSE((*sim0)->is_host());
  EXPECT_EQ(&(*r)->backend(**sim0).device(), *sim0);
  EXPECT_EQ(*(*r)->find("cpu"), &(*r)->cpu());
  EXPECT_EQ(*(*r)->find("none"), &(*r)->cpu());  // llama.cpp's --device none: no offload
  const auto extra = (*r)->new_backend(**sim0);
  EXPECT_NE(extra.get(), &(*r)->backend(**sim0));
  EXPECT_EQ(&extra->device(), *sim0);

  auto missing = (*r)->find("sim2");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("devices: cpu, sim1, sim0"), std::string::npos)
      << missing.error().message;
  auto unknown = (*r)->find("cuda0");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("no device 'cuda0'"), std::string::npos) << unknown.error().message;
}

TEST(DeviceRegistry, RefusesBadSimDevices) {
  for (const char* name : {"sim", "simx", "sim01", "gpu0", "sim-1"}) {
    auto r = DeviceRegistry::create({.sim = {{.name = name, .capacity = 1 << 20}}, .budgets = {}});
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_NE(r.error().message.find("sim devices are named sim0, sim1"), std::string::npos)
        << r.error().message;
  }
  auto twice = DeviceRegistry::create(
      {.sim = {{.name = "sim0", .capacity = 1 << 20}, {.name = "sim0", .capacity = 1 << 20}}, .budgets = {}});
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.error().message.find("given twice"), std::string::npos);
  auto tiny = DeviceRegistry::create({.sim = {{.name = "sim0", .capacity = 100}}, .budgets = {}});
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.error().message.find("below one block"), std::string::npos) << tiny.error().message;
  EXPECT_TRUE(is_sim_device_name("sim12"));
  EXPECT_FALSE(is_sim_device_name("sim1234567890"));
}

}  // namespace
}  // namespace kiln
