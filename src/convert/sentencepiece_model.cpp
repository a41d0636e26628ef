#include "convert/sentencepiece_model.h"

#include <cstring>

namespace kiln::convert {

namespace {

// A bounds-checked cursor over protobuf wire-format bytes. ref: protobuf encoding guide
// (varints, wire types 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32; 3/4 groups, obsolete).
class WireReader {
 public:
  WireReader(std::span<const uint8_t> bytes, std::string what) : bytes_(bytes), what_(std::move(what)) {}
  bool done() const { return pos_ >= bytes_.size(); }

  Result<uint64_t> varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= bytes_.size()) return make_error(what_, ": varint runs past the end at byte ", pos_);
      const uint8_t b = bytes_[pos_++];
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    return make_error(what_, ": varint longer than 10 bytes at byte ", pos_);
  }
  Result<std::span<const uint8_t>> bytes_field() {
    KILN_ASSIGN_OR_RETURN(uint64_t len, varint());
    if (len > bytes_.size() - pos_)
      return make_error(what_, ": field of ", len, " bytes at byte ", pos_, " runs past the end (size ", bytes_.size(), ")");
    auto out = bytes_.subspan(pos_, len);
    pos_ += len;
    return out;
  }
  Result<uint32_t> fixed32() {
    if (bytes_.size() - pos_ < 4) return make_error(what_, ": fixed32 runs past the end at byte ", pos_);
    uint32_t v;
    std::memcpy(&v, bytes_.data() + pos_, 4);  // little-endian host (x86-64, as the whole project)
    pos_ += 4;
    return v;
  }
  Status skip(uint32_t wire_type) {
    switch (wire_type) {
      case 0: return varint().ok() ? ok_status() : make_error(what_, ": bad varint while skipping at byte ", pos_);
      case 1:
        if (bytes_.size() - pos_ < 8) return make_error(what_, ": fixed64 runs past the end at byte ", pos_);
        pos_ += 8;
        return ok_status();
      case 2: {
        auto r = bytes_field();
        if (!r.ok()) return r.error();
        return ok_status();
      }
      case 5: {
        auto r = fixed32();
        if (!r.ok()) return r.error();
        return ok_status();
      }
      default: return make_error(what_, ": unsupported wire type ", wire_type, " at byte ", pos_);
    }
  }
  size_t pos() const { return pos_; }

 private:
  std::span<const uint8_t> bytes_;
  std::string what_;
  size_t pos_ = 0;
};

// Reads one tag; wire type in the low 3 bits, field number above.
struct Tag {
  uint32_t field;
  uint32_t wire;
};
Result<Tag> read_tag(WireReader& r) {
  KILN_ASSIGN_OR_RETURN(uint64_t key, r.varint());
  return Tag{static_cast<uint32_t>(key >> 3), static_cast<uint32_t>(key & 7)};
}

Status expect_wire(const Tag& t, uint32_t wire, const std::string& what) {
  if (t.wire != wire) return make_error(what, ": field ", t.field, " has wire type ", t.wire, ", expected ", wire);
  return ok_status();
}

Result<SpmPiece> parse_piece(std::span<const uint8_t> bytes, const std::string& what) {
  WireReader r(bytes, what);
  SpmPiece p;
  while (!r.done()) {
    KILN_ASSIGN_OR_RETURN(Tag t, read_tag(r));
    if (t.field == 1) {
      KILN_TRY(expect_wire(t, 2, what));
      KILN_ASSIGN_OR_RETURN(auto s, r.bytes_field());
      p.piece.assign(reinterpret_cast<const char*>(s.data()), s.size());
    } else if (t.field == 2) {
      KILN_TRY(expect_wire(t, 5, what));
      KILN_ASSIGN_OR_RETURN(uint32_t bits, r.fixed32());
      std::memcpy(&p.score, &bits, 4);
    } else if (t.field == 3) {
      KILN_TRY(expect_wire(t, 0, what));
      KILN_ASSIGN_OR_RETURN(uint64_t v, r.varint());
      if (v < 1 || v > 6) return make_error(what, ": piece type ", v, " is not one of 1..6");
      p.type = static_cast<SpmPieceType>(v);
    } else {
      KILN_TRY(r.skip(t.wire));
    }
  }
  return p;
}

}  // namespace

Result<SpmModel> parse_spm_model(std::span<const uint8_t> bytes, const std::string& label) {
  const std::string what = "sentencepiece: " + label;
  SpmModel m;
  WireReader r(bytes, what);
  while (!r.done()) {
    KILN_ASSIGN_OR_RETURN(Tag t, read_tag(r));
    if (t.field == 1) {
      KILN_TRY(expect_wire(t, 2, what));
      KILN_ASSIGN_OR_RETURN(auto s, r.bytes_field());
      KILN_ASSIGN_OR_RETURN(SpmPiece p, parse_piece(s, what + ": piece " + std::to_string(m.pieces.size())));
      m.pieces.push_back(std::move(p));
    } else if (t.field == 2 || t.field == 3) {
      KILN_TRY(expect_wire(t, 2, what));
      KILN_ASSIGN_OR_RETURN(auto s, r.bytes_field());
      WireReader sub(s, what + (t.field == 2 ? ": trainer_spec" : ": normalizer_spec"));
      while (!sub.done()) {
        KILN_ASSIGN_OR_RETURN(Tag st, read_tag(sub));
        if (t.field == 2 && (st.field == 3 || st.field == 35) && st.wire == 0) {
          KILN_ASSIGN_OR_RETURN(uint64_t v, sub.varint());
          if (st.field == 3) m.model_type = static_cast<int32_t>(v);
          else m.byte_fallback = v != 0;
        } else if (t.field == 3 && st.field == 1 && st.wire == 2) {
          KILN_ASSIGN_OR_RETURN(auto name, sub.bytes_field());
          m.normalizer_name.assign(reinterpret_cast<const char*>(name.data()), name.size());
        } else if (t.field == 3 && (st.field == 3 || st.field == 4) && st.wire == 0) {
          KILN_ASSIGN_OR_RETURN(uint64_t v, sub.varint());
          (st.field == 3 ? m.add_dummy_prefix : m.remove_extra_whitespaces) = v != 0;
        } else {
          KILN_TRY(sub.skip(st.wire));
        }
      }
    } else {
      KILN_TRY(r.skip(t.wire));
    }
  }
  if (m.pieces.empty()) return make_error(what, ": no pieces (not a SentencePiece model?)");
  return m;
}

}  // namespace kiln::convert
