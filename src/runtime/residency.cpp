#include "runtime/residency.h"

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace kiln {

OwnerId new_owner_id() {
  static std::atomic<OwnerId> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

// A device buffer counted by the manager: the device's own buffer, seen through, that tells the
// manager when it goes.
class ManagedBuffer : public Buffer {
 public:
  ManagedBuffer(std::unique_ptr<Buffer> inner, ResidencyManager& manager, uint64_t id, size_t counted)
      : Buffer(inner->device(), inner->base(), inner->size(), inner->kind(), inner->owner(), inner->host_visible(),
               inner->writable()),
        inner_(std::move(inner)),
        manager_(&manager),
        id_(id),
        counted_(counted) {}
  ~ManagedBuffer() override {
    inner_.reset();
    manager_->note_freed(id_, counted_, size());
  }

 private:
  std::unique_ptr<Buffer> inner_;
  ResidencyManager* manager_;
  uint64_t id_;
  size_t counted_;
};

// ---- Resident ----

Resident::~Resident() {
  if (manager_ != nullptr) manager_->remove(id_);
}

void Resident::attach(Device& device, OwnerId owner, std::string owner_name, MemoryKind kind,
                      std::string restore_how, Evictable* hooks) {
  KILN_ASSERT(device_ == nullptr, "Resident::attach: already attached");
  device_ = &device;
  owner_ = owner;
  manager_ = device.residency();
  if (manager_ != nullptr) id_ = manager_->add(owner, std::move(owner_name), kind, std::move(restore_how), hooks);
}

void Resident::rename_owner(std::string owner_name) {
  KILN_ASSERT(device_ != nullptr, "Resident::rename_owner: not attached");
  if (manager_ != nullptr) manager_->rename(id_, std::move(owner_name));
}

Result<std::unique_ptr<Buffer>> Resident::allocate(const BufferDesc& desc) {
  KILN_ASSERT(device_ != nullptr, "Resident::allocate: not attached");
  if (manager_ == nullptr) return device_->allocate(desc);
  return manager_->allocate(id_, desc);
}

Status Resident::set_external_bytes(size_t bytes) {
  if (manager_ == nullptr) return ok_status();
  return manager_->set_external_bytes(id_, bytes);
}

uint64_t Resident::generation() const { return manager_ == nullptr ? 0 : manager_->generation(id_); }

const std::string& Resident::swap_dir() const {
  static const std::string none;
  return manager_ == nullptr ? none : manager_->swap_dir();
}

// ---- ResidencyManager ----

ResidencyManager::ResidencyManager(Device& device, size_t budget, std::string swap_dir)
    : device_(&device), budget_(budget), swap_dir_(std::move(swap_dir)) {
  KILN_ASSERT(device.residency_ == nullptr, "ResidencyManager: device '" + device.name() + "' has one already");
  device.residency_ = this;
}

ResidencyManager::~ResidencyManager() {
  KILN_ASSERT(entries_.empty(), "ResidencyManager: residents of '" + device_->name() + "' outlive their manager");
  device_->residency_ = nullptr;
}

size_t ResidencyManager::used() const {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  return used_;
}

void ResidencyManager::rename(uint64_t id, std::string owner_name) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  Entry* e = find(id);
  KILN_ASSERT(e != nullptr, "ResidencyManager::rename: unknown resident");
  e->owner_name = std::move(owner_name);
}

uint64_t ResidencyManager::add(OwnerId owner, std::string owner_name, MemoryKind kind, std::string restore_how,
                               Evictable* hooks) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  auto e = std::make_unique<Entry>();
  e->id = next_id_++;
  e->owner = owner;
  e->owner_name = std::move(owner_name);
  e->kind = kind;
  e->restore_how = std::move(restore_how);
  e->hooks = hooks;
  e->evictable = kind != MemoryKind::Scratch && !(device_->is_host() && kind == MemoryKind::Kv && swap_dir_.empty());
  e->last_use = ++clock_;
  entries_.push_back(std::move(e));
  return entries_.back()->id;
}

void ResidencyManager::remove(uint64_t id) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const auto& e) { return e->id == id; });
  if (it == entries_.end()) return;
  if ((*it)->resident) used_ -= (*it)->external_bytes;
  entries_.erase(it);  // buffers still alive are uncounted by note_freed when they go
}

ResidencyManager::Entry* ResidencyManager::find(uint64_t id) {
  for (auto& e : entries_) {
    if (e->id == id) return e.get();
  }
  return nullptr;
}

size_t ResidencyManager::counted_size(size_t bytes) const {
  const size_t a = device_->alignment();
  return std::max<size_t>(a, (bytes + a - 1) / a * a);
}

bool ResidencyManager::pinned(OwnerId owner) const {
  return std::any_of(pins_.begin(), pins_.end(), [&](const auto& p) { return p.first == owner; });
}

