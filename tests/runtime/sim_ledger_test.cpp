// SimLedger and shared sim devices (--sim-shared): one capacity for the sim devices of several
// processes; a killed process's bytes come back.
#include "backends/sim/sim_ledger.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "backends/sim/sim_device.h"
#include "temp_dir.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

constexpr size_t kKiB = 1024;

using test::TempDir;

std::unique_ptr<SimDevice> shared_sim(const std::string& dir, size_t capacity = 1024 * kKiB) {
  auto d = SimDevice::create({.name = "sim0", .capacity = capacity, .shared_dir = dir});
  KILN_ASSERT(d.ok(), d.ok() ? "" : d.error().message);
  return std::move(*d);
}

size_t client_lock_files(const std::string& dir) {
  size_t n = 0;
  for (const auto& f : fs::directory_iterator(dir)) n += f.path().filename().string().starts_with("client.");
  return n;
}

TEST(SimLedger, ClientsShareOneCapacityPerDevice) {
  TempDir dir("kiln-ledger-");
  auto a = SimLedger::open(dir.path());
  auto b = SimLedger::open(dir.path());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->client(), (*b)->client());
  ASSERT_TRUE((*a)->reserve("sim0", 600, 1000).ok());
  auto over = (*b)->reserve("sim0", 500, 1000);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.error().message.find("600 bytes in use by 1 process sharing capacity 1000"), std::string::npos)
      << over.error().message;
  EXPECT_TRUE((*b)->reserve("sim1", 500, 1000).ok());  // another device: its own capacity
  EXPECT_TRUE((*b)->reserve("sim0", 400, 1000).ok());
  EXPECT_EQ((*a)->used("sim0"), 1000u);
  (*a)->release("sim0", 600);
  EXPECT_EQ((*b)->used("sim0"), 400u);
  EXPECT_TRUE((*b)->reserve("sim0", 600, 1000).ok());
  b->reset();  // a client that closes takes its bytes with it
  EXPECT_EQ((*a)->used("sim0"), 0u);
  EXPECT_EQ((*a)->used("sim1"), 0u);
  EXPECT_EQ(client_lock_files(dir.path()), 1u);
}

TEST(SimLedger, AnEntryWithoutALiveLockIsDroppedWhateverItsPid) {
  TempDir dir("kiln-ledger-");
  // A client named after a PID that lives (ours, and init's) but holds no lock: its bytes are not
  // in use, as after a crash followed by PID reuse.
  std::ofstream(dir.path() + "/ledger") << getpid() << "-1-1 sim0 700\n1-2-2 sim0 200\n";
  std::ofstream(dir.path() + "/client.1-2-2.lock") << "";  // left by a dead client
  auto a = SimLedger::open(dir.path());
  ASSERT_TRUE(a.ok());
  EXPECT_EQ((*a)->used("sim0"), 0u);
  EXPECT_TRUE((*a)->reserve("sim0", 1000, 1000).ok());
  EXPECT_EQ(client_lock_files(dir.path()), 1u);  // the dead client's lock file is gone
}

TEST(SharedSimDevice, AnAllocationPastTheSharedCapacityFailsInAnyProcess) {
  TempDir dir("kiln-ledger-");
  auto a = shared_sim(dir.path());
  auto b = shared_sim(dir.path());
  auto big = a->allocate({.bytes = 768 * kKiB, .kind = MemoryKind::Weights, .owner = "a"});
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(b->memory_info().free, 256 * kKiB);
  EXPECT_EQ(b->largest_free_block(), 256 * kKiB);
  auto refused = b->allocate({.bytes = 512 * kKiB, .kind = MemoryKind::Kv, .owner = "b"});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("sim0: out of memory: cannot allocate 524288 bytes for 'b' (kv)"),
            std::string::npos)
      << refused.error().message;
  EXPECT_NE(refused.error().message.find("786432 bytes in use by 1 process"), std::string::npos)
      << refused.error().message;
  EXPECT_EQ(b->memory_info().free, 256 * kKiB);  // the refusal left nothing reserved
  big->reset();
  EXPECT_EQ(b->memory_info().free, 1024 * kKiB);
  auto fits = b->allocate({.bytes = 512 * kKiB, .kind = MemoryKind::Kv, .owner = "b"});
  EXPECT_TRUE(fits.ok());
  EXPECT_EQ(a->memory_info().free, 512 * kKiB);
}

TEST(SharedSimDevice, AKilledProcessesBytesComeBack) {
  TempDir dir("kiln-ledger-");
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(ready[0]);
    auto d = SimDevice::create({.name = "sim0", .capacity = 1024 * kKiB, .shared_dir = dir.path()});
    if (!d.ok()) _exit(2);
    auto held = (*d)->allocate({.bytes = 900 * kKiB, .kind = MemoryKind::Weights, .owner = "child"});
    const char ok = held.ok() ? '1' : '0';
    if (write(ready[1], &ok, 1) != 1) _exit(3);
    for (;;) pause();  // until SIGKILL: no destructor gives the bytes back
  }
  close(ready[1]);
  char ok = 0;
  ASSERT_EQ(read(ready[0], &ok, 1), 1);
  close(ready[0]);
  ASSERT_EQ(ok, '1');
  auto mine = shared_sim(dir.path());
  EXPECT_EQ(mine->memory_info().free, 1024 * kKiB - 900 * kKiB);
  EXPECT_FALSE(mine->allocate({.bytes = 512 * kKiB, .kind = MemoryKind::Kv, .owner = "parent"}).ok());
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  auto after = mine->allocate({.bytes = 1024 * kKiB, .kind = MemoryKind::Kv, .owner = "parent"});
  EXPECT_TRUE(after.ok()) << after.error().message;
  EXPECT_EQ(client_lock_files(dir.path()), 1u);  // ours; the child's is removed
}

}  // namespace
}  // namespace kiln
