// KvCache: one key/value cache shared by many sequences (a "unified" cache, as llama.cpp's).
//
// The cache has n_ctx cells; each cell holds the K and V rows of one token for every layer, the
// token's position and the set of sequences that see it (a cell shared by several sequences after
// seq_cp). Memory per layer, on the cache's device:
//   K [n_embd_k_gqa, n_ctx]: cell c's keys at row c, head h at columns [h*head_dim_k, (h+1)*head_dim_k)
//   V [n_embd_v_gqa, n_ctx]: likewise.
// A micro-batch is written into a contiguous run of free cells placed after every cell its
// sequences already hold (place()), so each sequence's cells stay in the order they were written:
// flash attention sums keys in cell order, and the same keys in another order give other bits,
// which would make a sequence's output depend on what else the cache held. Attention reads cells
// [0, n_kv()) through a mask that hides cells of other sequences and future positions.
// Residency: on a device with a residency manager the cache is one resident (MemoryKind::Kv) of
// the context's owner. Evicting copies every layer's K and V to host memory, or to a file in the
// manager's swap directory when it has one (--swap-dir: runtime/swap_file.h, one file per evicted
// cache, gone at restore), and frees the device buffers; restoring allocates them again (anywhere:
// the views change, generation() rises) and copies the bytes back, bit for bit. A swap file that
// cannot be written (disk full) fails the eviction: the buffers stay, nothing is lost. Cell
// metadata stays on the host throughout. A host device's cache is evicted only with a swap
// directory (see runtime/residency.h).
// Thread-safety: none; the owning Context serializes access (the residency manager evicts only
// while the owner is unpinned, and a context pins its owner for every pass that reads K/V).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/tensor_view.h"
#include "models/hparams.h"
#include "runtime/device.h"
#include "runtime/residency.h"
#include "runtime/swap_file.h"

namespace kiln {

inline constexpr int kMaxSequences = 64;  // sequence ids are in [0, kMaxSequences)

struct KvCell {
  int32_t pos = -1;       // -1: free
  uint64_t seq_mask = 0;  // bit s: sequence s sees this cell
  bool free() const { return seq_mask == 0; }
  bool has(int32_t seq) const { return (seq_mask >> seq) & 1u; }
};

class KvCache final : private Evictable {
 public:
  // Allocates n_layer K and V buffers (MemoryKind::Kv, tagged `owner_name`) on `device`, as a
  // resident of `owner` when the device has a residency manager, and zeroes them.
  static Result<std::unique_ptr<KvCache>> create(Device& device, const HParams& hp, int64_t n_ctx, DType type_k,
                                                 DType type_v, OwnerId owner, const std::string& owner_name);
  // Bytes of the K and V buffers that create() allocates for these arguments.
  static size_t bytes_for(const HParams& hp, int64_t n_ctx, DType type_k, DType type_v);
  // Raised each time the buffers come back from an eviction (the views then point elsewhere).
  uint64_t generation() const { return resident_.generation(); }

  int64_t size() const { return static_cast<int64_t>(cells_.size()); }
  DType type_k() const { return type_k_; }
  DType type_v() const { return type_v_; }
  // Full-cache views of layer il, [n_embd_{k,v}_gqa, n_ctx], at device addresses.
  const TensorView& k(int64_t il) const { return k_views_[static_cast<size_t>(il)]; }
  const TensorView& v(int64_t il) const { return v_views_[static_cast<size_t>(il)]; }
  size_t bytes() const;

