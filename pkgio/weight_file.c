/*
 * Weight-file header import: safetensors and numpy .npy.
 *
 * Both formats are a small header followed by raw little-endian data. The
 * parsers here read only the header, validate every number in it against the
 * size of the buffer (offsets, lengths, element counts, byte counts) and
 * describe where the tensor's data lies; they never read past the buffer and
 * never trust a length before checking it. Weight files come from anywhere,
 * so a hostile or truncated file must produce a clear message, not a crash.
 * The probe functions memory-map a file read-only and run the same parsers.
 */
#include "orion/weight_file.h"

#include "orion/support.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- element types ---------------------------------------------------- */

/* Weight files hold the dtypes with a safetensors spelling (orion/dtype.h). */
const char *weight_file_dtype_name(OrionDType t) {
  const char *name = orion_dtype_safetensors_name(t);
  return name ? name : "<invalid>";
}

size_t weight_file_dtype_size(OrionDType t) { return orion_dtype_safetensors_name(t) ? orion_dtype_size(t) : 0; }

/* ---- shared helpers ----------------------------------------------------- */

/* Largest dimension or offset accepted: JSON numbers are doubles, exact only
 * up to 2^53, and no real file comes near it. */
#define MAX_EXACT_INTEGER (1ull << 53)

/* Largest safetensors JSON header (the limit of the format's reference reader). */
#define MAX_SAFETENSORS_HEADER 100000000ull

/* Tensor names longer than this are shortened in messages. */
#define MAX_SHOWN_NAME 64

static bool fail(char *err, size_t errlen, const char *fmt, ...) ORION_PRINTF(3, 4);

/* Writes a message and returns false, so that "return fail(...)" reads well. */
static bool fail(char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return false;
}

/* Copies a name from a file into buf for a message: names are untrusted bytes,
 * so control characters become '?' and long names are cut with "...". */
static const char *shown(char *buf, size_t buflen, const char *s, size_t n) {
  size_t o = 0;
  for (size_t i = 0; i < n && o + 4 < buflen; i++) {
    unsigned char c = (unsigned char)s[i];
    if (i == MAX_SHOWN_NAME) {
      memcpy(buf + o, "...", 3);
      o += 3;
      break;
    }
    buf[o++] = (c >= 0x20 && c != 0x7f) ? (char)c : '?';
  }
  buf[o] = 0;
  return buf;
}

#define SHOWN_BUF (MAX_SHOWN_NAME + 8)

static uint64_t read_le(const uint8_t *p, int nbytes) {
  uint64_t v = 0;
  for (int i = nbytes - 1; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

/* Element count of a shape, or false if the product does not fit in 64 bits. */
static bool count_elements(const int64_t *dims, uint32_t rank, uint64_t *count) {
  uint64_t n = 1;
  for (uint32_t i = 0; i < rank; i++) {
    uint64_t d = (uint64_t)dims[i];
    if (d != 0 && n > UINT64_MAX / d) return false;
    n *= d;
  }
  *count = n;
  return true;
}

/* ---- safetensors -------------------------------------------------------- */

static bool dtype_from_safetensors_name(const char *s, OrionDType *out) {
  *out = orion_dtype_from_safetensors_name(s);
  return *out != ORION_DT_NONE;
}

/* A JSON number that is a non-negative integer exactly representable as a double. */
static bool json_exact_uint(const cJSON *item, uint64_t *out) {
  if (!cJSON_IsNumber(item)) return false;
  double d = item->valuedouble;
  if (!(d >= 0 && d <= (double)MAX_EXACT_INTEGER)) return false; /* also rejects nan */
  uint64_t u = (uint64_t)d;
  if ((double)u != d) return false; /* fractional */
  *out = u;
  return true;
}

/* The shortest text that reads back as the same double. */
static void format_double(double v, char *buf, size_t buflen) {
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, buflen, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) return;
  }
}

