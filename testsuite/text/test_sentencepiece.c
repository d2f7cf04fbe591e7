/*
 * Tests of the SentencePiece kind (runtime/text/sentencepiece_kind.h) against
 * what Debian's python3-sentencepiece gives on the same models and texts
 * (testsuite/text/fixtures/sp_expected.json, made with the two committed
 * models by testsuite/text/make_sp_fixture.py): every case's ids and decode
 * exactly, every id's streaming bytes, the special ids; then how the pieces
 * concatenate to decode's text, and each error's exact message.
 *
 * Needs ORION_SOURCE_ROOT (meson sets it).
 */
#include "sentencepiece_kind.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orion/support.h"

static char *fixture_path(const char *name) {
  const char *root = getenv("ORION_SOURCE_ROOT");
  cr_assert_not_null(root, "ORION_SOURCE_ROOT is not set");
  StrBuf sb = {0};
  sb_printf(&sb, "%s/testsuite/text/fixtures/%s", root, name);
  return sb.data;
}

static cJSON *load_expected(void) {
  char *path = fixture_path("sp_expected.json");
  char *text;
  size_t len;
  const char *err;
  cr_assert(read_file(path, 64u << 20, &text, &len, &err), "cannot read %s: %s", path, err);
  cJSON *root = cJSON_ParseWithLength(text, len);
  cr_assert_not_null(root, "%s is not JSON", path);
  free(text);
  free(path);
  return root;
}

/* Bytes of a hex string (malloc'd, NUL terminated for printing). */
static char *unhex(const char *hex, size_t *len) {
  size_t n = strlen(hex) / 2;
  char *out = xmalloc(n + 1);
  for (size_t i = 0; i < n; i++) {
    unsigned v;
    cr_assert_eq(sscanf(hex + 2 * i, "%2x", &v), 1);
    out[i] = (char)v;
  }
  out[n] = '\0';
  *len = n;
  return out;
}

static SpModel *open_model(const cJSON *model) {
  char *path = fixture_path(cJSON_GetObjectItem(model, "model")->valuestring);
  char err[512] = "";
  SpModel *m = sp_model_open(path, err, sizeof err);
  cr_assert_not_null(m, "%s", err);
  free(path);
  return m;
}

static int json_int(const cJSON *obj, const char *key) { return cJSON_GetObjectItem(obj, key)->valueint; }

static bool valid_utf8(const char *s, size_t n) {
  for (size_t i = 0; i < n;) {
    unsigned char c = (unsigned char)s[i];
    size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (k == 0 || i + k > n) return false;
    for (size_t j = 1; j < k; j++)
      if (((unsigned char)s[i + j] & 0xC0) != 0x80) return false;
    if (k == 2 && c < 0xC2) return false; /* overlong */
    i += k;
  }
  return true;
}

/* What a streamer writes for ids: sp_model_piece_at_start until the first
 * piece that is not a control piece, sp_model_piece after it. */
static void join_pieces(const SpModel *m, const int32_t *ids, size_t n, StrBuf *out) {
  bool at_start = true;
  for (size_t i = 0; i < n; i++) {
    size_t len;
    const char *piece = at_start ? sp_model_piece_at_start(m, ids[i], &len) : sp_model_piece(m, ids[i], &len);
    cr_assert_not_null(piece);
    sb_putn(out, piece, len);
    if (!sp_model_is_control(m, ids[i])) at_start = false;
  }
}

Test(sentencepiece, special_ids_and_pieces_agree_with_python) {
  cJSON *root = load_expected();
  const cJSON *model;
  int nmodels = 0;
  cJSON_ArrayForEach(model, cJSON_GetObjectItem(root, "models")) {
    SpModel *m = open_model(model);
    const char *name = cJSON_GetObjectItem(model, "name")->valuestring;
    cr_assert_eq(sp_model_vocab_size(m), (uint32_t)json_int(model, "vocab_size"), "%s", name);
    cr_assert_eq(sp_model_bos(m), json_int(model, "bos"), "%s", name);
    cr_assert_eq(sp_model_eos(m), json_int(model, "eos"), "%s", name);
    cr_assert_eq(sp_model_unk(m), json_int(model, "unk"), "%s", name);
    int id = 0;
    const cJSON *hex;
    cJSON_ArrayForEach(hex, cJSON_GetObjectItem(model, "pieces_hex")) {
      size_t want_len, len = 99;
      char *want = unhex(hex->valuestring, &want_len);
      const char *got = sp_model_piece(m, id, &len);
      cr_assert_not_null(got, "%s id %d", name, id);
      cr_assert(len == want_len && memcmp(got, want, len) == 0, "%s id %d: piece '%.*s', python's rule gives '%s'",
                name, id, (int)len, got, want);
      free(want);
      id++;
    }
    cr_assert_eq((uint32_t)id, sp_model_vocab_size(m));
    size_t len;
    cr_assert_null(sp_model_piece(m, -1, &len));
    cr_assert_null(sp_model_piece(m, id, &len));
    sp_model_free(m);
    nmodels++;
  }
  cr_assert_eq(nmodels, 2);
  cJSON_Delete(root);
}

