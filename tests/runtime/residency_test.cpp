// ResidencyManager over a small sim device with residents that hold one buffer each: room is made
// by evicting the least recently used unpinned resident of another owner, separate holes are not
// room, pinned owners stay, refusals give the numbers, restores are bit-exact and raise the
// generation; budgets resolve as --max-mem gives them.
#include "runtime/residency.h"

#include <gtest/gtest.h>

#include <numeric>

#include "backends/cpu/cpu_device.h"
#include "backends/device_registry.h"
#include "backends/sim/sim_device.h"

namespace kiln {
namespace {

constexpr size_t kKiB = 1024;

// A resident of one buffer filled with a pattern, copied to host memory while evicted.
struct Block : Evictable {
  Block(Device& device, OwnerId owner, size_t bytes, uint8_t seed) : bytes(bytes) {
    resident.attach(device, owner, "owner" + std::to_string(owner), MemoryKind::Kv, "copied back", this);
    std::vector<uint8_t> pattern(bytes);
    std::iota(pattern.begin(), pattern.end(), seed);
    auto b = resident.allocate({bytes, MemoryKind::Kv, "block"});
    ok = b.ok();
    if (!ok) {
      error = b.error().message;
      return;
    }
    buffer = std::move(*b);
    EXPECT_TRUE(buffer->write(0, pattern.data(), bytes).ok());
  }
  Status evict() override {
    shadow.resize(bytes);
    KILN_TRY(buffer->read(0, shadow.data(), bytes));
    buffer.reset();
    return ok_status();
  }
  Status restore() override {
    KILN_ASSIGN_OR_RETURN(buffer, resident.allocate({bytes, MemoryKind::Kv, "block"}));
    return buffer->write(0, shadow.data(), bytes);
  }
  std::vector<uint8_t> contents() const {
    std::vector<uint8_t> out(bytes);
    EXPECT_TRUE(buffer->read(0, out.data(), bytes).ok());
    return out;
  }