ResidencyManager::Entry* ResidencyManager::lru_victim(OwnerId requester) {
  Entry* victim = nullptr;
  for (auto& e : entries_) {
    if (e->owner == requester || !e->resident || !e->evictable || pinned(e->owner)) continue;
    if (e->buffer_bytes + e->external_bytes == 0) continue;
    if (victim == nullptr || e->last_use < victim->last_use) victim = e.get();
  }
  return victim;
}

Status ResidencyManager::make_room(OwnerId requester, size_t bytes, const std::string& what, bool device_memory) {
  const size_t need = counted_size(bytes);
  if (budget_ != kNoBudget && need > budget_)
    return make_error(device_->name(), ": ", what, " needs ", format_memory_size(need), ", more than the budget of ",
                      format_memory_size(budget_), " (--max-mem ", device_->name(), "=GiB sets it)");
  for (;;) {
    const bool budget_ok = budget_ == kNoBudget || used_ + need <= budget_;
    const std::optional<size_t> device_room = device_memory ? device_->largest_free_block() : std::nullopt;
    if (budget_ok && (!device_room || *device_room >= need)) return ok_status();
    Entry* victim = lru_victim(requester);
    if (victim == nullptr) return no_room(requester, need, what, device_room);
    KILN_TRY(evict(*victim));
  }
}

Error ResidencyManager::no_room(OwnerId requester, size_t need, const std::string& what,
                                std::optional<size_t> device_room) const {
  const MemoryInfo info = device_->memory_info();
  // On the host the largest block is the free memory itself (MemAvailable): one figure, read once.
  if (device_room && device_->is_host()) device_room = info.free;
  size_t room = budget_ == kNoBudget ? SIZE_MAX : budget_ - std::min(budget_, used_);
  if (device_room) room = std::min(room, *device_room);
  std::string details = budget_ == kNoBudget ? "no budget" : "budget " + format_memory_size(budget_) + ", " +
                                                                 format_memory_size(used_) + " counted";
  details += "; " + format_memory_size(info.free) + " free of " + format_memory_size(info.total);
  if (device_room && *device_room != info.free) details += ", largest free block " + format_memory_size(*device_room);
  const bool others = std::any_of(entries_.begin(), entries_.end(), [&](const auto& e) {
    return e->owner != requester && e->resident && e->buffer_bytes + e->external_bytes > 0;
  });
  return make_error(device_->name(), ": out of memory for ", what, ": ", format_memory_size(need), " needed, ",
                    format_memory_size(room), " available (", details, ")",
                    others ? "; nothing left to evict (the rest is pinned by a request or never evicted)" : "");
}

bool ResidencyManager::fits(size_t bytes) const {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  const size_t need = counted_size(bytes);
  if (budget_ != kNoBudget && used_ + need > budget_) return false;
  const std::optional<size_t> device_room = device_->largest_free_block();
  return !device_room || *device_room >= need;
}

Status ResidencyManager::admit(OwnerId owner, size_t bytes, const std::string& what) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  return make_room(owner, bytes, what, /*device_memory=*/true);
}

Result<std::unique_ptr<Buffer>> ResidencyManager::allocate(uint64_t id, const BufferDesc& desc) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  Entry* e = find(id);
  KILN_ASSERT(e != nullptr, "ResidencyManager::allocate: unknown resident");
  const std::string what = "'" + e->owner_name + "' (" + memory_kind_name(desc.kind) + ")";
  for (;;) {
    KILN_TRY(make_room(e->owner, desc.bytes, what, /*device_memory=*/true));
    auto buf = device_->allocate(desc);
    if (buf.ok()) {
      const size_t counted = counted_size(desc.bytes);
      used_ += counted;
      e->buffer_bytes += counted;
      e->requested_bytes += desc.bytes;
      return std::unique_ptr<Buffer>(new ManagedBuffer(std::move(*buf), *this, id, counted));
    }
    // The device refused although the numbers said it fits (host memory ran out): evict more.
    Entry* victim = lru_victim(e->owner);
    if (victim == nullptr) return buf.error();
    KILN_TRY(evict(*victim));
  }
}

Status ResidencyManager::set_external_bytes(uint64_t id, size_t bytes) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  Entry* e = find(id);
  KILN_ASSERT(e != nullptr, "ResidencyManager::set_external_bytes: unknown resident");
  if (e->resident) {
    used_ -= e->external_bytes;
    e->external_bytes = 0;
    if (bytes > 0)
      KILN_TRY(make_room(e->owner, bytes, "'" + e->owner_name + "' (mapped weights)", /*device_memory=*/false));
    used_ += bytes;
  }
  e->external_bytes = bytes;
  return ok_status();
}

