#include "runtime/arbiter.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "runtime/shared_dir.h"

namespace kiln {
namespace {

constexpr std::chrono::milliseconds kPollInterval{2};

// flock, retried when a signal interrupts it; false with errno set otherwise.
bool lock_file(int fd, int op) {
  for (;;) {
    if (flock(fd, op) == 0) return true;
    if (errno != EINTR) return false;
  }
}

// Sleeps `d` in full (a signal does not shorten it: this_thread::sleep_for resumes).
void sleep_for(std::chrono::nanoseconds d) { std::this_thread::sleep_for(d); }

}  // namespace

Result<std::unique_ptr<Arbiter>> Arbiter::open(const std::string& dir, YieldHook yield) {
  KILN_TRY(shared_dir::prepare(dir, "arbiter: --arbiter"));
  std::unique_ptr<Arbiter> a(new Arbiter());
  a->dir_ = dir;
  a->yield_ = std::move(yield);
  for (auto [fd, name] : {std::pair{&a->token_fd_, "token.lock"}, {&a->want_fd_, "want.lock"},
                          {&a->probe_fd_, "want.lock"}}) {
    const std::string path = dir + "/" + name;
    *fd = shared_dir::open_file(path, O_RDWR | O_CREAT);
    if (*fd < 0) return make_error("arbiter: cannot open ", path, ": ", std::strerror(errno));
  }
  a->monitor_ = std::thread([p = a.get()] { p->monitor(); });
  return a;
}

void Arbiter::close() {
  {
    std::lock_guard lock(mu_);
    closing_ = true;
  }
  cv_.notify_all();
}

Arbiter::~Arbiter() {
  close();
  if (monitor_.joinable()) monitor_.join();
  for (int fd : {token_fd_, want_fd_, probe_fd_}) {
    if (fd >= 0) ::close(fd);  // releases the token if held
  }
}

Arbiter::Use& Arbiter::Use::operator=(Use&& o) noexcept {
  if (this != &o) {
    reset();
    arbiter_ = o.arbiter_;
    o.arbiter_ = nullptr;
  }
  return *this;
}

void Arbiter::Use::reset() {
  if (arbiter_ != nullptr) arbiter_->end_use();
  arbiter_ = nullptr;
}

bool Arbiter::held() const {
  std::lock_guard lock(mu_);
  return held_;
}

uint64_t Arbiter::yields() const {
  std::lock_guard lock(mu_);
  return yields_;
}

Result<Arbiter::Use> Arbiter::use(Clock::time_point deadline) {
  const auto started = Clock::now();
  std::unique_lock lock(mu_);
  for (;;) {
    if (closing_) return make_error("arbiter: closing");
    if (held_ && !contended_ && !yielding_) {
      ++uses_;
      return Use(this);
    }
    if (!held_ && !acquiring_ && !yielding_) break;
    // Another thread takes the token, or this process drains its uses to yield it: wait for that.
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && Clock::now() >= deadline) {
      const double waited = std::chrono::duration<double>(Clock::now() - started).count();
      return make_error("arbiter: waited ", waited, " s for the device token in ", dir_);
    }
  }
  acquiring_ = true;
  const auto backoff_until = yielded_ + kYieldBackoff;
  lock.unlock();
  Status got = take_token(deadline, backoff_until);
  lock.lock();
  acquiring_ = false;
  if (got.ok()) {
    held_ = true;
    contended_ = false;
    woke_ = Clock::now();
    ++uses_;
  }
  cv_.notify_all();
  if (!got.ok()) {
    const double waited = std::chrono::duration<double>(Clock::now() - started).count();
    return make_error("arbiter: waited ", waited, " s for the device token in ", dir_, ": ", got.error().message);
  }
  return Use(this);
}

Status Arbiter::take_token(Clock::time_point deadline, Clock::time_point backoff_until) {
  if (!lock_file(want_fd_, LOCK_SH))
    return make_error("cannot lock ", dir_, "/want.lock: ", std::strerror(errno));
  if (Clock::now() < backoff_until) sleep_for(std::min(backoff_until, deadline) - Clock::now());
  Status out;
  for (;;) {
    if (lock_file(token_fd_, LOCK_EX | LOCK_NB)) break;
    if (errno != EWOULDBLOCK) {
      out = make_error("cannot lock ", dir_, "/token.lock: ", std::strerror(errno));
      break;
    }
    bool closing = false;
    {
      std::lock_guard lock(mu_);
      closing = closing_;
    }
    if (closing) {
      out = make_error("closing");
      break;
    }
    if (Clock::now() >= deadline) {
      out = make_error("another process holds it");
      break;
    }
    sleep_for(std::min<Clock::duration>(kPollInterval, deadline - Clock::now()));
  }
  lock_file(want_fd_, LOCK_UN);
  return out;
}

void Arbiter::end_use() {
  {
    std::lock_guard lock(mu_);
    --uses_;
  }
  cv_.notify_all();
}

bool Arbiter::someone_waits() const {
  if (lock_file(probe_fd_, LOCK_EX | LOCK_NB)) {
    lock_file(probe_fd_, LOCK_UN);
    return false;
  }
  return errno == EWOULDBLOCK;
}

void Arbiter::monitor() {
  std::unique_lock lock(mu_);
  while (!closing_) {
    cv_.wait_for(lock, kProbeInterval);
    if (closing_ || !held_ || Clock::now() < woke_ + kGrace) continue;
    lock.unlock();
    const bool waits = someone_waits();  // again at every round: a waiter that died stops counting
    lock.lock();
    if (!held_ || closing_) continue;
    if (contended_ != waits) {
      contended_ = waits;  // while someone waits no new use starts: the ones alive end, then it yields
      cv_.notify_all();
    }
    if (!waits || uses_ > 0) continue;
    yielding_ = true;
    lock.unlock();
    Result<bool> freed = yield_ ? yield_() : Result<bool>(true);
    lock.lock();
    yielding_ = false;
    if (freed.ok() && *freed) {
      lock_file(token_fd_, LOCK_UN);
      held_ = false;
      yielded_ = Clock::now();
      ++yields_;
    }
    contended_ = false;
    cv_.notify_all();
  }
}

}  // namespace kiln