  size_t bytes;
  Resident resident;
  std::unique_ptr<Buffer> buffer;
  std::vector<uint8_t> shadow;
  bool ok = false;
  std::string error;
};

std::unique_ptr<SimDevice> make_sim(size_t capacity) {
  auto s = SimDevice::create({.name = "sim0", .capacity = capacity, .alignment = 256});
  EXPECT_TRUE(s.ok());
  return std::move(*s);
}

TEST(ResidencyManager, EvictsTheLeastRecentlyUsedOwnerFirst) {
  auto sim = make_sim(16 * kKiB);
  ResidencyManager m(*sim, 2 * kKiB);
  Block a(*sim, 1, kKiB, 1), b(*sim, 2, kKiB, 2);
  ASSERT_TRUE(a.ok && b.ok);
  ASSERT_TRUE(m.pin(1).ok());  // a used after b (the pin goes at once)
  Block c(*sim, 3, kKiB, 3);
  ASSERT_TRUE(c.ok) << c.error;
  EXPECT_TRUE(m.owner_resident(1));
  EXPECT_FALSE(m.owner_resident(2));
  EXPECT_EQ(m.used(), 2 * kKiB);
  EXPECT_EQ(b.buffer, nullptr);
}

TEST(ResidencyManager, SeparateHolesAreNotRoom) {
  auto sim = make_sim(4 * kKiB);
  ResidencyManager m(*sim, kNoBudget);
  Block a1(*sim, 1, kKiB, 1), b(*sim, 2, kKiB, 2), a2(*sim, 1, kKiB, 3), c(*sim, 3, kKiB, 4);
  ASSERT_TRUE(a1.ok && b.ok && a2.ok && c.ok);
  ASSERT_TRUE(m.evict_owner(1).ok());  // 2 KiB free, in two holes of 1 KiB
  EXPECT_EQ(sim->memory_info().free, 2 * kKiB);
  EXPECT_EQ(sim->largest_free_block(), kKiB);
  Block d(*sim, 4, 2 * kKiB, 5);  // b (older than c) goes: holes at 0..3 KiB merge
  ASSERT_TRUE(d.ok) << d.error;
  EXPECT_FALSE(m.owner_resident(2));
  EXPECT_TRUE(m.owner_resident(3));
}

TEST(ResidencyManager, PinnedOwnersStayAndARefusalGivesTheNumbers) {
  auto sim = make_sim(16 * kKiB);
  ResidencyManager m(*sim, 2 * kKiB);
  Block a(*sim, 1, kKiB, 1);
  ASSERT_TRUE(a.ok);
  auto pin = m.pin(1);
  ASSERT_TRUE(pin.ok());
  Block big(*sim, 2, 3 * kKiB / 2, 2);
  ASSERT_FALSE(big.ok);
  EXPECT_NE(big.error.find("sim0: out of memory for 'owner2' (kv): 1.50 KiB needed, 1.00 KiB available (budget "
                           "2.00 KiB, 1.00 KiB counted; 15.00 KiB free of 16.00 KiB)"),
            std::string::npos)
      << big.error;
  EXPECT_NE(big.error.find("nothing left to evict"), std::string::npos) << big.error;
  EXPECT_TRUE(m.owner_resident(1));
  EXPECT_FALSE(m.evict_owner(1).ok());
  pin->reset();
  Block fits(*sim, 3, 3 * kKiB / 2, 3);
  EXPECT_TRUE(fits.ok) << fits.error;
  EXPECT_FALSE(m.owner_resident(1));

  Block huge(*sim, 4, 3 * kKiB, 4);
  ASSERT_FALSE(huge.ok);
  EXPECT_NE(huge.error.find("'owner4' (kv) needs 3.00 KiB, more than the budget of 2.00 KiB"), std::string::npos)
      << huge.error;
}

// Without a budget the host's available memory is the limit: a request no machine can hold is
// refused by the manager, with the sizes in GiB, before anything is allocated (not left to the
// kernel's overcommit); admission checks several allocations' total at once.
TEST(ResidencyManager, WithoutABudgetTheHostRefusesMoreThanItsAvailableMemory) {
  CpuDevice cpu;
  ResidencyManager m(cpu, kNoBudget);
  ASSERT_TRUE(cpu.largest_free_block().has_value());  // MemAvailable
  constexpr size_t kPiB = size_t{1} << 50;
  const Status admitted = m.admit(1, kPiB, "'owner1' (a context)");
  ASSERT_FALSE(admitted.ok());
  const std::string& msg = admitted.error().message;
  EXPECT_EQ(msg.rfind("cpu: out of memory for 'owner1' (a context): 1048576.00 GiB needed, ", 0), 0u) << msg;
  EXPECT_NE(msg.find(" GiB available (no budget; "), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;

  Resident r;
  r.attach(cpu, 1, "owner1", MemoryKind::Kv, "copied back", nullptr);
  const uint64_t allocations = cpu.allocation_count();
  auto refused = r.allocate({kPiB, MemoryKind::Kv, "kv"});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message.rfind("cpu: out of memory for 'owner1' (kv): 1048576.00 GiB needed, ", 0), 0u)
      << refused.error().message;
  EXPECT_EQ(cpu.allocation_count(), allocations);
  EXPECT_EQ(m.used(), 0u);

  EXPECT_TRUE(m.admit(1, kKiB << 10, "'owner1' (a context)").ok());  // 1 MiB fits on any machine
  auto fits = r.allocate({kKiB << 10, MemoryKind::Kv, "kv"});
  ASSERT_TRUE(fits.ok()) << fits.error().message;
  EXPECT_EQ(m.used(), kKiB << 10);
}

TEST(ResidencyManager, RestoreIsBitExactElsewhereAndRaisesTheGeneration) {
  auto sim = make_sim(16 * kKiB);
  ResidencyManager m(*sim, kNoBudget);
  Block a(*sim, 1, 3 * kKiB, 7);
  ASSERT_TRUE(a.ok);
  const std::vector<uint8_t> before = a.contents();
  const void* at = a.buffer->base();
  EXPECT_EQ(a.resident.generation(), 0u);
  ASSERT_TRUE(m.evict_owner(1).ok());
  EXPECT_EQ(m.used(), 0u);
  auto spacer = sim->allocate({kKiB, MemoryKind::Compute, "spacer"});  // the old place is taken
  ASSERT_TRUE(spacer.ok());
  ASSERT_TRUE(m.pin(1).ok());
  EXPECT_NE(a.buffer->base(), at);
  EXPECT_EQ(a.contents(), before);
  EXPECT_EQ(a.resident.generation(), 1u);
  EXPECT_EQ(m.used(), 3 * kKiB);
  const DeviceMemoryBreakdown bd = m.breakdown();
  ASSERT_EQ(bd.owners.size(), 1u);
  EXPECT_EQ(bd.owners[0].bytes[static_cast<int>(MemoryKind::Kv)], 3 * kKiB);
  EXPECT_EQ(bd.unaccounted, kKiB);  // the spacer is nobody's resident
  EXPECT_NE(format_memory_breakdown({&bd, 1}).find(" - sim0"), std::string::npos);
}

TEST(ResidencyManager, BudgetsResolveAgainstTheDeviceTotal) {
  constexpr size_t kGiB = size_t{1} << 30;
  EXPECT_EQ(*budget_bytes({.device = "sim0", .gib = 2}, 4 * kGiB), 2 * kGiB);
  EXPECT_EQ(*budget_bytes({.device = "sim0", .gib = 0.5}, 4 * kGiB), kGiB / 2);
  EXPECT_EQ(*budget_bytes({.device = "cpu", .gib = -1}, 4 * kGiB), 3 * kGiB);
  auto none = budget_bytes({.device = "cpu", .gib = -5}, 4 * kGiB);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("leaves no memory"), std::string::npos) << none.error().message;
  auto unknown = DeviceRegistry::create({.n_threads = 1, .sim = {}, .budgets = {{.device = "sim3", .gib = 1}}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("--max-mem: device 'sim3' does not exist"), std::string::npos)
      << unknown.error().message;
}

}  // namespace
}  // namespace kiln