static const char *json_kind_phrase(const cJSON *item) {
  if (cJSON_IsString(item)) return "a string";
  if (cJSON_IsArray(item)) return "an array";
  if (cJSON_IsObject(item)) return "an object";
  if (cJSON_IsBool(item)) return "a boolean";
  return "null";
}

/* Explains why a shape entry is not a usable dimension. */
static bool fail_dimension(const cJSON *dim, const char *k, int axis, char *err, size_t errlen) {
  if (!cJSON_IsNumber(dim))
    return fail(err, errlen, "tensor '%s' has %s at axis %d of its shape (expected a non-negative integer)", k,
                json_kind_phrase(dim), axis);
  char num[40];
  double v = dim->valuedouble;
  format_double(v, num, sizeof num);
  if (v > (double)MAX_EXACT_INTEGER)
    return fail(err, errlen, "tensor '%s' has dimension %s at axis %d, above the limit of 2^53", k, num, axis);
  return fail(err, errlen, "tensor '%s' has invalid dimension %s at axis %d (expected a non-negative integer)", k, num,
              axis);
}

/* Reports a key that is not in the header, naming the tensors that are when
 * there are few enough to list (the usual cause is a typo or a prefix). */
static bool fail_missing_key(const cJSON *root, const char *key, char *err, size_t errlen) {
  enum { MAX_LISTED = 4 };
  const char *names[MAX_LISTED];
  uint32_t ntensors = 0;
  for (const cJSON *e = root->child; e; e = e->next) {
    if (strcmp(e->string, "__metadata__") == 0) continue;
    if (ntensors < MAX_LISTED) names[ntensors] = e->string;
    ntensors++;
  }
  char k[SHOWN_BUF];
  shown(k, sizeof k, key, strlen(key));
  if (ntensors == 0) return fail(err, errlen, "no tensor named '%s' in the file (it holds no tensors)", k);
  if (ntensors > MAX_LISTED)
    return fail(err, errlen, "no tensor named '%s' in the file (it holds %u tensors)", k, ntensors);
  char list[MAX_LISTED * (SHOWN_BUF + 4)] = "";
  size_t used = 0;
  for (uint32_t i = 0; i < ntensors; i++) {
    char n[SHOWN_BUF];
    shown(n, sizeof n, names[i], strlen(names[i]));
    int w = snprintf(list + used, sizeof list - used, "%s'%s'", i ? ", " : "", n);
    if (w < 0 || (size_t)w >= sizeof list - used) break;
    used += (size_t)w;
  }
  return fail(err, errlen, "no tensor named '%s' in the file (it holds %s)", k, list);
}

/* Validates one tensor entry {"dtype", "shape", "data_offsets"} against the
 * data section, which is data_len bytes starting at data_start. */
