#include "llm/kv_cache.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>

namespace kiln {

// The layers of one device: their buffers are one resident of the owner there.
class KvCache::DeviceStore final : private Evictable {
 public:
  DeviceStore(KvCache& cache, Device& device, OwnerId owner, const std::string& owner_name)
      : cache_(cache), device_(device), owner_name_(owner_name) {
    const bool swapped = device.residency() != nullptr && !device.residency()->swap_dir().empty();
    resident_.attach(device, owner, owner_name, MemoryKind::Kv,
                     swapped ? "read back from the --swap-dir file" : "copied back from host memory", this);
  }
  Device& device() const { return device_; }
  uint64_t generation() const { return resident_.generation(); }
  // Adds a layer held here: allocates its K and V buffers, zeroed.
  Result<LayerMemory*> add_layer() {
    auto m = std::make_unique<LayerMemory>();
    KILN_TRY(allocate(*m));
    // Zeroed cells: attention reads masked cells too (n_kv_padded()), and their contents must be
    // finite (a masked key's score must not be NaN).
    std::vector<uint8_t> zeros;
    for (const TensorView* v : {&m->k, &m->v}) {
      zeros.assign(v->span_bytes(), 0);
      KILN_TRY(device_.upload(*v, zeros.data(), zeros.size()));
    }
    layers_.push_back(std::move(m));
    return layers_.back().get();
  }

 private:
  Status allocate(LayerMemory& m) {
    const size_t cells = cache_.cells_.size();
    BufferDesc desc;
    desc.kind = MemoryKind::Kv;
    desc.owner = owner_name_;
    desc.bytes = layer_bytes(cache_.type_k_, cache_.n_embd_k_, cells);
    KILN_ASSIGN_OR_RETURN(m.k_buf, resident_.allocate(desc));
    desc.bytes = layer_bytes(cache_.type_v_, cache_.n_embd_v_, cells);
    KILN_ASSIGN_OR_RETURN(m.v_buf, resident_.allocate(desc));
    const auto n = static_cast<int64_t>(cells);
    KILN_ASSIGN_OR_RETURN(m.k, m.k_buf->view(cache_.type_k_, {cache_.n_embd_k_, n, 1, 1}));
    KILN_ASSIGN_OR_RETURN(m.v, m.v_buf->view(cache_.type_v_, {cache_.n_embd_v_, n, 1, 1}));
    return ok_status();
  }
  size_t bytes() const {
    size_t total = 0;
    for (const auto& m : layers_) total += m->k_buf->size() + m->v_buf->size();
    return total;
  }

  Status evict() override {
    const std::string& dir = resident_.swap_dir();
    std::unique_ptr<SwapFile> swap;
    std::vector<std::vector<uint8_t>> copy;
    if (!dir.empty()) {
      auto file = SwapFile::create(dir);
      if (!file.ok()) return make_error("--swap-dir ", dir, ": ", file.error().message);
      swap = std::move(*file);
    }
    std::vector<uint8_t> staging;  // one buffer at a time, on its way to the swap file
    for (const auto& m : layers_) {
      for (const Buffer* b : {m->k_buf.get(), m->v_buf.get()}) {
        std::vector<uint8_t>& out = swap ? staging : copy.emplace_back();
        out.resize(b->size());
        KILN_TRY(b->read(0, out.data(), out.size()));
        if (!swap) continue;
        if (const Status st = swap->append(out.data(), out.size()); !st.ok())
          return make_error("--swap-dir ", dir, ": cannot write the KV cache of '", owner_name_, "' (",
                            format_memory_size(bytes()), "): ", st.error().message);
      }
    }
    host_copy_ = std::move(copy);
    swap_ = std::move(swap);
    for (const auto& m : layers_) {
      m->k_buf.reset();
      m->v_buf.reset();
      m->k.data = m->v.data = nullptr;
    }
    return ok_status();
  }

