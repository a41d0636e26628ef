#include "backends/sim/sim_ledger.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <vector>

#include "runtime/shared_dir.h"

namespace kiln {
namespace {

struct Entry {
  std::string client, device;
  size_t bytes = 0;
};

// flock that retries when a signal interrupts it; false with errno set otherwise.
bool lock_file(int fd, int op) {
  for (;;) {
    if (flock(fd, op) == 0) return true;
    if (errno != EINTR) return false;
  }
}

std::string client_lock_path(const std::string& dir, const std::string& client) {
  return dir + "/client." + client + ".lock";
}

// Whether `s` is a run of 1 to `max` characters that `ok` accepts.
template <typename Pred>
bool run_of(std::string_view s, size_t max, Pred ok) {
  if (s.empty() || s.size() > max) return false;
  for (char c : s) {
    if (!ok(c)) return false;
  }
  return true;
}

bool is_dec(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_dec(c) || (c >= 'a' && c <= 'f'); }

// A client name as new_client_name() writes it: PID-NANOSECONDS-HEX. Names read from the ledger
// become file names; anything else ("/../x") is not a client.
bool valid_client_name(std::string_view name) {
  const size_t a = name.find('-'), b = a == std::string_view::npos ? a : name.find('-', a + 1);
  if (b == std::string_view::npos) return false;
  return run_of(name.substr(0, a), 10, is_dec) && run_of(name.substr(a + 1, b - a - 1), 20, is_dec) &&
         run_of(name.substr(b + 1), 16, is_hex);
}

// A device name as sim devices have them (sim0, sim1...).
bool valid_device_name(std::string_view name) {
  return run_of(name, 32, [](char c) { return is_dec(c) || (c >= 'a' && c <= 'z'); });
}

// Whether `client` still lives: its lock file exists and someone holds its lock. A dead client's
// lock file is removed (we hold its lock while we unlink it, so a racing checker finds it gone).
bool client_alive(const std::string& dir, const std::string& client) {
  const std::string path = client_lock_path(dir, client);
  const int fd = shared_dir::open_file(path, O_RDONLY);
  if (fd < 0) return false;
  const bool taken = lock_file(fd, LOCK_EX | LOCK_NB);
  if (taken) ::unlink(path.c_str());
  ::close(fd);
  return !taken;
}

// The ledger's lines that have the format kiln writes (a client name, a device name, bytes > 0);
// other lines are dropped (and go at the next write). A ledger that is missing, not a regular file
// or larger than kMaxLedgerBytes reads as empty.
constexpr off_t kMaxLedgerBytes = 1 << 20;

std::vector<Entry> read_entries(const std::string& path) {
  std::vector<Entry> out;
  const int fd = shared_dir::open_file(path, O_RDONLY);
  if (fd < 0) return out;
  struct stat st {};
  std::string text;
  if (::fstat(fd, &st) == 0 && st.st_size <= kMaxLedgerBytes) {
    text.resize(static_cast<size_t>(st.st_size));
    const ssize_t n = ::pread(fd, text.data(), text.size(), 0);
    text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  ::close(fd);
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    Entry e;
    std::string rest;
    if (fields >> e.client >> e.device >> e.bytes && !(fields >> rest) && e.bytes > 0 &&
        valid_client_name(e.client) && valid_device_name(e.device))
      out.push_back(std::move(e));
  }
  return out;
}

// Writes the ledger to a new file (mkstemp: made, never followed) and renames it over DIR/ledger,
// so that a reader never sees half a file.
Status write_entries(const std::string& dir, const std::vector<Entry>& entries) {
  std::string tmp = dir + "/ledger.XXXXXX";
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return make_error("sim: cannot create ", tmp, ": ", std::strerror(errno));
  std::string text;
  for (const Entry& e : entries) text += e.client + ' ' + e.device + ' ' + std::to_string(e.bytes) + '\n';
  const bool written = ::fchmod(fd, 0644) == 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int why = errno;
  ::close(fd);
  if (!written || ::rename(tmp.c_str(), (dir + "/ledger").c_str()) != 0) {
    const std::string reason = std::strerror(written ? errno : why);
    ::unlink(tmp.c_str());
    return make_error("sim: cannot write ", dir, "/ledger: ", reason);
  }
  return {};
}

std::string new_client_name() {
  std::random_device rd;
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  std::ostringstream s;
  s << ::getpid() << '-' << ns << '-' << std::hex << rd();
  return s.str();
}

}  // namespace

struct SimLedger::Entries {
  std::vector<Entry> list;
};

Result<std::unique_ptr<SimLedger>> SimLedger::open(const std::string& dir) {
  KILN_TRY(shared_dir::prepare(dir, "sim: --sim-shared"));
  std::unique_ptr<SimLedger> l(new SimLedger());
  l->dir_ = dir;
  l->client_ = new_client_name();
  // Locked under a temporary name, then renamed: no checker ever sees the file unlocked.
  const std::string path = client_lock_path(dir, l->client_);
  const std::string fresh = path + ".new";
  l->client_fd_ = shared_dir::open_file(fresh, O_RDWR | O_CREAT | O_EXCL);
  if (l->client_fd_ < 0) return make_error("sim: cannot create ", fresh, ": ", std::strerror(errno));
  if (!lock_file(l->client_fd_, LOCK_EX | LOCK_NB) || ::rename(fresh.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(fresh.c_str());
    return make_error("sim: cannot lock ", path, ": ", why);
  }
  return l;
}

SimLedger::~SimLedger() {
  (void)update([&](Entries& es) {
    std::erase_if(es.list, [&](const Entry& e) { return e.client == client_; });
    return true;
  });
  ::unlink(client_lock_path(dir_, client_).c_str());
  ::close(client_fd_);
}

template <typename F>
Status SimLedger::update(F&& change) {
  std::lock_guard lock(mu_);
  const std::string lock_path = dir_ + "/ledger.lock";
  const int fd = shared_dir::open_file(lock_path, O_RDWR | O_CREAT);
  if (fd < 0) return make_error("sim: cannot open ", lock_path, ": ", std::strerror(errno));
  if (!lock_file(fd, LOCK_EX)) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return make_error("sim: cannot lock ", lock_path, ": ", why);
  }
  Entries es{read_entries(dir_ + "/ledger")};
  // Dead clients' entries go (each client checked once).
  std::map<std::string, bool> alive{{client_, true}};
  const size_t before = es.list.size();
  std::erase_if(es.list, [&](const Entry& e) {
    auto [it, fresh] = alive.try_emplace(e.client, false);
    if (fresh) it->second = client_alive(dir_, e.client);
    return !it->second;
  });
  Status out;
  if (change(es) || es.list.size() != before) out = write_entries(dir_, es.list);
  ::close(fd);  // releases the lock
  return out;
}

Status SimLedger::reserve(const std::string& device, size_t bytes, size_t capacity) {
  Status refused;
  Status written = update([&](Entries& es) {
    size_t used = 0;
    std::set<std::string> clients;
    Entry* mine = nullptr;
    for (Entry& e : es.list) {
      if (e.device != device) continue;
      used += e.bytes;
      clients.insert(e.client);
      if (e.client == client_) mine = &e;
    }
    if (bytes > capacity || used > capacity - bytes) {
      refused = make_error(used, " bytes in use by ", clients.size(), " process", clients.size() == 1 ? "" : "es",
                           " sharing capacity ", capacity, " in ", dir_);
      return false;
    }
    if (mine == nullptr) es.list.push_back({client_, device, 0});
    (mine ? *mine : es.list.back()).bytes += bytes;
    return true;
  });
  if (!written.ok()) return written;
  return refused;
}

void SimLedger::release(const std::string& device, size_t bytes) {
  (void)update([&](Entries& es) {
    for (Entry& e : es.list) {
      if (e.client != client_ || e.device != device) continue;
      e.bytes -= std::min(e.bytes, bytes);
    }
    std::erase_if(es.list, [](const Entry& e) { return e.bytes == 0; });
    return true;
  });
}

size_t SimLedger::used(const std::string& device) {
  size_t used = 0;
  (void)update([&](Entries& es) {
    for (const Entry& e : es.list) used += e.device == device ? e.bytes : 0;
    return false;
  });
  return used;
}

}  // namespace kiln