  // The first cell of a run of seq.size() free cells after the last cell of every sequence in
  // `seq`, for a micro-batch of tokens of those sequences. When the cache has no such run but
  // enough free cells, the used cells are first packed to the front (compact()); an Error when
  // it has too few free cells.
  Result<int64_t> place(std::span<const int32_t> seq);
  // Moves the used cells (K/V rows of every layer, positions, sequences) to cells [0, n_used())
  // in their current order; a sequence's attention gives the same bits before and after.
  Status compact();
  // Marks cells [head, head + pos.size()) as holding tokens at `pos` of sequences `seq`.
  void commit(int64_t head, std::span<const int32_t> pos, std::span<const int32_t> seq);
  // Cells [0, n_kv) cover every used cell; attention reads only these.
  int64_t n_kv() const { return used_end_; }
  // n_kv() rounded up to a multiple of kPadCells (at least kPadCells), at most size(): the cells a
  // decode step's attention reads. It stays the same while the cache grows inside it, so the
  // step's graph repeats and its plan is reused (ref: llama_kv_cache::get_n_kv, which pads to
  // 256). The cells past n_kv() are masked and hold finite values (the cache starts zeroed):
  // masked keys add exact zeros, so the padding changes no bits.
  static constexpr int64_t kPadCells = 256;
  int64_t n_kv_padded() const;
  int64_t n_used() const;
  const KvCell& cell(int64_t i) const { return cells_[static_cast<size_t>(i)]; }

  // Writes the attention mask of a micro-batch: mask[t * n_kv_pad + c] = 0 when cell c is visible to
  // token t (same sequence and, when `causal`, position <= the token's), -inf otherwise (and for
  // c >= n_kv()). [n_kv_pad, n_tokens] row-major by token. ref: llama_kv_cache::set_input_kq_mask.
  void fill_mask(std::span<float> mask, int64_t n_kv_pad, std::span<const int32_t> pos,
                 std::span<const int32_t> seq, bool causal = true) const;

  // Sequence operations over positions [p0, p1) (p1 < 0: to the end), as llama.cpp's
  // llama_memory_seq_*: remove, copy to another sequence (cells become shared), keep only one
  // sequence, shift positions by delta (the caller re-ropes K: see positions_shift()).
  void seq_rm(int32_t seq, int32_t p0, int32_t p1);
  void seq_cp(int32_t src, int32_t dst, int32_t p0, int32_t p1);
  void seq_keep(int32_t seq);
  // Returns true when any cell moved; accumulates each cell's delta for the K re-rope.
  bool seq_add(int32_t seq, int32_t p0, int32_t p1, int32_t delta);
  // Per-cell position deltas accumulated by seq_add since the last clear_shift(), [n_ctx].
  std::span<const int32_t> positions_shift() const { return shift_; }
  bool has_shift() const { return has_shift_; }
  void clear_shift();
  // Highest position of `seq`, or -1 when it has no cells.
  int32_t seq_pos_max(int32_t seq) const;
  int32_t seq_pos_min(int32_t seq) const;
  void clear();

  // Copies the K/V rows of cells `cells` of every layer to host bytes (layer-major: K then V per
  // layer), or writes them back; for state save/load and eviction. Works on devices that are not
  // host-visible.
  Status read_cells(std::span<const int64_t> cells, std::vector<uint8_t>& out) const;
  Status write_cells(std::span<const int64_t> cells, std::span<const uint8_t> bytes);
  size_t cell_bytes() const;  // bytes of one cell over all layers, K and V

 private:
  KvCache() = default;
  void update_used_end();
  Result<std::unique_ptr<Buffer>> allocate_layer(int kv_i);  // K (0) or V (1) buffer of one layer
  static size_t layer_bytes(DType type, int64_t width, size_t cells);  // of one such buffer
  // Evictable: K/V bytes to host_copy_ (or swap_) and back.
  Status evict() override;
  Status restore() override;

  DType type_k_ = DType::F16, type_v_ = DType::F16;
  int64_t n_embd_k_ = 0, n_embd_v_ = 0;
  std::vector<KvCell> cells_;
  std::vector<int32_t> shift_;
  bool has_shift_ = false;
  int64_t used_end_ = 0;
  std::string owner_name_;
  Resident resident_;  // before the buffers: outlives them
  std::vector<std::unique_ptr<Buffer>> k_bufs_, v_bufs_;
  std::vector<std::vector<uint8_t>> host_copy_;  // while evicted without a swap dir: per layer K then V
  std::unique_ptr<SwapFile> swap_;               // while evicted with one: every layer's K then V
  std::vector<TensorView> k_views_, v_views_;
};

}  // namespace kiln
