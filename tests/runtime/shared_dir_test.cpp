// Shared folders (--sim-shared, --arbiter) against someone else who can write into them (issue
// 30): planted symbolic links redirect no file kiln writes, names read from the ledger name no file
// outside the folder, and a folder that others can write without the sticky bit is refused.
#include "runtime/shared_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "backends/sim/sim_ledger.h"
#include "runtime/arbiter.h"
#include "temp_dir.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// DIR/ledger.tmp linked to a file outside made kiln truncate it; now the ledger goes through a
// mkstemp file, and a linked ledger.lock or ledger is refused or ignored, never written through.
TEST(SharedDir, PlantedSymlinksRedirectNothing) {
  TempDir root("kiln-shared-");
  const std::string dir = root.path() + "/shared", victim = root.path() + "/victim";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  std::ofstream(victim) << "precious\n";
  fs::create_symlink(victim, dir + "/ledger.tmp");
  auto ledger = SimLedger::open(dir);
  ASSERT_TRUE(ledger.ok()) << ledger.error().message;
  ASSERT_TRUE((*ledger)->reserve("sim0", 100, 1000).ok());
  EXPECT_EQ((*ledger)->used("sim0"), 100u);
  EXPECT_EQ(read_text(victim), "precious\n");

  fs::remove(dir + "/ledger.lock");
  fs::create_symlink(victim, dir + "/ledger.lock");
  auto refused = (*ledger)->reserve("sim0", 100, 1000);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("ledger.lock"), std::string::npos) << refused.error().message;
  EXPECT_EQ(read_text(victim), "precious\n");
  fs::remove(dir + "/ledger.lock");
  fs::remove(dir + "/ledger");
  fs::create_symlink(victim, dir + "/ledger");  // read as empty, replaced by a file of our own
  ASSERT_TRUE((*ledger)->reserve("sim0", 1, 1000).ok());
  EXPECT_FALSE(fs::is_symlink(dir + "/ledger"));
  EXPECT_EQ(read_text(victim), "precious\n");
}

// A ledger line "/../../x/important sim0 5" made kiln unlink x/important.lock outside the folder:
// names that are not of kiln's format are dropped.
TEST(SharedDir, LedgerNamesOfAnotherFormatAreDropped) {
  TempDir root("kiln-shared-");
  const std::string dir = root.path() + "/a/shared";
  fs::create_directories(dir);
  ::chmod(dir.c_str(), 0700);
  fs::create_directories(dir + "/client.");  // so that "client./../../x" resolves
  fs::create_directories(root.path() + "/a/x");
  const std::string victim = root.path() + "/a/x/important.lock";
  std::ofstream(victim) << "keep\n";
  std::ofstream(dir + "/ledger") << "/../../x/important sim0 5\n12-34-ab ../sim0 7\n12-34-ab sim0 9 extra\n";
  auto ledger = SimLedger::open(dir);
  ASSERT_TRUE(ledger.ok()) << ledger.error().message;
  EXPECT_EQ((*ledger)->used("sim0"), 0u);
  ASSERT_TRUE((*ledger)->reserve("sim0", 3, 1000).ok());
  EXPECT_TRUE(fs::exists(victim));
  EXPECT_EQ(read_text(dir + "/ledger"), (*ledger)->client() + " sim0 3\n");
}

// A folder kiln makes is the user's own (0700); an existing one that group or others can write
// is refused unless sticky, as is a symbolic link to a folder; the arbiter follows the same rules.
TEST(SharedDir, FoldersOthersCanWriteAreRefusedUnlessSticky) {
  TempDir root("kiln-shared-");
  const std::string made = root.path() + "/made";
  ASSERT_TRUE(shared_dir::prepare(made, "test").ok());
  struct stat st {};
  ASSERT_EQ(::stat(made.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);

  const std::string open_dir = root.path() + "/open";
  ASSERT_EQ(::mkdir(open_dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(open_dir.c_str(), 0777), 0);
  auto refused = SimLedger::open(open_dir);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("mode 0777"), std::string::npos) << refused.error().message;
  EXPECT_NE(refused.error().message.find("sticky"), std::string::npos) << refused.error().message;
  auto arbiter = Arbiter::open(open_dir, [] { return Result<bool>(false); });
  ASSERT_FALSE(arbiter.ok());
  EXPECT_NE(arbiter.error().message.find("--arbiter"), std::string::npos) << arbiter.error().message;
  ASSERT_EQ(::chmod(open_dir.c_str(), 01777), 0);
  EXPECT_TRUE(SimLedger::open(open_dir).ok());

  const std::string link = root.path() + "/link";
  fs::create_directory_symlink(made, link);
  auto linked = shared_dir::prepare(link, "test");
  ASSERT_FALSE(linked.ok());
  EXPECT_NE(linked.error().message.find("symbolic link"), std::string::npos) << linked.error().message;
}

}  // namespace
}  // namespace kiln