static bool parse_tensor_entry(const cJSON *entry, const char *k, uint64_t data_start, uint64_t data_len,
                               WeightInfo *out, char *err, size_t errlen) {
  if (!cJSON_IsObject(entry)) return fail(err, errlen, "header entry of tensor '%s' is not an object", k);

  const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(entry, "dtype");
  const cJSON *shape = cJSON_GetObjectItemCaseSensitive(entry, "shape");
  const cJSON *offsets = cJSON_GetObjectItemCaseSensitive(entry, "data_offsets");
  if (!cJSON_IsString(dtype)) return fail(err, errlen, "tensor '%s' has no \"dtype\" string", k);
  if (!cJSON_IsArray(shape)) return fail(err, errlen, "tensor '%s' has no \"shape\" array", k);
  if (!cJSON_IsArray(offsets)) return fail(err, errlen, "tensor '%s' has no \"data_offsets\" array", k);

  if (!dtype_from_safetensors_name(dtype->valuestring, &out->dtype)) {
    char d[SHOWN_BUF];
    shown(d, sizeof d, dtype->valuestring, strlen(dtype->valuestring));
    return fail(err, errlen, "tensor '%s' has unsupported dtype '%s'", k, d);
  }

  int rank = cJSON_GetArraySize(shape);
  if (rank > ORION_MAX_RANK)
    return fail(err, errlen, "tensor '%s' has rank %d, more than the limit of %d", k, rank, ORION_MAX_RANK);
  out->rank = (uint32_t)rank;
  int axis = 0;
  for (const cJSON *d = shape->child; d; d = d->next, axis++) {
    uint64_t v;
    if (!json_exact_uint(d, &v)) return fail_dimension(d, k, axis, err, errlen);
    out->dims[axis] = (int64_t)v;
  }
  for (int i = rank; i < ORION_MAX_RANK; i++) out->dims[i] = 0;

  uint64_t elements;
  if (!count_elements(out->dims, out->rank, &elements))
    return fail(err, errlen, "element count of tensor '%s' overflows", k);

  uint64_t begin, end;
  if (cJSON_GetArraySize(offsets) != 2 || !json_exact_uint(offsets->child, &begin) ||
      !json_exact_uint(offsets->child->next, &end))
    return fail(err, errlen, "tensor '%s' needs \"data_offsets\" of two non-negative integers", k);
  if (begin > end)
    return fail(err, errlen, "tensor '%s' has data_offsets [%llu, %llu] that end before they begin", k,
                (unsigned long long)begin, (unsigned long long)end);
  if (end > data_len)
    return fail(err, errlen, "tensor '%s' has data_offsets [%llu, %llu] past the end of the data (%llu bytes)", k,
                (unsigned long long)begin, (unsigned long long)end, (unsigned long long)data_len);

  size_t esize = orion_dtype_size(out->dtype);
  uint64_t nbytes = end - begin;
  if (elements > UINT64_MAX / esize || elements * esize != nbytes)
    return fail(err, errlen, "tensor '%s' has %llu bytes of data but its shape holds %llu elements of %zu bytes", k,
                (unsigned long long)nbytes, (unsigned long long)elements, esize);

  out->data_offset = data_start + begin;
  out->nbytes = nbytes;
  return true;
}

bool weights_parse_safetensors(const uint8_t *data, size_t len, const char *key, WeightInfo *out, char *err,
                               size_t errlen) {
  memset(out, 0, sizeof *out);
  if (len < 8) return fail(err, errlen, "file too short for a safetensors header (%zu bytes)", len);
  uint64_t hlen = read_le(data, 8);
  if (hlen > len - 8)
    return fail(err, errlen, "safetensors header length %llu exceeds the file size (%zu bytes)",
                (unsigned long long)hlen, len);
  if (hlen > MAX_SAFETENSORS_HEADER)
    return fail(err, errlen, "safetensors header length %llu exceeds the limit of %llu bytes",
                (unsigned long long)hlen, MAX_SAFETENSORS_HEADER);

  const char *text = (const char *)data + 8;
  /* Raw control bytes are invalid anywhere in JSON; cJSON would accept some of
   * them inside strings, and a NUL would silently cut a tensor name short. */
  for (size_t i = 0; i < hlen; i++) {
    unsigned char c = (unsigned char)text[i];
    if (c < 0x20 && c != ' ' && c != '\t' && c != '\n' && c != '\r')
      return fail(err, errlen, "safetensors header has a control character (0x%02x) at byte %zu", c, 8 + i);
  }

  /* cJSON gets a NUL-padded copy: older releases can read a byte past the
   * given length on some truncated inputs, and here that byte is ours. */
  char *copy = xmalloc((size_t)hlen + 8);
  memcpy(copy, text, (size_t)hlen);
  memset(copy + hlen, 0, 8);
  const char *parse_end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(copy, (size_t)hlen, &parse_end, false);
  if (!root) {
    size_t at = parse_end ? (size_t)(parse_end - copy) : 0;
    free(copy);
    return fail(err, errlen, "safetensors header is not valid JSON (error near byte %zu)", 8 + at);
  }
  for (const char *p = parse_end; p < copy + hlen; p++)
    if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
      cJSON_Delete(root);
      size_t at = (size_t)(p - copy);
      free(copy);
      return fail(err, errlen, "safetensors header has trailing bytes after the JSON (at byte %zu)", 8 + at);
    }
  free(copy);

  bool ok = false;
  if (!cJSON_IsObject(root)) {
    ok = fail(err, errlen, "safetensors header is not a JSON object");
    goto done;
  }
  const cJSON *entry = NULL;
  if (strcmp(key, "__metadata__") != 0)
    for (const cJSON *e = root->child; e; e = e->next) {
      if (strcmp(e->string, key) != 0) continue;
      if (entry) {
        char k[SHOWN_BUF];
        ok = fail(err, errlen, "tensor '%s' appears twice in the header", shown(k, sizeof k, key, strlen(key)));
        goto done;
      }
      entry = e;
    }
  if (!entry) {
    ok = fail_missing_key(root, key, err, errlen);
    goto done;
  }
  char k[SHOWN_BUF];
  shown(k, sizeof k, key, strlen(key));
  uint64_t data_start = 8 + hlen;
  ok = parse_tensor_entry(entry, k, data_start, (uint64_t)len - data_start, out, err, errlen);