Test(sentencepiece, encode_and_decode_agree_with_python) {
  cJSON *root = load_expected();
  const cJSON *model;
  int ncases = 0;
  cJSON_ArrayForEach(model, cJSON_GetObjectItem(root, "models")) {
    SpModel *m = open_model(model);
    const char *name = cJSON_GetObjectItem(model, "name")->valuestring;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(model, "cases")) {
      const char *label = cJSON_GetObjectItem(c, "label")->valuestring;
      size_t text_len, want_text_len;
      char *text = unhex(cJSON_GetObjectItem(c, "text_hex")->valuestring, &text_len);
      char *want_text = unhex(cJSON_GetObjectItem(c, "decoded_hex")->valuestring, &want_text_len);
      const cJSON *want_ids = cJSON_GetObjectItem(c, "ids");
      char err[512] = "";
      int32_t *ids;
      size_t n;
      cr_assert(sp_model_encode(m, text, text_len, &ids, &n, err, sizeof err), "%s %s: %s", name, label, err);
      cr_assert_eq(n, (size_t)cJSON_GetArraySize(want_ids), "%s %s: %zu ids, python gives %d", name, label, n,
                   cJSON_GetArraySize(want_ids));
      for (size_t i = 0; i < n; i++)
        cr_assert_eq(ids[i], cJSON_GetArrayItem(want_ids, (int)i)->valueint, "%s %s: id %zu is %d, python gives %d",
                     name, label, i, ids[i], cJSON_GetArrayItem(want_ids, (int)i)->valueint);
      char *got;
      size_t got_len;
      cr_assert(sp_model_decode(m, ids, n, &got, &got_len, err, sizeof err), "%s %s: %s", name, label, err);
      cr_assert(got_len == want_text_len && memcmp(got, want_text, got_len) == 0, "%s %s: decode '%s', python '%s'",
                name, label, got, want_text);
      cr_assert_eq(got[got_len], '\0');

      /* The streaming pieces concatenate to decode's text when their
       * bytes are UTF-8 (decode writes U+FFFD for byte pieces that are not). */
      StrBuf joined = {0};
      join_pieces(m, ids, n, &joined);
      if (valid_utf8(joined.data ? joined.data : "", joined.len))
        cr_assert(joined.len == got_len && memcmp(joined.data ? joined.data : "", got, got_len) == 0,
                  "%s %s: pieces join to '%.*s', decode gives '%s'", name, label, (int)joined.len,
                  joined.data ? joined.data : "", got);
      free(joined.data);
      free(got);
      free(ids);
      free(text);
      free(want_text);
      ncases++;
    }
    sp_model_free(m);
  }
  cr_assert_gt(ncases, 60);
  cJSON_Delete(root);
}

/* The streaming rule against libsentencepiece's decode itself, on seeded
 * random id sequences: control, unknown, normal and ASCII byte pieces in
 * every order (bos first, the unknown piece first, a lone '▁' first, a byte
 * <0x20> first, ...). */
Test(sentencepiece, streaming_pieces_join_to_decode_for_any_ids) {
  cJSON *root = load_expected();
  const cJSON *model;
  cJSON_ArrayForEach(model, cJSON_GetObjectItem(root, "models")) {
    SpModel *m = open_model(model);
    uint32_t vocab = sp_model_vocab_size(m);
    uint64_t state = 14;
    int32_t pool[16];
    size_t npool = 0;
    pool[npool++] = sp_model_bos(m);
    pool[npool++] = sp_model_eos(m);
    pool[npool++] = sp_model_unk(m);
    /* Byte pieces of ASCII bytes, <0x20> and <0x41> (byte pieces come first in the vocabulary). */
    for (int32_t id = 0; id < (int32_t)vocab && npool < 5; id++) {
      size_t len;
      const char *piece = sp_model_piece(m, id, &len);
      if (len == 1 && (piece[0] == ' ' || piece[0] == 'A') && !sp_model_is_control(m, id)) pool[npool++] = id;
    }
    int checked = 0;
    for (int trial = 0; trial < 3000; trial++) {
      int32_t ids[6];
      size_t n = 1 + trial % 6;
      for (size_t i = 0; i < n; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t r = (uint32_t)(state >> 33);
        ids[i] = r % 3 == 0 ? pool[r / 3 % npool] : (int32_t)(r / 3 % vocab);
      }
      StrBuf joined = {0};
      join_pieces(m, ids, n, &joined);
      char err[256] = "", *got;
      size_t got_len;
      cr_assert(sp_model_decode(m, ids, n, &got, &got_len, err, sizeof err), "%s", err);
      if (valid_utf8(joined.data ? joined.data : "", joined.len)) {
        cr_assert(joined.len == got_len && memcmp(joined.data ? joined.data : "", got, got_len) == 0,
                  "trial %d: pieces join to '%.*s', decode gives '%s'", trial, (int)joined.len,
                  joined.data ? joined.data : "", got);
        checked++;
      }
      free(joined.data);
      free(got);
    }
    cr_assert_gt(checked, 1000);
    sp_model_free(m);
  }
  cJSON_Delete(root);
}