  Status restore() override {
    std::vector<LayerMemory> fresh(layers_.size());
    std::vector<uint8_t> staging;
    size_t offset = 0;  // in the swap file
    for (size_t il = 0; il < layers_.size(); ++il) {
      KILN_TRY(allocate(fresh[il]));
      for (int kv_i = 0; kv_i < 2; ++kv_i) {
        Buffer& buf = kv_i == 0 ? *fresh[il].k_buf : *fresh[il].v_buf;
        if (swap_) {
          staging.resize(buf.size());
          if (const Status st = swap_->read(offset, staging.data(), staging.size()); !st.ok())
            return make_error("--swap-dir ", resident_.swap_dir(), ": ", st.error().message);
          offset += staging.size();
          KILN_TRY(buf.write(0, staging.data(), staging.size()));
        } else {
          const std::vector<uint8_t>& bytes = host_copy_[2 * il + static_cast<size_t>(kv_i)];
          KILN_TRY(buf.write(0, bytes.data(), bytes.size()));
        }
      }
    }
    for (size_t il = 0; il < layers_.size(); ++il) *layers_[il] = std::move(fresh[il]);
    host_copy_.clear();
    host_copy_.shrink_to_fit();
    swap_.reset();  // the file's blocks go with it
    return ok_status();
  }