done:
  cJSON_Delete(root);
  if (!ok) memset(out, 0, sizeof *out);
  return ok;
}

/* ---- npy ---------------------------------------------------------------- */

/*
 * The .npy header is the repr() of a Python dict, e.g.
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
 * padded with spaces and ended by a newline. Only this form is accepted:
 * string keys, a string descr, True/False, and a tuple of integers.
 */

typedef struct NpyCursor {
  const uint8_t *p, *end;
  const uint8_t *file; /* for byte positions in messages */
  char *err;
  size_t errlen;
} NpyCursor;

typedef struct NpyHeader {
  char descr[16];
  bool fortran_order;
  uint32_t rank;
  int64_t dims[ORION_MAX_RANK];
  bool seen_descr, seen_fortran, seen_shape;
} NpyHeader;

static size_t npy_pos(const NpyCursor *c) { return (size_t)(c->p - c->file); }

static bool npy_malformed(NpyCursor *c, const char *expected) {
  return fail(c->err, c->errlen, "malformed .npy header at byte %zu: expected %s", npy_pos(c), expected);
}

static void npy_skip_space(NpyCursor *c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static bool npy_accept(NpyCursor *c, char ch) {
  if (c->p < c->end && *c->p == (uint8_t)ch) {
    c->p++;
    return true;
  }
  return false;
}

/* A quoted string without escapes (none of the keys or descrs need one). */
static bool npy_string(NpyCursor *c, char *buf, size_t buflen) {
  if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return npy_malformed(c, "a quoted string");
  uint8_t quote = *c->p++;
  size_t n = 0;
  while (c->p < c->end && *c->p != quote) {
    if (*c->p == '\\' || *c->p < 0x20) return npy_malformed(c, "a plain quoted string");
    if (n + 1 >= buflen) return fail(c->err, c->errlen, "string too long in .npy header at byte %zu", npy_pos(c));
    buf[n++] = (char)*c->p++;
  }
  if (c->p >= c->end) return npy_malformed(c, "a closing quote");
  c->p++;
  buf[n] = 0;
  return true;
}

static bool npy_is_word_char(uint8_t ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_';
}

static bool npy_bool(NpyCursor *c, bool *out) {
  static const char *const words[] = {"False", "True"};
  for (int v = 0; v < 2; v++) {
    size_t n = strlen(words[v]);
    if ((size_t)(c->end - c->p) >= n && memcmp(c->p, words[v], n) == 0 &&
        (c->p + n == c->end || !npy_is_word_char(c->p[n]))) {
      c->p += n;
      *out = v == 1;
      return true;
    }
  }
  return npy_malformed(c, "True or False");
}

/* A dimension: decimal digits, with the 'L' suffix that Python 2 wrote for longs. */
static bool npy_dim(NpyCursor *c, int64_t *out) {
  if (c->p < c->end && *c->p == '-')
    return fail(c->err, c->errlen, "negative dimension in .npy shape at byte %zu", npy_pos(c));
  if (c->p >= c->end || *c->p < '0' || *c->p > '9') return npy_malformed(c, "a dimension");
  uint64_t v = 0;
  size_t start = npy_pos(c);
  while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
    v = v * 10 + (uint64_t)(*c->p++ - '0');
    if (v > MAX_EXACT_INTEGER) return fail(c->err, c->errlen, "dimension too large in .npy shape at byte %zu", start);
  }
  npy_accept(c, 'L');
  if (c->p < c->end && npy_is_word_char(*c->p)) return npy_malformed(c, "',' or ')' after a dimension");
  *out = (int64_t)v;
  return true;
}

