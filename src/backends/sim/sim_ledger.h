// SimLedger: one capacity for the sim devices of several processes (--sim-shared DIR), as a real
// GPU's memory is shared by every process that uses it.
//
// Files in DIR:
//   ledger.lock     flock'ed (exclusive) while the ledger is read or changed
//   ledger          text, one line per client and device with bytes in use: "CLIENT DEVICE BYTES"
//                   (written to a new file made by mkstemp, then renamed over it: a reader never
//                   sees half a file); lines of another format are dropped when it is read
//   client.CLIENT.lock   one per live client, exclusively flock'ed by it for its whole life
// CLIENT is "PID-NANOSECONDS-RANDOM" (decimal, decimal, hex), unique even when the kernel reuses a
// PID. DIR and the files in it are made and opened as runtime/shared_dir.h says (a folder others
// can write is refused unless sticky; no symbolic link is followed). Whenever the
// ledger is read, the entries of every other client whose lock file can be flock'ed (its holder is
// gone: a killed process's locks are released by the kernel) or no longer exists are dropped, so
// a killed process's bytes come back; its lock file is removed.
//
// Each SimDevice with a shared directory opens its own client (SimDeviceOptions::shared_dir): its
// allocations reserve bytes here beside its own pool's, and an allocation that would take a
// device's bytes over `capacity` (summed over every live client) fails in any process. Every
// process must give a device the same capacity (the ledger checks against the caller's).
//
// Thread-safety: thread-safe (a mutex beside the file lock). Descriptors are close-on-exec; a
// forked child must open a ledger of its own (the parent's lock file descriptor it inherits
// would keep the parent's client alive).
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

#include "core/result.h"

namespace kiln {

class SimLedger {
 public:
  // Creates DIR if missing (one level), registers a new client and takes its lock. An Error
  // naming the path when DIR or its files cannot be made.
  static Result<std::unique_ptr<SimLedger>> open(const std::string& dir);
  // Drops this client's entries and its lock file.
  ~SimLedger();
  SimLedger(const SimLedger&) = delete;
  SimLedger& operator=(const SimLedger&) = delete;

  // Adds `bytes` to this client's use of `device` when every live client's use of it stays within
  // `capacity`; else an Error "N bytes in use by P processes of capacity C in DIR". An Error too
  // when the ledger cannot be read or written.
  Status reserve(const std::string& device, size_t bytes, size_t capacity);
  // Takes `bytes` back (at most what this client reserved on `device`).
  void release(const std::string& device, size_t bytes);
  // Bytes every live client uses on `device` now.
  size_t used(const std::string& device);

  const std::string& dir() const { return dir_; }
  const std::string& client() const { return client_; }

 private:
  struct Entries;
  SimLedger() = default;
  // Runs `change` on the live entries under the file lock and writes them back if it returns true.
  template <typename F>
  Status update(F&& change);

  std::string dir_, client_;
  int client_fd_ = -1;  // our lock file, flock'ed exclusively while we live
  std::mutex mu_;
};

}  // namespace kiln
