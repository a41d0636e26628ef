#include "backends/sim/sim_ledger.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <vector>

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

// Whether `client` still lives: its lock file exists and someone holds its lock. A dead client's
// lock file is removed (we hold its lock while we unlink it, so a racing checker finds it gone).
bool client_alive(const std::string& dir, const std::string& client) {
  const std::string path = client_lock_path(dir, client);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool taken = lock_file(fd, LOCK_EX | LOCK_NB);
  if (taken) ::unlink(path.c_str());
  ::close(fd);
  return !taken;
}

std::vector<Entry> read_entries(const std::string& path) {
  std::vector<Entry> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    Entry e;
    if (fields >> e.client >> e.device >> e.bytes && e.bytes > 0) out.push_back(std::move(e));
  }
  return out;
}

Status write_entries(const std::string& dir, const std::vector<Entry>& entries) {
  const std::string tmp = dir + "/ledger.tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (const Entry& e : entries) out << e.client << ' ' << e.device << ' ' << e.bytes << '\n';
    out.flush();
    if (!out) return make_error("sim: cannot write ", tmp);
  }
  if (::rename(tmp.c_str(), (dir + "/ledger").c_str()) != 0)
    return make_error("sim: cannot replace ", dir, "/ledger: ", std::strerror(errno));
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
  if (dir.empty()) return make_error("sim: --sim-shared needs a directory");
  if (::mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST)
    return make_error("sim: cannot make the shared directory ", dir, ": ", std::strerror(errno));
  std::unique_ptr<SimLedger> l(new SimLedger());
  l->dir_ = dir;
  l->client_ = new_client_name();
  // Locked under a temporary name, then renamed: no checker ever sees the file unlocked.
  const std::string path = client_lock_path(dir, l->client_);
  const std::string fresh = path + ".new";
  l->client_fd_ = ::open(fresh.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
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
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
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
