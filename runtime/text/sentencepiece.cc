// The SentencePiece tokenizer kind over libsentencepiece (see
// sentencepiece_kind.h). The only C++ in orion: the library's API is C++, so
// this file is the boundary, and no exception crosses it (each entry point
// catches everything and reports it as an error message).
#include "sentencepiece_kind.h"

#include <sentencepiece_processor.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <vector>

struct SpModel {
  sentencepiece::SentencePieceProcessor processor;
  // Every id's streaming bytes, back to back; piece i is
  // pieces[offsets[i] .. offsets[i + 1]).
  std::string pieces;
  std::vector<size_t> offsets;
  // Decode drops the leading space of a normal piece that comes first in a
  // text (after control pieces only): when the normalizer adds a space in
  // front or removes extra whitespace.
  bool strips_first_space = true;
};

namespace {

void set_error(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void set_error(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || errlen == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  // libsentencepiece's status texts may end in a space.
  size_t n = strlen(err);
  while (n > 0 && (err[n - 1] == ' ' || err[n - 1] == '\n')) err[--n] = '\0';
}

// ---- the two model settings the C++ API does not expose ----
//
// The ModelProto class is not in Debian's headers, so its serialized form is
// read here: protobuf's wire format is keys (field << 3 | wire type) and
// varints, fixed 32/64-bit words or length-prefixed bytes.

struct WireReader {
  const unsigned char *p, *end;
  bool ok = true;

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p >= end) break;
      unsigned char b = *p++;
      v |= (uint64_t)(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    ok = false;
    return 0;
  }
  // The next field: its number, wire type, and its value (a varint) or
  // bytes (a length-delimited field).
  bool next(uint32_t *field, uint32_t *type, uint64_t *value, const unsigned char **data, size_t *len) {
    if (!ok || p >= end) return false;
    uint64_t key = varint();
    *field = (uint32_t)(key >> 3);
    *type = (uint32_t)(key & 7);
    *value = 0;
    *data = nullptr;
    *len = 0;
    switch (*type) {
    case 0: *value = varint(); break;
    case 1: skip(8); break;
    case 5: skip(4); break;
    case 2: {
      uint64_t n = varint();
      if (n > (uint64_t)(end - p)) { ok = false; break; }
      *data = p;
      *len = (size_t)n;
      p += n;
      break;
    }
    default: ok = false; // groups (3, 4) are not used by SentencePiece
    }
    return ok;
  }
  void skip(size_t n) {
    if ((size_t)(end - p) < n) ok = false;
    else p += n;
  }
};

// ModelProto: trainer_spec = 2 (its unk_surface = 44), normalizer_spec = 3
// (its add_dummy_prefix = 3, remove_extra_whitespaces = 4, both true by
// default). A later occurrence wins, as in protobuf.
void read_model_settings(const std::string &proto, bool *strips_first_space, std::string *unk_surface) {
  bool add_dummy_prefix = true, remove_extra_whitespaces = true;
  WireReader r{(const unsigned char *)proto.data(), (const unsigned char *)proto.data() + proto.size()};
  uint32_t field, type, sub_field, sub_type;
  uint64_t value, sub_value;
  const unsigned char *data, *sub_data;
  size_t len, sub_len;
  while (r.next(&field, &type, &value, &data, &len)) {
    if (type != 2 || (field != 2 && field != 3)) continue;
    WireReader sub{data, data + len};
    while (sub.next(&sub_field, &sub_type, &sub_value, &sub_data, &sub_len)) {
      if (field == 3 && sub_field == 3 && sub_type == 0) add_dummy_prefix = sub_value != 0;
      if (field == 3 && sub_field == 4 && sub_type == 0) remove_extra_whitespaces = sub_value != 0;
      if (field == 2 && sub_field == 44 && sub_type == 2) unk_surface->assign((const char *)sub_data, sub_len);
    }
  }
  *strips_first_space = add_dummy_prefix || remove_extra_whitespaces;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// What decode writes for one id, apart from the start of a text.
std::string streaming_bytes(const sentencepiece::SentencePieceProcessor &sp, int id, const std::string &unk_surface) {
  if (sp.IsControl(id)) return std::string();
  if (sp.IsUnknown(id)) return unk_surface;
  std::string piece = sp.IdToPiece(id);
  if (sp.IsByte(id) && piece.size() == 6 && hex_digit(piece[3]) >= 0 && hex_digit(piece[4]) >= 0)
    return std::string(1, (char)(hex_digit(piece[3]) * 16 + hex_digit(piece[4])));
  static const char kSpaceMarker[] = "\xE2\x96\x81"; // U+2581
  std::string out;
  for (size_t i = 0; i < piece.size();) {
    if (piece.compare(i, 3, kSpaceMarker) == 0) {
      out += ' ';
      i += 3;
    } else {
      out += piece[i++];
    }
  }
  return out;
}

} // namespace

extern "C" SpModel *sp_model_open(const char *path, char *err, size_t errlen) {
  SpModel *m = nullptr;
  try {
    m = new SpModel();
    sentencepiece::util::Status st = m->processor.Load(path);
    if (!st.ok()) {
      set_error(err, errlen, "cannot load SentencePiece model '%s': %s", path, st.ToString().c_str());
      delete m;
      return nullptr;
    }
    std::string unk_surface = " \xE2\x81\x87 "; // TrainerSpec's default
    read_model_settings(m->processor.serialized_model_proto(), &m->strips_first_space, &unk_surface);
    int n = m->processor.GetPieceSize();
    m->offsets.reserve((size_t)n + 1);
    for (int id = 0; id < n; id++) {
      m->offsets.push_back(m->pieces.size());
      m->pieces += streaming_bytes(m->processor, id, unk_surface);
    }
    m->offsets.push_back(m->pieces.size());
    return m;
  } catch (const std::exception &e) {
    set_error(err, errlen, "cannot load SentencePiece model '%s': %s", path, e.what());
  } catch (...) {
    set_error(err, errlen, "cannot load SentencePiece model '%s': unknown error", path);
  }
  delete m;
  return nullptr;
}

extern "C" void sp_model_free(SpModel *m) { delete m; }

extern "C" bool sp_model_encode(const SpModel *m, const char *text, size_t len, int32_t **ids, size_t *n, char *err,
                                size_t errlen) {
  *ids = nullptr;
  *n = 0;
  try {
    std::vector<int> out;
    sentencepiece::util::Status st = m->processor.Encode(absl::string_view(text, len), &out);
    if (!st.ok()) {
      set_error(err, errlen, "SentencePiece encode failed: %s", st.ToString().c_str());
      return false;
    }
    if (out.empty()) return true;
    int32_t *a = (int32_t *)malloc(out.size() * sizeof *a);
    if (!a) throw std::bad_alloc();
    for (size_t i = 0; i < out.size(); i++) a[i] = (int32_t)out[i];
    *ids = a;
    *n = out.size();
    return true;
  } catch (const std::exception &e) {
    set_error(err, errlen, "SentencePiece encode failed: %s", e.what());
  } catch (...) {
    set_error(err, errlen, "SentencePiece encode failed: unknown error");
  }
  return false;
}

extern "C" bool sp_model_decode(const SpModel *m, const int32_t *ids, size_t n, char **text, size_t *len, char *err,
                                size_t errlen) {
  *text = nullptr;
  *len = 0;
  try {
    int vocab = m->processor.GetPieceSize();
    std::vector<int> in(n);
    for (size_t i = 0; i < n; i++) {
      if (ids[i] < 0 || ids[i] >= vocab) {
        set_error(err, errlen, "token id %ld is out of range (vocabulary of %d)", (long)ids[i], vocab);
        return false;
      }
      in[i] = ids[i];
    }
    std::string out;
    sentencepiece::util::Status st = m->processor.Decode(in, &out);
    if (!st.ok()) {
      set_error(err, errlen, "SentencePiece decode failed: %s", st.ToString().c_str());
      return false;
    }
    char *s = (char *)malloc(out.size() + 1);
    if (!s) throw std::bad_alloc();
    memcpy(s, out.data(), out.size());
    s[out.size()] = '\0';
    *text = s;
    *len = out.size();
    return true;
  } catch (const std::exception &e) {
    set_error(err, errlen, "SentencePiece decode failed: %s", e.what());
  } catch (...) {
    set_error(err, errlen, "SentencePiece decode failed: unknown error");
  }
  return false;
}

extern "C" const char *sp_model_piece(const SpModel *m, int32_t id, size_t *len) {
  if (id < 0 || (size_t)id + 1 >= m->offsets.size()) return nullptr;
  *len = m->offsets[(size_t)id + 1] - m->offsets[(size_t)id];
  return m->pieces.data() + m->offsets[(size_t)id];
}

extern "C" const char *sp_model_piece_at_start(const SpModel *m, int32_t id, size_t *len) {
  const char *piece = sp_model_piece(m, id, len);
  if (!piece || !m->strips_first_space || *len == 0 || piece[0] != ' ') return piece;
  // Only normal and user-defined pieces: the unknown piece's surface and a
  // byte piece <0x20> keep their space.
  const sentencepiece::SentencePieceProcessor &sp = m->processor;
  if (sp.IsUnknown(id) || sp.IsByte(id)) return piece;
  (*len)--;
  return piece + 1;
}

extern "C" bool sp_model_is_control(const SpModel *m, int32_t id) {
  return id >= 0 && (size_t)id + 1 < m->offsets.size() && m->processor.IsControl(id);
}

extern "C" uint32_t sp_model_vocab_size(const SpModel *m) { return (uint32_t)(m->offsets.size() - 1); }

// libsentencepiece's ids are -1 when the model has none, as ours are.
extern "C" int32_t sp_model_bos(const SpModel *m) { return m->processor.bos_id(); }
extern "C" int32_t sp_model_eos(const SpModel *m) { return m->processor.eos_id(); }
extern "C" int32_t sp_model_unk(const SpModel *m) { return m->processor.unk_id(); }