/* A tuple of dimensions: (), (n,), (n, m), (n, m,) ... */
static bool npy_shape(NpyCursor *c, NpyHeader *h) {
  if (!npy_accept(c, '(')) return npy_malformed(c, "a shape tuple");
  npy_skip_space(c);
  h->rank = 0;
  bool trailing_comma = false;
  while (!npy_accept(c, ')')) {
    if (h->rank == ORION_MAX_RANK)
      return fail(c->err, c->errlen, ".npy array has rank above the limit of %d", ORION_MAX_RANK);
    if (!npy_dim(c, &h->dims[h->rank])) return false;
    h->rank++;
    npy_skip_space(c);
    trailing_comma = npy_accept(c, ',');
    npy_skip_space(c);
    if (!trailing_comma && !(c->p < c->end && *c->p == ')')) return npy_malformed(c, "',' or ')' in the shape");
  }
  /* In Python "(5)" is the integer 5, not a tuple; numpy would reject it. */
  if (h->rank == 1 && !trailing_comma) return npy_malformed(c, "a ',' after the only dimension");
  return true;
}

static bool npy_entry(NpyCursor *c, NpyHeader *h) {
  char key[32];
  size_t key_pos = npy_pos(c);
  if (!npy_string(c, key, sizeof key)) return false;
  npy_skip_space(c);
  if (!npy_accept(c, ':')) return npy_malformed(c, "':' after a key");
  npy_skip_space(c);
  bool *seen;
  if (strcmp(key, "descr") == 0) seen = &h->seen_descr;
  else if (strcmp(key, "fortran_order") == 0) seen = &h->seen_fortran;
  else if (strcmp(key, "shape") == 0) seen = &h->seen_shape;
  else {
    char k[SHOWN_BUF];
    return fail(c->err, c->errlen, "unexpected key '%s' in .npy header at byte %zu", shown(k, sizeof k, key, strlen(key)),
                key_pos);
  }
  if (*seen) return fail(c->err, c->errlen, "duplicate key '%s' in .npy header at byte %zu", key, key_pos);
  *seen = true;
  if (seen == &h->seen_descr) {
    if (c->p < c->end && *c->p == '[') return fail(c->err, c->errlen, "structured .npy dtypes are not supported");
    return npy_string(c, h->descr, sizeof h->descr);
  }
  if (seen == &h->seen_fortran) return npy_bool(c, &h->fortran_order);
  return npy_shape(c, h);
}

