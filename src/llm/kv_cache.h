// KvCache: one key/value cache shared by many sequences (a "unified" cache, as llama.cpp's).
//
// The cache has n_ctx cells; each cell holds the K and V rows of one token for every layer, the
// token's position and the set of sequences that see it (a cell shared by several sequences after
// seq_cp). Memory per layer, on the cache's device:
//   K [n_embd_k_gqa, n_ctx]: cell c's keys at row c, head h at columns [h*head_dim_k, (h+1)*head_dim_k)
//   V [n_embd_v_gqa, n_ctx]: likewise.
// Cells come in blocks of kBlockCells (attention's key tile, ops/attention.cpp kFaTileKv): the
// token at position p of a sequence goes to offset p % kBlockCells of a block that holds only that
// sequence's positions of one aligned run [p - p % kBlockCells, + kBlockCells) (or of the sequences
// sharing them after seq_cp), in a block after every cell the sequence already holds (place()).
// So a sequence's keys sit in cell order and in the tiles they would fill in an empty cache,
// wherever its blocks are: attention sums keys in cell order, tile by tile, with SIMD lanes by cell
// index, and the same keys in other cells give other bits, which would make a sequence's output
// depend on what else the cache held. Masked keys add exact zeros and fully masked tiles are
// skipped, so the other blocks between change nothing. Attention reads cells [0, n_kv()) through
// a mask that hides cells of other sequences and future positions.
// The cache holds n_ctx cells rounded up to whole blocks. Room is counted in blocks: free_cells()
// is the cells of blocks no sequence holds, and cells_to_grow() what a sequence's next tokens take
// from them (none while they fit its last block).
// Layers may lie on several devices (a model split over them: each layer's K and V on its layer's
// device); cell metadata is one, on the host.
// Residency: on a device with a residency manager the cache's layers there are one resident
// (MemoryKind::Kv) of the context's owner there. Evicting copies those layers' K and V to host memory, or to a file in the
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

class KvCache final {
 public:
  // Where one layer's K and V live: a device, and the owner whose resident they are there.
  struct LayerPlace {
    Device* device = nullptr;
    OwnerId owner = 0;
  };
  // Allocates n_layer K and V buffers of n_ctx cells rounded up to whole blocks (MemoryKind::Kv,
  // tagged `owner_name`), layer il's on layers[il].device (one entry per layer), and zeroes them.
  // The layers on one device are one resident of that device's owner when it has a residency
  // manager: evicted and restored together, apart from the other devices' layers.
  static Result<std::unique_ptr<KvCache>> create(const HParams& hp, int64_t n_ctx, DType type_k, DType type_v,
                                                 std::span<const LayerPlace> layers, const std::string& owner_name);
  // Every layer on `device`, a resident of `owner` there.
  static Result<std::unique_ptr<KvCache>> create(Device& device, const HParams& hp, int64_t n_ctx, DType type_k,
                                                 DType type_v, OwnerId owner, const std::string& owner_name);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;
  // The cells of a cache created for n_ctx: n_ctx rounded up to whole blocks.
  static int64_t cells_for(int64_t n_ctx) { return (n_ctx + kBlockCells - 1) / kBlockCells * kBlockCells; }
  // Bytes of the K and V buffers that create() allocates for these arguments, over `n_layers`
  // layers (-1: all of hp's).
  static size_t bytes_for(const HParams& hp, int64_t n_ctx, DType type_k, DType type_v, int64_t n_layers = -1);
  // Raised each time buffers come back from an eviction (the views then point elsewhere).
  uint64_t generation() const;

  int64_t size() const { return static_cast<int64_t>(cells_.size()); }
  DType type_k() const { return type_k_; }
  DType type_v() const { return type_v_; }
  // Full-cache views of layer il, [n_embd_{k,v}_gqa, n_ctx], at device addresses (on its device).
  const TensorView& k(int64_t il) const { return layer(il).k; }
  const TensorView& v(int64_t il) const { return layer(il).v; }
  size_t bytes() const;  // of the K and V buffers allocated now (0 while evicted)