uint64_t ResidencyManager::generation(uint64_t id) const {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  for (const auto& e : entries_) {
    if (e->id == id) return e->generation;
  }
  return 0;
}

void ResidencyManager::note_freed(uint64_t id, size_t counted, size_t requested) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  used_ -= counted;
  if (Entry* e = find(id)) {
    e->buffer_bytes -= counted;
    e->requested_bytes -= requested;
  }
}

Status ResidencyManager::evict(Entry& e) {
  KILN_ASSERT(e.resident && !pinned(e.owner), "ResidencyManager::evict: resident pinned or evicted");
  KILN_TRY(e.hooks->evict());
  KILN_ASSERT(e.buffer_bytes == 0, "ResidencyManager::evict: '" + e.owner_name + "' kept buffers");
  used_ -= e.external_bytes;
  e.resident = false;
  return ok_status();
}

Status ResidencyManager::restore(Entry& e) {
  const std::string what = "'" + e.owner_name + "' (" + memory_kind_name(e.kind) + ")";
  if (e.external_bytes > 0) KILN_TRY(make_room(e.owner, e.external_bytes, what, /*device_memory=*/false));
  used_ += e.external_bytes;
  e.resident = true;  // its buffers are counted as the hooks allocate them
  if (const Status st = e.hooks->restore(); !st.ok()) {
    used_ -= e.external_bytes;
    e.resident = false;
    return make_error("cannot restore ", what, ": ", st.error().message);
  }
  ++e.generation;
  return ok_status();
}

Result<ResidencyManager::Pin> ResidencyManager::pin(OwnerId owner) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  for (MemoryKind kind : {MemoryKind::Weights, MemoryKind::Kv, MemoryKind::Compute, MemoryKind::Scratch}) {
    for (auto& e : entries_) {
      if (e->owner == owner && e->kind == kind && !e->resident) KILN_TRY(restore(*e));
    }
  }
  const uint64_t now = ++clock_;
  for (auto& e : entries_) {
    if (e->owner == owner) e->last_use = now;
  }
  auto it = std::find_if(pins_.begin(), pins_.end(), [&](const auto& p) { return p.first == owner; });
  if (it == pins_.end()) {
    pins_.emplace_back(owner, 1);
  } else {
    ++it->second;
  }
  return Pin(this, owner);
}

void ResidencyManager::unpin(OwnerId owner) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  auto it = std::find_if(pins_.begin(), pins_.end(), [&](const auto& p) { return p.first == owner; });
  KILN_ASSERT(it != pins_.end(), "ResidencyManager::unpin: owner not pinned");
  if (--it->second == 0) pins_.erase(it);
}

ResidencyManager::Pin& ResidencyManager::Pin::operator=(Pin&& o) noexcept {
  if (this != &o) {
    reset();
    manager_ = o.manager_;
    owner_ = o.owner_;
    o.manager_ = nullptr;
  }
  return *this;
}

void ResidencyManager::Pin::reset() {
  if (manager_ != nullptr) manager_->unpin(owner_);
  manager_ = nullptr;
}

Status ResidencyManager::evict_owner(OwnerId owner) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (pinned(owner)) return make_error(device_->name(), ": cannot evict owner ", owner, ": a request pins it");
  for (auto& e : entries_) {
    if (e->owner == owner && e->resident && e->evictable) KILN_TRY(evict(*e));
  }
  return ok_status();
}

bool ResidencyManager::owner_resident(OwnerId owner) const {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  return std::all_of(entries_.begin(), entries_.end(),
                     [&](const auto& e) { return e->owner != owner || e->resident; });
}

DeviceMemoryBreakdown ResidencyManager::breakdown() const {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  DeviceMemoryBreakdown b;
  b.device = device_->name();
  const MemoryInfo info = device_->memory_info();
  b.total = info.total;
  b.free = info.free;
  b.budget = budget_;
  b.counted = used_;
  size_t allocated = 0, in_buffers = 0;
  for (int k = 0; k < kMemoryKindCount; ++k) allocated += device_->allocated_bytes(static_cast<MemoryKind>(k));
  for (const auto& e : entries_) {
    in_buffers += e->requested_bytes;
    auto it = std::find_if(b.owners.begin(), b.owners.end(), [&](const OwnerMemory& o) { return o.owner == e->owner; });
    if (it == b.owners.end()) {
      OwnerMemory o;
      o.owner = e->owner;
      o.name = e->owner_name;
      o.pinned = pinned(e->owner);
      b.owners.push_back(std::move(o));
      it = b.owners.end() - 1;
    }
    if (e->resident) {
      it->bytes[static_cast<int>(e->kind)] += e->buffer_bytes + e->external_bytes;
    } else {
      ++it->evicted_residents;
    }
  }
  b.unaccounted = allocated - std::min(allocated, in_buffers);
  return b;
}

}  // namespace kiln