  KvCache& cache_;
  Device& device_;
  std::string owner_name_;
  Resident resident_;  // before the layers' buffers: outlives them
  std::vector<std::unique_ptr<LayerMemory>> layers_;  // in layer order
  std::vector<std::vector<uint8_t>> host_copy_;       // while evicted without a swap dir: per layer K then V
  std::unique_ptr<SwapFile> swap_;                    // while evicted with one: every layer's K then V
};

KvCache::~KvCache() = default;

Result<std::unique_ptr<KvCache>> KvCache::create(Device& device, const HParams& hp, int64_t n_ctx, DType type_k,
                                                 DType type_v, OwnerId owner, const std::string& owner_name) {
  const std::vector<LayerPlace> layers(static_cast<size_t>(hp.n_layer), LayerPlace{&device, owner});
  return create(hp, n_ctx, type_k, type_v, layers, owner_name);
}

Result<std::unique_ptr<KvCache>> KvCache::create(const HParams& hp, int64_t n_ctx, DType type_k, DType type_v,
                                                 std::span<const LayerPlace> layers, const std::string& owner_name) {
  for (DType t : {type_k, type_v}) {
    if (t != DType::F32 && t != DType::F16)
      return make_error("kv cache: type ", dtype_name(t), " is not supported (f32, f16)");
  }
  if (n_ctx <= 0) return make_error("kv cache: context size ", n_ctx, " must be positive");
  KILN_ASSERT(layers.size() == static_cast<size_t>(hp.n_layer), "kv cache: one place per layer");
  std::unique_ptr<KvCache> kv(new KvCache());
  kv->type_k_ = type_k;
  kv->type_v_ = type_v;
  kv->n_embd_k_ = hp.n_embd_k_gqa();
  kv->n_embd_v_ = hp.n_embd_v_gqa();
  const int64_t n_cells = cells_for(n_ctx);
  kv->cells_.assign(static_cast<size_t>(n_cells), KvCell{});
  kv->shift_.assign(static_cast<size_t>(n_cells), 0);
  kv->block_used_.assign(static_cast<size_t>(n_cells / kBlockCells), 0);
  for (const LayerPlace& place : layers) {
    DeviceStore* store = nullptr;
    for (const auto& s : kv->stores_) store = &s->device() == place.device ? s.get() : store;
    if (store == nullptr) {
      kv->stores_.push_back(std::make_unique<DeviceStore>(*kv, *place.device, place.owner, owner_name));
      store = kv->stores_.back().get();
    }
    KILN_ASSIGN_OR_RETURN(LayerMemory * m, store->add_layer());
    kv->layers_.push_back(m);
  }
  return kv;
}

uint64_t KvCache::generation() const {
  uint64_t g = 0;
  for (const auto& s : stores_) g += s->generation();
  return g;
}

size_t KvCache::bytes_for(const HParams& hp, int64_t n_ctx, DType type_k, DType type_v, int64_t n_layers) {
  const size_t cells = static_cast<size_t>(cells_for(std::max<int64_t>(n_ctx, 0)));
  return static_cast<size_t>(n_layers < 0 ? hp.n_layer : n_layers) *
         (layer_bytes(type_k, hp.n_embd_k_gqa(), cells) + layer_bytes(type_v, hp.n_embd_v_gqa(), cells));
}

size_t KvCache::layer_bytes(DType type, int64_t width, size_t cells) { return row_size(type, width) * cells; }

size_t KvCache::bytes() const {
  size_t total = 0;
  for (const LayerMemory* m : layers_) total += (m->k_buf ? m->k_buf->size() : 0) + (m->v_buf ? m->v_buf->size() : 0);
  return total;
}

int64_t KvCache::n_kv_padded() const {
  const int64_t padded = std::max<int64_t>(kPadCells, (used_end_ + kPadCells - 1) / kPadCells * kPadCells);
  return std::min(padded, size());
}

size_t KvCache::cell_bytes() const {
  return layers_.size() * (row_size(type_k_, n_embd_k_) + row_size(type_v_, n_embd_v_));
}

Result<std::vector<int64_t>> KvCache::place(std::span<const int32_t> pos, std::span<const int32_t> seq) {
  KILN_ASSERT(pos.size() == seq.size(), "kv cache: pos/seq size mismatch");
  const int64_t size = this->size(), n = static_cast<int64_t>(seq.size());
  if (n > size) return make_error("kv cache: a batch of ", n, " tokens does not fit a cache of ", size, " cells");
  if (n_used() + n > size) {
    return make_error("kv cache: no room for ", n, " tokens (", n_used(), " of ", size,
                      " cells in use): the context is full");
  }
  for (int32_t s : seq) KILN_ASSERT(s >= 0 && s < kMaxSequences, "kv cache: sequence id out of range");
  // Aligned as it is; aligned after packing the blocks; then any free cell after the sequence's
  // (aligned where it can be); then so after packing the cells.
  struct Attempt {
    bool any_cell;
    Status (KvCache::*pack)();
  };
  static constexpr Attempt kAttempts[] = {
      {false, nullptr}, {false, &KvCache::compact}, {true, nullptr}, {true, &KvCache::pack_cells}};
  std::vector<int64_t> cells(static_cast<size_t>(n));
  for (const Attempt& a : kAttempts) {
    if (a.pack != nullptr) KILN_TRY((this->*a.pack)());
    // Each sequence's last cell, looked up once per attempt and then advanced token by token.
    constexpr int64_t kUnknownCell = -2;
    std::array<int64_t, kMaxSequences> last;
    last.fill(kUnknownCell);
    size_t placed = 0;
    for (; placed < cells.size(); ++placed) {
      int64_t& l = last[static_cast<size_t>(seq[placed])];
      if (l == kUnknownCell) l = last_cell(seq[placed]);
      cells[placed] = place_one(pos[placed], seq[placed], l, a.any_cell);
      if (cells[placed] < 0) break;
      l = cells[placed];
    }
    if (placed == cells.size()) return cells;
    for (size_t i = 0; i < placed; ++i) cells_[static_cast<size_t>(cells[i])] = KvCell{};  // undone
    update_used_end();
  }
  return make_error("kv cache: no room for ", n, " tokens (", n_used(), " of ", size,
                    " cells in use): the context is full");
}

int64_t KvCache::place_one(int32_t pos, int32_t seq, int64_t last, bool any_cell) {
  const int64_t offset = pos % kBlockCells;
  int64_t cell = -1;
  if (last >= 0 && continues_block(seq, last, pos)) {
    cell = block_of(last) * kBlockCells + offset;
  } else {
    for (int64_t b = last < 0 ? 0 : block_of(last) + 1; b < static_cast<int64_t>(block_used_.size()); ++b) {
      if (block_used_[static_cast<size_t>(b)] == 0) {
        cell = b * kBlockCells + offset;
        break;
      }
    }
  }
  for (int64_t c = last + 1; cell < 0 && any_cell && c < size(); ++c) {
    if (cells_[static_cast<size_t>(c)].free()) cell = c;
  }
  if (cell >= 0) occupy(cell, pos, seq);
  return cell;
}

bool KvCache::continues_block(int32_t seq, int64_t last, int32_t pos) const {
  const int64_t first = block_of(last) * kBlockCells;
  const int64_t cell = first + pos % kBlockCells;
  if (cell <= last || !cells_[static_cast<size_t>(cell)].free()) return false;
  if (cells_[static_cast<size_t>(last)].pos / kBlockCells != pos / kBlockCells) return false;
  for (int64_t c = first; c < first + kBlockCells; ++c) {
    const KvCell& k = cells_[static_cast<size_t>(c)];
    if (!k.free() && !k.has(seq)) return false;
  }
  return true;
}

void KvCache::occupy(int64_t cell, int32_t pos, int32_t seq) {
  KvCell& c = cells_[static_cast<size_t>(cell)];
  KILN_ASSERT(c.free(), "kv cache: commit into a used cell");
  c.pos = pos;
  c.seq_mask = uint64_t{1} << seq;
  ++block_used_[static_cast<size_t>(block_of(cell))];
  used_end_ = std::max(used_end_, cell + 1);
}

int64_t KvCache::last_cell(int32_t seq) const {
  for (int64_t i = used_end_; i > 0; --i) {
    if (cells_[static_cast<size_t>(i - 1)].has(seq)) return i - 1;
  }
  return -1;
}

int64_t KvCache::free_cells() const {
  return kBlockCells * std::count(block_used_.begin(), block_used_.end(), 0);
}

int64_t KvCache::cells_to_grow(int32_t seq, int32_t next_pos, int64_t n) const {
  if (n <= 0) return 0;
  int64_t p = next_pos;
  const int64_t end = next_pos + n;
  const int64_t last = last_cell(seq);
  if (last >= 0 && continues_block(seq, last, next_pos)) p = std::min(end, (p / kBlockCells + 1) * kBlockCells);
  if (p >= end) return 0;
  return ((end - 1) / kBlockCells - p / kBlockCells + 1) * kBlockCells;
}

int64_t KvCache::tokens_within(int32_t seq, int32_t next_pos, int64_t cells) const {
  int64_t p = next_pos;
  const int64_t last = last_cell(seq);
  if (last >= 0 && continues_block(seq, last, next_pos)) p = (p / kBlockCells + 1) * kBlockCells;
  const int64_t blocks = std::max<int64_t>(cells, 0) / kBlockCells;
  if (blocks > 0) p = (p / kBlockCells + blocks) * kBlockCells;
  return p - next_pos;
}

int64_t KvCache::cells_for_positions(std::span<const int32_t> positions) {
  std::vector<int32_t> runs;
  runs.reserve(positions.size());
  for (int32_t p : positions) runs.push_back(p / static_cast<int32_t>(kBlockCells));
  std::sort(runs.begin(), runs.end());
  return kBlockCells * (std::unique(runs.begin(), runs.end()) - runs.begin());
}

int64_t KvCache::cells_held_only_by(uint64_t seqs) const {
  int64_t n = 0;
  for (size_t b = 0; b < block_used_.size(); ++b) {
    if (block_used_[b] == 0) continue;
    bool only = true;
    for (size_t c = b * kBlockCells; c < (b + 1) * kBlockCells && only; ++c) only = (cells_[c].seq_mask & ~seqs) == 0;
    n += only ? kBlockCells : 0;
  }
  return n;
}

Status KvCache::move_cells(int64_t from, int64_t to, int64_t count) {
  const size_t rk = row_size(type_k_, n_embd_k_), rv = row_size(type_v_, n_embd_v_);
  std::vector<uint8_t> rows;
  auto move_rows = [&](Buffer& buf, size_t row_bytes) -> Status {
    rows.resize(static_cast<size_t>(count) * row_bytes);
    KILN_TRY(buf.read(static_cast<size_t>(from) * row_bytes, rows.data(), rows.size()));
    return buf.write(static_cast<size_t>(to) * row_bytes, rows.data(), rows.size());
  };
  for (LayerMemory* m : layers_) {
    KILN_TRY(move_rows(*m->k_buf, rk));
    KILN_TRY(move_rows(*m->v_buf, rv));
  }
  std::copy_n(cells_.begin() + from, count, cells_.begin() + to);
  std::copy_n(shift_.begin() + from, count, shift_.begin() + to);
  return ok_status();
}

Status KvCache::compact() {
  int64_t to = 0;  // the next block to fill
  for (int64_t from = 0; from < static_cast<int64_t>(block_used_.size()); ++from) {
    if (block_used_[static_cast<size_t>(from)] == 0) continue;
    // to < from: blocks move down in order, so a block never overwrites one not yet moved.
    if (to != from) KILN_TRY(move_cells(from * kBlockCells, to * kBlockCells, kBlockCells));
    ++to;
  }
  return clear_from(to * kBlockCells);
}

Status KvCache::pack_cells() {
  const int64_t size = this->size();
  int64_t to = 0;
  for (int64_t from = 0; from < size;) {
    if (cells_[static_cast<size_t>(from)].free()) {
      ++from;
      continue;
    }
    int64_t end = from;
    while (end < size && !cells_[static_cast<size_t>(end)].free()) ++end;
    if (to != from) KILN_TRY(move_cells(from, to, end - from));  // runs move down in order
    to += end - from;
    from = end;
  }
  return clear_from(to);
}

Status KvCache::clear_from(int64_t cell) {
  std::fill(cells_.begin() + cell, cells_.end(), KvCell{});
  std::fill(shift_.begin() + cell, shift_.end(), 0);
  update_used_end();
  return ok_status();
}

int64_t KvCache::n_used() const { return std::accumulate(block_used_.begin(), block_used_.end(), int64_t{0}); }

void KvCache::update_used_end() {
  used_end_ = 0;
  std::fill(block_used_.begin(), block_used_.end(), 0);
  for (int64_t i = 0; i < size(); ++i) {
    if (cells_[static_cast<size_t>(i)].free()) continue;
    used_end_ = i + 1;
    ++block_used_[static_cast<size_t>(block_of(i))];
  }
}

void KvCache::fill_mask(std::span<float> mask, int64_t n_kv_pad, std::span<const int32_t> pos,
                        std::span<const int32_t> seq, bool causal) const {
  KILN_ASSERT(mask.size() >= static_cast<size_t>(n_kv_pad) * pos.size(), "kv cache: mask too small");
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (size_t t = 0; t < pos.size(); ++t) {
    float* row = mask.data() + t * static_cast<size_t>(n_kv_pad);
    for (int64_t c = 0; c < n_kv_pad; ++c) {
      bool visible = false;
      if (c < used_end_) {
        const KvCell& cell = cells_[static_cast<size_t>(c)];
        visible = cell.has(seq[t]) && (!causal || cell.pos <= pos[t]);
      }
      row[c] = visible ? 0.0f : neg_inf;
    }
  }
}

namespace {
bool in_range(int32_t p, int32_t p0, int32_t p1) {
  return p >= (p0 < 0 ? 0 : p0) && (p1 < 0 || p < p1);
}
}  // namespace

void KvCache::seq_rm(int32_t seq, int32_t p0, int32_t p1) {
  for (auto& c : cells_) {
    if (c.free() || !in_range(c.pos, p0, p1)) continue;
    if (seq < 0) {
      c.seq_mask = 0;
    } else {
      c.seq_mask &= ~(uint64_t{1} << seq);
    }
    if (c.free()) c.pos = -1;
  }
  update_used_end();
}

void KvCache::seq_cp(int32_t src, int32_t dst, int32_t p0, int32_t p1) {
  if (src == dst) return;
  for (auto& c : cells_) {
    if (c.has(src) && in_range(c.pos, p0, p1)) c.seq_mask |= uint64_t{1} << dst;
  }
}

void KvCache::seq_keep(int32_t seq) {
  for (auto& c : cells_) {
    c.seq_mask = c.has(seq) ? (uint64_t{1} << seq) : 0;
    if (c.free()) c.pos = -1;
  }
  update_used_end();
}

bool KvCache::seq_add(int32_t seq, int32_t p0, int32_t p1, int32_t delta) {
  if (delta == 0) return false;
  bool moved = false;
  for (size_t i = 0; i < cells_.size(); ++i) {
    KvCell& c = cells_[i];
    if (!c.has(seq) || !in_range(c.pos, p0, p1)) continue;
    KILN_ASSERT(c.seq_mask == (uint64_t{1} << seq), "kv cache: shifting a cell shared by several sequences");
    c.pos += delta;
    shift_[i] += delta;
    moved = true;
    has_shift_ = true;
    if (c.pos < 0) {  // shifted out of the context: forget it
      c.pos = -1;
      c.seq_mask = 0;
    }
  }
  update_used_end();
  return moved;
}

void KvCache::clear_shift() {
  std::fill(shift_.begin(), shift_.end(), 0);
  has_shift_ = false;
}

int32_t KvCache::seq_pos_max(int32_t seq) const {
  int32_t best = -1;
  for (const auto& c : cells_) {
    if (c.has(seq)) best = std::max(best, c.pos);
  }
  return best;
}

int32_t KvCache::seq_pos_min(int32_t seq) const {
  int32_t best = -1;
  for (const auto& c : cells_) {
    if (c.has(seq) && (best < 0 || c.pos < best)) best = c.pos;
  }
  return best;
}

void KvCache::clear() {
  std::fill(cells_.begin(), cells_.end(), KvCell{});
  clear_shift();
  used_end_ = 0;
  std::fill(block_used_.begin(), block_used_.end(), 0);
}

namespace {

// Calls f(first cell, count, offset of the first cell's row in the copy) for each run of
// consecutive cells in `cells`, so that a run is one device transfer.
template <typename F>
Status for_each_cell_run(std::span<const int64_t> cells, size_t row_bytes, F&& f) {
  size_t at = 0;
  for (size_t i = 0; i < cells.size();) {
    size_t n = 1;
    while (i + n < cells.size() && cells[i + n] == cells[i] + static_cast<int64_t>(n)) ++n;
    KILN_TRY(f(cells[i], n, at));
    at += n * row_bytes;
    i += n;
  }
  return ok_status();
}

}  // namespace

Status KvCache::read_cells(std::span<const int64_t> cells, std::vector<uint8_t>& out) const {
  const size_t rk = row_size(type_k_, n_embd_k_), rv = row_size(type_v_, n_embd_v_);
  out.resize(cells.size() * cell_bytes());
  size_t at = 0;
  for (const LayerMemory* m : layers_) {
    for (const auto& [buf, row] : {std::pair{m->k_buf.get(), rk}, std::pair{m->v_buf.get(), rv}}) {
      KILN_TRY(for_each_cell_run(cells, row, [&](int64_t c, size_t n, size_t off) {
        return buf->read(static_cast<size_t>(c) * row, out.data() + at + off, n * row);
      }));
      at += cells.size() * row;
    }
  }
  return ok_status();
}

Status KvCache::write_cells(std::span<const int64_t> cells, std::span<const uint8_t> bytes) {
  if (bytes.size() != cells.size() * cell_bytes())
    return make_error("kv cache: state of ", bytes.size(), " bytes does not match ", cells.size(), " cells of ",
                      cell_bytes(), " bytes");
  const size_t rk = row_size(type_k_, n_embd_k_), rv = row_size(type_v_, n_embd_v_);
  size_t at = 0;
  for (const LayerMemory* m : layers_) {
    for (const auto& [buf, row] : {std::pair{m->k_buf.get(), rk}, std::pair{m->v_buf.get(), rv}}) {
      KILN_TRY(for_each_cell_run(cells, row, [&](int64_t c, size_t n, size_t off) {
        return buf->write(static_cast<size_t>(c) * row, bytes.data() + at + off, n * row);
      }));
      at += cells.size() * row;
    }
  }
  return ok_status();
}

}  // namespace kiln