static bool npy_dict(NpyCursor *c, NpyHeader *h) {
  npy_skip_space(c);
  if (!npy_accept(c, '{')) return npy_malformed(c, "'{'");
  npy_skip_space(c);
  while (!npy_accept(c, '}')) {
    if (!npy_entry(c, h)) return false;
    npy_skip_space(c);
    bool comma = npy_accept(c, ',');
    npy_skip_space(c);
    if (!comma && !(c->p < c->end && *c->p == '}')) return npy_malformed(c, "',' or '}'");
  }
  npy_skip_space(c);
  if (c->p != c->end) return fail(c->err, c->errlen, "unexpected bytes after the .npy header dict at byte %zu", npy_pos(c));
  if (!h->seen_descr) return fail(c->err, c->errlen, ".npy header has no 'descr'");
  if (!h->seen_fortran) return fail(c->err, c->errlen, ".npy header has no 'fortran_order'");
  if (!h->seen_shape) return fail(c->err, c->errlen, ".npy header has no 'shape'");
  return true;
}

/* numpy's integer type codes beyond the weight files' ones (training token
 * files are written as uint16, uint32 or int64 as often as int32). */
static OrionDType npy_integer_code(const char *code) {
  static const struct {
    const char *code;
    OrionDType t;
  } ints[] = {{"i1", ORION_DT_INT8},  {"u1", ORION_DT_UINT8},  {"i2", ORION_DT_INT16}, {"u2", ORION_DT_UINT16},
              {"i4", ORION_DT_INT32}, {"u4", ORION_DT_UINT32}, {"i8", ORION_DT_INT64}, {"u8", ORION_DT_UINT64}};
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
    if (strcmp(code, ints[i].code) == 0) return ints[i].t;
  return ORION_DT_NONE;
}

/* Maps a numpy type string ("<f4", "|u1", ...) to a file dtype: a weight
 * file's dtype, or with integers_only any integer dtype and nothing else.
 * The first character is the byte order; for one-byte types any order means
 * the same. */
static bool npy_dtype(const char *descr, bool integers_only, OrionDType *out, char *err, size_t errlen) {
  char order = descr[0];
  bool known_order = order == '<' || order == '>' || order == '|' || order == '=';
  OrionDType t = !known_order     ? ORION_DT_NONE
                 : integers_only ? npy_integer_code(descr + 1)
                                 : orion_dtype_from_npy_code(descr + 1);
  if (t != ORION_DT_NONE) {
    if (orion_dtype_size(t) == 1) {
      *out = t;
      return true;
    }
    if (order == '>') return fail(err, errlen, "big-endian .npy data is not supported");
    /* '|' means "no byte order", which numpy never writes for wider types,
     * and '=' (native) says nothing about the machine that wrote the file. */
    if (order == '<') {
      *out = t;
      return true;
    }
  }
  char d[SHOWN_BUF];
  return fail(err, errlen, "unsupported .npy dtype '%s'", shown(d, sizeof d, descr, strlen(descr)));
}

