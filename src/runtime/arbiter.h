// Arbiter: processes that share a device take turns by a token (kiln serve --arbiter DIR).
//
// Files in DIR (flock'ed, never written):
//   token.lock  the holder holds an exclusive flock on it: only the holder keeps residents on the
//               shared device
//   want.lock   a process waiting for the token holds a shared flock on it for the wait
// A process that needs the device (use()) takes a shared lock on want.lock, then polls token.lock
// with non-blocking exclusive locks (every 2 ms, signals retried) until it holds it or the
// deadline passes. The holder's monitor thread probes want.lock every 20 ms with a non-blocking
// exclusive lock on a descriptor of its own (released at once): when that fails someone waits.
// Once someone waits and the grace period after the holder's own wake (kGrace, 100 ms) has
// passed, the holder admits no new use (they wait for the token's next turn), and when its last
// use ends (an idle point: no request in the middle of a decode) it yields: it calls the yield
// hook (which evicts this process's residents from the device) and releases the token. A process
// that just yielded lets a waiter in first (it waits kYieldBackoff before it polls again).
// The kernel releases a dead process's flocks: a holder that dies frees the token, a waiter that
// dies stops wanting it (it cannot strand the holder).
//
// One Arbiter per process and DIR (two in one process would be two processes to each other).
// Thread-safety: thread-safe; the yield hook runs on the monitor thread while no use is alive and
// none can start.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/result.h"

namespace kiln {

class Arbiter {
 public:
  using Clock = std::chrono::steady_clock;
  // How long a new holder keeps the token after its wake before it yields to a waiter.
  static constexpr std::chrono::milliseconds kGrace{100};
  // How often the holder probes want.lock.
  static constexpr std::chrono::milliseconds kProbeInterval{20};
  // How long a process that just yielded waits before it polls token.lock again.
  static constexpr std::chrono::milliseconds kYieldBackoff{30};

  // Frees this process's residents from the shared device before the token goes; false (or an
  // Error) when it cannot now (the token is kept and the yield tried again at the next probe).
  using YieldHook = std::function<Result<bool>()>;

  // Creates DIR if missing (one level) and opens its lock files. Does not take the token.
  static Result<std::unique_ptr<Arbiter>> open(const std::string& dir, YieldHook yield);
  // Stops the monitor and releases the token if held (without the yield hook: the process is
  // going away). Every Use must be gone first.
  ~Arbiter();
  Arbiter(const Arbiter&) = delete;
  Arbiter& operator=(const Arbiter&) = delete;

  // A use of the device: the token stays with this process while one is alive.
  class Use {
   public:
    Use() = default;
    Use(Use&& o) noexcept : arbiter_(o.arbiter_) { o.arbiter_ = nullptr; }
    Use& operator=(Use&& o) noexcept;
    ~Use() { reset(); }
    void reset();
    bool active() const { return arbiter_ != nullptr; }

   private:
    friend class Arbiter;
    explicit Use(Arbiter* a) : arbiter_(a) {}
    Arbiter* arbiter_ = nullptr;
  };
  // Waits until this process holds the token (taking it if need be) and returns a use that keeps
  // it. An Error when `deadline` passes first ("... waited N s for the device token in DIR") or
  // the arbiter closes.
  Result<Use> use(Clock::time_point deadline);

  // Ends every wait for the token (use() answers an Error) and stops yielding: the process is
  // shutting down. The token, if held, goes with the Arbiter. Idempotent.
  void close();

  // Whether this process holds the token now.
  bool held() const;
  // Times this process yielded the token.
  uint64_t yields() const;
  const std::string& dir() const { return dir_; }

 private:
  Arbiter() = default;
  // Takes token.lock (want.lock shared meanwhile), polling no earlier than `backoff_until`; an
  // Error at the deadline.
  Status take_token(Clock::time_point deadline, Clock::time_point backoff_until);
  void end_use();
  void monitor();
  // Someone holds want.lock: a non-blocking exclusive probe on probe_fd_ fails.
  bool someone_waits() const;

  std::string dir_;
  YieldHook yield_;
  int token_fd_ = -1, want_fd_ = -1, probe_fd_ = -1;

  mutable std::mutex mu_;
  std::condition_variable cv_;  // any of the fields below changed
  bool held_ = false;
  bool acquiring_ = false;   // a thread is in take_token
  bool contended_ = false;   // held, past the grace period, and someone waits: admit no new use
  bool yielding_ = false;    // the monitor runs the yield hook
  bool closing_ = false;
  int64_t uses_ = 0;
  Clock::time_point woke_{};     // when this process last took the token
  Clock::time_point yielded_{};  // when it last yielded it
  uint64_t yields_ = 0;
  std::thread monitor_;
};

}  // namespace kiln