Test(sentencepiece, round_trip_of_valid_text_with_an_identity_normalizer) {
  cJSON *root = load_expected();
  SpModel *m = open_model(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "models"), 0)); /* sp_bpe */
  static const char text[] = "Größe 😀  two  spaces\tand 12345 \xe2\x82\xac";
  char err[256] = "";
  int32_t *ids;
  size_t n;
  cr_assert(sp_model_encode(m, text, strlen(text), &ids, &n, err, sizeof err), "%s", err);
  char *back;
  size_t len;
  cr_assert(sp_model_decode(m, ids, n, &back, &len, err, sizeof err), "%s", err);
  cr_assert_str_eq(back, text);
  free(back);
  free(ids);
  sp_model_free(m);
  cJSON_Delete(root);
}

Test(sentencepiece, empty_text_has_no_ids) {
  cJSON *root = load_expected();
  SpModel *m = open_model(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "models"), 0));
  char err[256] = "";
  int32_t *ids = (int32_t *)&err; /* must be reset */
  size_t n = 7;
  cr_assert(sp_model_encode(m, "", 0, &ids, &n, err, sizeof err));
  cr_assert_eq(n, 0);
  cr_assert_null(ids);
  char *text;
  size_t len;
  cr_assert(sp_model_decode(m, NULL, 0, &text, &len, err, sizeof err));
  cr_assert_str_eq(text, "");
  cr_assert_eq(len, 0);
  free(text);
  sp_model_free(m);
  cJSON_Delete(root);
}

Test(sentencepiece, decode_names_an_id_out_of_range) {
  cJSON *root = load_expected();
  SpModel *m = open_model(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "models"), 0));
  char err[256] = "";
  int32_t ids[] = {5, 600, 6};
  char *text;
  size_t len;
  cr_assert_not(sp_model_decode(m, ids, 3, &text, &len, err, sizeof err));
  cr_assert_str_eq(err, "token id 600 is out of range (vocabulary of 600)");
  cr_assert_null(text);
  ids[1] = -3;
  cr_assert_not(sp_model_decode(m, ids, 3, &text, &len, err, sizeof err));
  cr_assert_str_eq(err, "token id -3 is out of range (vocabulary of 600)");
  sp_model_free(m);
  cJSON_Delete(root);
}

Test(sentencepiece, open_reports_a_missing_or_malformed_file) {
  char err[512] = "";
  cr_assert_null(sp_model_open("/nonexistent/tokenizer.model", err, sizeof err));
  cr_assert(strncmp(err, "cannot load SentencePiece model '/nonexistent/tokenizer.model': ", 63) == 0, "%s", err);
  /* Not a model: the JSON fixture itself. */
  char *path = fixture_path("sp_expected.json");
  cr_assert_null(sp_model_open(path, err, sizeof err));
  StrBuf want = {0};
  sb_printf(&want, "cannot load SentencePiece model '%s': ", path);
  cr_assert(strncmp(err, want.data, want.len) == 0, "%s", err);
  free(want.data);
  free(path);
  /* A directory, and a model cut short: errors, never an exception. */
  cr_assert_null(sp_model_open("/tmp", err, sizeof err));
  cr_assert(strncmp(err, "cannot load SentencePiece model '/tmp': ", 40) == 0, "%s", err);
  char dir[] = "/tmp/orion-sp-XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  char *model = fixture_path("sp_bpe.model");
  char *data;
  size_t len;
  const char *rerr;
  cr_assert(read_file(model, 1u << 20, &data, &len, &rerr));
  StrBuf cut = {0};
  sb_printf(&cut, "%s/cut.model", dir);
  cr_assert(write_file_atomic(cut.data, data, 100, &rerr));
  cr_assert_null(sp_model_open(cut.data, err, sizeof err));
  cr_assert(err[strlen(err) - 1] != ' ', "'%s'", err);
  StrBuf want_cut = {0};
  sb_printf(&want_cut, "cannot load SentencePiece model '%s': ", cut.data);
  cr_assert(strncmp(err, want_cut.data, want_cut.len) == 0, "%s", err);
  remove_tree(dir);
  free(want_cut.data);
  free(cut.data);
  free(data);
  free(model);
}
