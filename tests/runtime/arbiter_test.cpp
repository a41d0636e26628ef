// Arbiter: processes take turns on a device by a token (flock on DIR/token.lock; waiters hold
// DIR/want.lock shared). Two Arbiters in one process are two processes to each other (flock locks
// belong to open file descriptions); deaths are tested with forked children.
#include "runtime/arbiter.h"
#include "temp_dir.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <thread>

namespace kiln {
namespace {

namespace fs = std::filesystem;
using Clock = Arbiter::Clock;
using std::chrono::milliseconds;

using test::TempDir;

std::unique_ptr<Arbiter> open_arbiter(const std::string& dir, Arbiter::YieldHook hook = nullptr) {
  auto a = Arbiter::open(dir, std::move(hook));
  KILN_ASSERT(a.ok(), a.ok() ? "" : a.error().message);
  return std::move(*a);
}

Clock::time_point in(milliseconds d) { return Clock::now() + d; }

// Whether someone holds DIR/token.lock (a probe of our own, as the acceptance test does).
bool token_taken(const std::string& dir) {
  const int fd = ::open((dir + "/token.lock").c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  const bool free = flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);
  return !free;
}

// A forked child that takes the token (waiting up to 5 s), writes one byte to the returned pipe
// when it holds it, and keeps it until killed.
pid_t child_holding_token(const std::string& dir, int* ready_fd) {
  int p[2];
  KILN_ASSERT(pipe(p) == 0, "pipe");
  const pid_t child = fork();
  KILN_ASSERT(child >= 0, "fork");
  if (child == 0) {
    close(p[0]);
    auto a = Arbiter::open(dir, [] { return Result<bool>(false); });  // never yields
    if (!a.ok()) _exit(2);
    auto use = (*a)->use(in(milliseconds(5000)));
    const char ok = use.ok() ? '1' : '0';
    if (write(p[1], &ok, 1) != 1) _exit(3);
    for (;;) pause();
  }
  close(p[1]);
  *ready_fd = p[0];
  return child;
}

void kill_and_reap(pid_t child) {
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
}

TEST(Arbiter, TheHolderYieldsToAWaiterOnceItsUsesEnd) {
  TempDir dir("kiln-arbiter-");
  std::atomic<int> a_yields{0};
  auto a = open_arbiter(dir.path(), [&] {
    ++a_yields;
    return Result<bool>(true);
  });
  auto b = open_arbiter(dir.path());
  auto ua = a->use(in(milliseconds(1000)));
  ASSERT_TRUE(ua.ok());
  EXPECT_TRUE(a->held());
  EXPECT_TRUE(token_taken(dir.path()));
  // While a's use lives, b waits in vain: mid-request there is no yield.
  auto late = b->use(in(milliseconds(300)));
  ASSERT_FALSE(late.ok());
  EXPECT_NE(late.error().message.find("s for the device token in " + dir.path()), std::string::npos)
      << late.error().message;
  EXPECT_EQ(a_yields, 0);
  // Someone waits: a admits no new use while b waits.
  std::atomic<bool> b_got{false};
  std::thread waiter([&] {
    auto ub = b->use(in(milliseconds(3000)));
    b_got = ub.ok();
    std::this_thread::sleep_for(milliseconds(50));
  });
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_FALSE(a->use(in(milliseconds(50))).ok());
  const auto released = Clock::now();
  ua->reset();  // the idle point
  waiter.join();
  EXPECT_TRUE(b_got);
  EXPECT_LT(Clock::now() - released, milliseconds(1000));
  EXPECT_EQ(a_yields, 1);
  EXPECT_EQ(a->yields(), 1u);
  EXPECT_FALSE(a->held());
  EXPECT_TRUE(b->held());
  // a wants it back: b (idle, past its grace) yields.
  auto again = a->use(in(milliseconds(2000)));
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_FALSE(b->held());
}

TEST(Arbiter, AHolderThatCannotFreeItsResidentsKeepsTheToken) {
  TempDir dir("kiln-arbiter-");
  std::atomic<int> calls{0};
  auto a = open_arbiter(dir.path(), [&]() -> Result<bool> {
    if (++calls < 3) return false;  // not at an idle point yet
    return true;
  });
  auto b = open_arbiter(dir.path());
  ASSERT_TRUE(a->use(in(milliseconds(1000))).ok());  // taken, then idle at once
  auto ub = b->use(in(milliseconds(3000)));
  ASSERT_TRUE(ub.ok()) << ub.error().message;
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(a->yields(), 1u);
}

TEST(Arbiter, ADeadHolderFreesTheToken) {
  TempDir dir("kiln-arbiter-");
  int ready = -1;
  const pid_t child = child_holding_token(dir.path(), &ready);
  char ok = 0;
  ASSERT_EQ(read(ready, &ok, 1), 1);
  close(ready);
  ASSERT_EQ(ok, '1');
  auto b = open_arbiter(dir.path());
  EXPECT_FALSE(b->use(in(milliseconds(200))).ok());  // the child never yields
  std::thread killer([&] { kill_and_reap(child); });
  const auto t0 = Clock::now();
  auto ub = b->use(in(milliseconds(3000)));
  killer.join();
  ASSERT_TRUE(ub.ok()) << ub.error().message;
  EXPECT_LT(Clock::now() - t0, milliseconds(1000));
}

TEST(Arbiter, ADeadWaiterDoesNotStrandTheHolder) {
  TempDir dir("kiln-arbiter-");
  auto a = open_arbiter(dir.path(), [] { return Result<bool>(true); });
  auto ua = a->use(in(milliseconds(1000)));
  ASSERT_TRUE(ua.ok());
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto b = Arbiter::open(dir.path(), nullptr);
    if (b.ok()) (void)(*b)->use(in(milliseconds(60'000)));  // waits until killed
    _exit(0);
  }
  // The child waits: a's new uses wait for the token's turn.
  const auto t0 = Clock::now();
  bool contended = false;
  while (!contended && Clock::now() - t0 < milliseconds(3000)) contended = !a->use(in(milliseconds(50))).ok();
  EXPECT_TRUE(contended);
  kill_and_reap(child);
  // Its shared lock on want.lock died with it: a admits uses again, without yielding.
  auto more = a->use(in(milliseconds(1000)));
  ASSERT_TRUE(more.ok()) << more.error().message;
  EXPECT_TRUE(a->held());
  EXPECT_EQ(a->yields(), 0u);
}

void ignore_signal(int) {}

TEST(Arbiter, ASignalDuringTheWaitIsRetried) {
  TempDir dir("kiln-arbiter-");
  struct sigaction sa = {};
  sa.sa_handler = ignore_signal;  // no SA_RESTART: blocking calls return EINTR
  struct sigaction old = {};
  ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
  auto a = open_arbiter(dir.path(), [] { return Result<bool>(true); });
  auto b = open_arbiter(dir.path());
  auto ua = a->use(in(milliseconds(1000)));
  ASSERT_TRUE(ua.ok());
  std::atomic<bool> done{false}, got{false};
  std::thread waiter([&] {
    got = b->use(in(milliseconds(5000))).ok();
    done = true;
  });
  const pthread_t handle = waiter.native_handle();
  for (int i = 0; i < 50 && !done; ++i) {
    pthread_kill(handle, SIGUSR1);
    std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_FALSE(done);  // signals did not end the wait
  ua->reset();
  waiter.join();
  EXPECT_TRUE(got);
  sigaction(SIGUSR1, &old, nullptr);
}

}  // namespace
}  // namespace kiln