  // Places and commits a micro-batch (positions `pos` of sequences `seq`, a sequence's tokens in
  // ascending positions) and returns each token's cell, as the header describes: a token continues
  // its sequence's last block when it belongs to the same aligned run of positions, else takes the
  // first free block after the sequence's cells. When that fails for want of a free block after a
  // sequence's cells, the used blocks are packed to the front (compact()) and the batch placed
  // again. When the free blocks do not suffice, tokens that cannot be aligned take any free cell
  // after their sequence's cells (packing the used cells to the front if need be): the order of a
  // sequence's keys holds, their tiles may not, so only a pool counted in blocks (free_cells(),
  // as the server's engine counts it) keeps every sequence's bits. An Error (nothing placed) when
  // the free cells do not suffice.
  Result<std::vector<int64_t>> place(std::span<const int32_t> pos, std::span<const int32_t> seq);
  // Moves the used blocks (K/V rows of every layer, positions, sequences) to blocks at the front, in
  // their current order; every cell keeps its offset in its block, so a sequence's attention gives
  // the same bits before and after.
  Status compact();
  static constexpr int64_t kBlockCells = 64;
  // Cells of the blocks that hold no token.
  int64_t free_cells() const;
  // Cells of free blocks that n more tokens of `seq` at positions [next_pos, next_pos + n) take
  // (a multiple of kBlockCells; those that fit the sequence's last block take none).
  int64_t cells_to_grow(int32_t seq, int32_t next_pos, int64_t n) const;
  // The most tokens of `seq` from next_pos that take at most `cells` cells of free blocks.
  int64_t tokens_within(int32_t seq, int32_t next_pos, int64_t cells) const;
  // Cells of free blocks that tokens at `positions` of a sequence with no cells take.
  static int64_t cells_for_positions(std::span<const int32_t> positions);
  // Cells of the used blocks whose every token belongs only to sequences in `seqs` (bit s: sequence
  // s): the room that removing those sequences frees.
  int64_t cells_held_only_by(uint64_t seqs) const;
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
  void update_used_end();  // and block_used_
  int64_t last_cell(int32_t seq) const;  // the highest cell `seq` holds, or -1
  int64_t block_of(int64_t cell) const { return cell / kBlockCells; }
  // Whether a token of `seq` at `pos` goes into the block of `seq`'s last cell `last`, at offset
  // pos % kBlockCells: the block holds only `seq`'s tokens (with the sequences sharing them), of
  // pos's aligned run, and that cell after `last` is free.
  bool continues_block(int32_t seq, int64_t last, int32_t pos) const;
  // One token's cell by place()'s rule, committed, given seq's last cell `last` (-1: none); -1
  // when no free block (with any_cell: no free cell) lies after seq's cells.
  int64_t place_one(int32_t pos, int32_t seq, int64_t last, bool any_cell);
  // Moves `count` cells' K/V rows (every layer), metadata and shifts from `from` to `to`.
  Status move_cells(int64_t from, int64_t to, int64_t count);
  Status pack_cells();                // the used cells to [0, n_used()), in order
  Status clear_from(int64_t cell);    // frees cells [cell, size()) (after a packing)
  void occupy(int64_t cell, int32_t pos, int32_t seq);
  // The K and V buffers of the layers on one device: one resident there (Evictable: their bytes to
  // host memory or a swap file and back).
  class DeviceStore;
  struct LayerMemory {
    std::unique_ptr<Buffer> k_buf, v_buf;  // null while evicted
    TensorView k, v;                       // data null while evicted
  };
  const LayerMemory& layer(int64_t il) const { return *layers_[static_cast<size_t>(il)]; }
  static size_t layer_bytes(DType type, int64_t width, size_t cells);  // of one K or V buffer
  DType type_k_ = DType::F16, type_v_ = DType::F16;
  int64_t n_embd_k_ = 0, n_embd_v_ = 0;
  std::vector<KvCell> cells_;
  std::vector<int32_t> shift_;
  bool has_shift_ = false;
  int64_t used_end_ = 0;
  std::vector<int32_t> block_used_;  // used cells per block
  std::vector<std::unique_ptr<DeviceStore>> stores_;  // one per device, in the order of first layers
  std::vector<LayerMemory*> layers_;                  // per layer: its memory in its device's store
};

}  // namespace kiln