static bool parse_npy(const uint8_t *data, size_t len, bool integers_only, WeightInfo *out, char *err, size_t errlen) {
  static const uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  memset(out, 0, sizeof *out);
  if (len == 0) return fail(err, errlen, "not a .npy file (it is empty)");
  if (memcmp(data, magic, len < sizeof magic ? len : sizeof magic) != 0)
    return fail(err, errlen, "not a .npy file (bad magic)");
  if (len < 8) return fail(err, errlen, "truncated .npy header");
  unsigned major = data[6], minor = data[7];
  int len_bytes;
  if (major == 1 && minor == 0) len_bytes = 2;
  else if ((major == 2 || major == 3) && minor == 0) len_bytes = 4; /* 3.0 differs only in allowing utf-8 */
  else return fail(err, errlen, "unsupported .npy version %u.%u", major, minor);
  size_t preamble = 8 + (size_t)len_bytes;
  if (len < preamble) return fail(err, errlen, "truncated .npy header");
  uint64_t hlen = read_le(data + 8, len_bytes);
  if (hlen > len - preamble)
    return fail(err, errlen, "truncated .npy header: it claims %llu bytes but the file has %zu after the preamble",
                (unsigned long long)hlen, len - preamble);

  NpyHeader h;
  memset(&h, 0, sizeof h);
  NpyCursor c = {data + preamble, data + preamble + hlen, data, err, errlen};
  if (!npy_dict(&c, &h)) return false;
  if (!npy_dtype(h.descr, integers_only, &out->dtype, err, errlen)) return false;

  /* Column-major order changes the layout only when two axes have extent > 1. */
  uint32_t wide_axes = 0;
  for (uint32_t i = 0; i < h.rank; i++) wide_axes += h.dims[i] > 1;
  if (h.fortran_order && wide_axes > 1) return fail(err, errlen, "fortran-order .npy data is not supported");

  uint64_t elements;
  if (!count_elements(h.dims, h.rank, &elements)) return fail(err, errlen, "element count of .npy array overflows");
  size_t esize = orion_dtype_size(out->dtype);
  if (elements > UINT64_MAX / esize) return fail(err, errlen, "element count of .npy array overflows");
  uint64_t nbytes = elements * esize;
  uint64_t data_start = preamble + hlen;
  uint64_t available = (uint64_t)len - data_start;
  if (available < nbytes)
    return fail(err, errlen, ".npy data is truncated: the shape needs %llu bytes but the file has %llu",
                (unsigned long long)nbytes, (unsigned long long)available);
  if (available > nbytes)
    return fail(err, errlen, ".npy file has %llu unexpected bytes after the data",
                (unsigned long long)(available - nbytes));

  out->rank = h.rank;
  memcpy(out->dims, h.dims, sizeof out->dims);
  out->data_offset = data_start;
  out->nbytes = nbytes;
  return true;
}

bool weights_parse_npy(const uint8_t *data, size_t len, WeightInfo *out, char *err, size_t errlen) {
  return parse_npy(data, len, false, out, err, errlen);
}

bool weights_parse_npy_integers(const uint8_t *data, size_t len, WeightInfo *out, char *err, size_t errlen) {
  return parse_npy(data, len, true, out, err, errlen);
}

/* ---- files -------------------------------------------------------------- */

typedef struct MappedFile {
  const uint8_t *data;
  size_t len;
  void *map; /* NULL for an empty file, which mmap cannot map */
} MappedFile;

static bool map_file(const char *path, MappedFile *mf, char *err, size_t errlen) {
  static const uint8_t empty[1];
  /* O_NONBLOCK: opening a FIFO must not hang the compiler; regular files ignore it. */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return fail(err, errlen, "cannot open '%s': %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return fail(err, errlen, "cannot stat '%s': %s", path, strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return fail(err, errlen, "'%s' is not a regular file", path);
  }
  if ((uint64_t)st.st_size > SIZE_MAX) {
    close(fd);
    return fail(err, errlen, "'%s' is too large to map", path);
  }
  mf->len = (size_t)st.st_size;
  mf->map = NULL;
  mf->data = empty;
  if (mf->len > 0) {
    void *p = mmap(NULL, mf->len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      close(fd);
      return fail(err, errlen, "cannot map '%s': %s", path, strerror(e));
    }
    mf->map = p;
    mf->data = p;
  }
  close(fd); /* the mapping stays valid */
  return true;
}

static void unmap_file(MappedFile *mf) {
  if (mf->map) munmap(mf->map, mf->len);
}

bool weights_probe_safetensors(const char *path, const char *key, WeightInfo *out, char *err, size_t errlen) {
  MappedFile mf = {.data = NULL};
  memset(out, 0, sizeof *out);
  if (!map_file(path, &mf, err, errlen)) return false;
  bool ok = weights_parse_safetensors(mf.data, mf.len, key, out, err, errlen);
  unmap_file(&mf);
  return ok;
}

bool weights_probe_npy(const char *path, WeightInfo *out, char *err, size_t errlen) {
  MappedFile mf = {.data = NULL};
  memset(out, 0, sizeof *out);
  if (!map_file(path, &mf, err, errlen)) return false;
  bool ok = weights_parse_npy(mf.data, mf.len, out, err, errlen);
  unmap_file(&mf);
  return ok;
}
