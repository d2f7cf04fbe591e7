/*
 * A tolerant scanner of MIL text for the package checks: tokens, matched
 * brackets, then per function its parameters, the names its statements
 * define, its return names, each statement's op and arguments, and every
 * BLOBFILE reference with the tensor type in front of it.
 *
 * It needs only the outline every MIL text has (MIL spec §1.8):
 *   func NAME<OPSET>(T p, ...) [attrs]? { RESULTS = OP(ARGS)[attrs]?; ... } -> (names);
 * and reads both dialects, with or without spaces, `//` comments and the
 * lenient `(T a, T b) = op(...)` result lists. Unbalanced brackets and
 * statements without `=` or an op are errors (the checks would be guesses).
 */
#include <stdlib.h>
#include <string.h>

#include "lint_internal.h"
#include "orion/dtype.h"

typedef enum TokKind { TK_IDENT, TK_NUMBER, TK_STRING, TK_ARROW, TK_PUNCT, TK_OTHER } TokKind;

typedef struct Tok {
  uint8_t kind;
  char c;         /* TK_PUNCT: the character */
  uint32_t off, len;
  uint32_t match; /* opening/closing bracket: index of its partner */
} Tok;

typedef struct Scanner {
  MilScan *s;
  Tok *toks;
  uint32_t ntoks, cap;
  char *err;
  size_t errlen;
  uint32_t *err_off;
  bool ok;
  /* growing arrays of the result */
  uint32_t cap_funcs, cap_stmts, cap_args, cap_blobs;
} Scanner;

static bool fail_at(Scanner *p, uint32_t off, const char *fmt, ...) ORION_PRINTF(3, 4);
static bool fail_at(Scanner *p, uint32_t off, const char *fmt, ...) {
  if (p->ok) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err, p->errlen, fmt, ap);
    va_end(ap);
    *p->err_off = off;
  }
  p->ok = false;
  return false;
}

/* ---- tokens ---- */

static bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c) || c == '@'; }

static void push(Scanner *p, TokKind kind, char c, size_t off, size_t len) {
  xgrow((void **)&p->toks, sizeof *p->toks, &p->cap, p->ntoks + 1);
  p->toks[p->ntoks++] = (Tok){(uint8_t)kind, c, (uint32_t)off, (uint32_t)len, 0};
}

static bool lex(Scanner *p) {
  const char *t = p->s->text;
  size_t n = p->s->len, i = 0;
  while (i < n) {
    char c = t[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      i++;
    } else if (c == '/' && i + 1 < n && t[i + 1] == '/') {
      while (i < n && t[i] != '\n') i++;
    } else if (is_ident_start(c)) {
      size_t s = i;
      while (i < n && is_ident_char(t[i])) i++;
      push(p, TK_IDENT, 0, s, i - s);
    } else if (is_digit(c) || ((c == '-' || c == '+' || c == '.') && i + 1 < n && (is_digit(t[i + 1]) || t[i + 1] == '.'))) {
      /* Decimal, hex float, exponent: the value is read later where needed. */
      size_t s = i++;
      while (i < n && (is_ident_char(t[i]) || t[i] == '.' ||
                       ((t[i] == '+' || t[i] == '-') && strchr("eEpP", t[i - 1]))))
        i++;
      push(p, TK_NUMBER, 0, s, i - s);
    } else if (c == '"') {
      size_t s = i++;
      while (i < n && t[i] != '"') i += t[i] == '\\' && i + 1 < n ? 2 : 1;
      if (i >= n) return fail_at(p, (uint32_t)s, "unterminated string");
      i++;
      push(p, TK_STRING, 0, s, i - s);
    } else if (c == '-' && i + 1 < n && t[i + 1] == '>') {
      push(p, TK_ARROW, 0, i, 2);
      i += 2;
    } else if (strchr("()[]{}<>,=;", c) && c) {
      push(p, TK_PUNCT, c, i, 1);
      i++;
    } else {
      push(p, TK_OTHER, c, i, 1);
      i++;
    }
    if (p->ntoks >= UINT32_MAX - 1) return fail_at(p, (uint32_t)i, "too many tokens");
  }
  return true;
}

static char closer(char c) { return c == '(' ? ')' : c == '[' ? ']' : c == '{' ? '}' : c == '<' ? '>' : 0; }

/* Pairs every bracket with its partner. */
static bool match_brackets(Scanner *p) {
  uint32_t *stack = NULL, depth = 0, cap = 0;
  bool ok = true;
  for (uint32_t i = 0; i < p->ntoks && ok; i++) {
    Tok *k = &p->toks[i];
    if (k->kind != TK_PUNCT) continue;
    if (closer(k->c)) {
      xgrow((void **)&stack, sizeof *stack, &cap, depth + 1);
      stack[depth++] = i;
    } else if (strchr(")]}>", k->c)) {
      if (!depth) {
        ok = fail_at(p, k->off, "'%c' without a matching opening bracket", k->c);
      } else if (closer(p->toks[stack[depth - 1]].c) != k->c) {
        Tok *o = &p->toks[stack[depth - 1]];
        ok = fail_at(p, k->off, "'%c' does not match the '%c' at byte %u", k->c, o->c, o->off);
      } else {
        uint32_t o = stack[--depth];
        p->toks[o].match = i;
        k->match = o;
      }
    }
  }
  if (ok && depth) ok = fail_at(p, p->toks[stack[depth - 1]].off, "'%c' is never closed", p->toks[stack[depth - 1]].c);
  free(stack);
  return ok;
}

static bool is_punct(const Scanner *p, uint32_t i, char c) {
  return i < p->ntoks && p->toks[i].kind == TK_PUNCT && p->toks[i].c == c;
}

static bool is_open(const Scanner *p, uint32_t i) { return i < p->ntoks && p->toks[i].kind == TK_PUNCT && closer(p->toks[i].c); }

static bool tok_is(const Scanner *p, uint32_t i, const char *word) {
  if (i >= p->ntoks || p->toks[i].kind != TK_IDENT) return false;
  size_t n = strlen(word);
  return p->toks[i].len == n && !memcmp(p->s->text + p->toks[i].off, word, n);
}

static MilRange range_of(const Scanner *p, uint32_t first, uint32_t last) {
  const Tok *a = &p->toks[first], *b = &p->toks[last];
  return (MilRange){a->off, b->off + b->len - a->off};
}

/* ---- result arrays ---- */

static void add_range(MilRange **arr, uint32_t *n, uint32_t *cap, MilRange r) {
  xgrow((void **)arr, sizeof **arr, cap, *n + 1);
  (*arr)[(*n)++] = r;
}

/* Per-function name lists grow on the heap while scanning, then move to the arena. */
typedef struct NameList {
  MilRange *v;
  uint32_t n, cap;
} NameList;

/* Moves a heap array into the arena (one free releases everything). */
static void *move_to_arena(Arena *a, void *heap, size_t bytes) {
  void *r = arena_alloc(a, bytes ? bytes : 1);
  if (heap && bytes) memcpy(r, heap, bytes);
  free(heap);
  return r;
}

static MilRange *to_arena(MilScan *s, NameList *l) { return move_to_arena(&s->arena, l->v, sizeof *l->v * l->n); }

/* ---- BLOBFILE ---- */

/* The blob code of the dtype spelled at r, for the dtypes whose blobs the
 * linter sizes (not the sub-byte ones); 0 for the others. */
static uint32_t blob_code(const MilScan *s, MilRange r) {
  OrionDType t = orion_dtype_from_name(s->text + r.off, r.len);
  return t < ORION_DT_MIL_END && orion_dtype_size(t) ? orion_dtype_blob_code(t) : 0;
}

/* Reads a decimal integer token; false if it is anything else. */
static bool read_uint(const MilScan *s, MilRange r, uint64_t *out) {
  if (r.len == 0 || r.len > 20) return false;
  uint64_t v = 0;
  for (uint32_t i = 0; i < r.len; i++) {
    char c = s->text[r.off + i];
    if (!is_digit(c) || v > (UINT64_MAX - (uint64_t)(c - '0')) / 10) return false;
    v = v * 10 + (uint64_t)(c - '0');
  }
  *out = v;
  return true;
}

/* `tensor<DT, [d, ...]>` ending at token `gt` (its '>'): dtype and bytes. */
static void blob_type(Scanner *p, uint32_t gt, MilScanBlob *b) {
  uint32_t lt = p->toks[gt].match;
  if (lt == 0 || !tok_is(p, lt - 1, "tensor") || p->toks[lt + 1].kind != TK_IDENT || !is_punct(p, lt + 2, ',') ||
      !is_punct(p, lt + 3, '['))
    return;
  uint32_t code = blob_code(p->s, range_of(p, lt + 1, lt + 1));
  size_t esize = blob_dtype_size(code);
  if (!esize) return;
  uint64_t elems = 1;
  uint32_t close = p->toks[lt + 3].match;
  for (uint32_t i = lt + 4; i < close; i++) {
    if (is_punct(p, i, ',')) continue;
    uint64_t d;
    if (p->toks[i].kind != TK_NUMBER || !read_uint(p->s, range_of(p, i, i), &d) ||
        __builtin_mul_overflow(elems, d, &elems))
      return;
  }
  if (__builtin_mul_overflow(elems, (uint64_t)esize, &b->nbytes)) return;
  b->blob_dtype = code;
  b->typed = true;
}

/* The first token of `kind` in the value of `key = ...` inside [from, to);
 * the value ends at a ',' outside brackets (types have commas inside). */
static uint32_t value_token(Scanner *p, uint32_t from, uint32_t to, const char *key, TokKind kind) {
  for (uint32_t i = from; i + 1 < to; i++) {
    if (!tok_is(p, i, key) || !is_punct(p, i + 1, '=')) continue;
    int depth = 0;
    for (uint32_t k = i + 2; k < to; k++) {
      if (p->toks[k].kind == kind) return k;
      if (is_open(p, k)) depth++;
      else if (p->toks[k].kind == TK_PUNCT && strchr(")]}>", p->toks[k].c)) depth--;
      else if (depth == 0 && is_punct(p, k, ',')) break;
    }
    return 0;
  }
  return 0;
}

static void scan_blob(Scanner *p, uint32_t kw, uint32_t func) {
  MilScan *s = p->s;
  xgrow((void **)&s->blobs, sizeof *s->blobs, &p->cap_blobs, s->nblobs + 1);
  MilScanBlob *b = &s->blobs[s->nblobs++];
  memset(b, 0, sizeof *b);
  b->where = range_of(p, kw, kw);
  b->func = func;
  uint32_t open = kw + 1, close = p->toks[open].match;
  uint32_t ps = value_token(p, open + 1, close, "path", TK_STRING);
  if (ps) {
    MilRange r = range_of(p, ps, ps);
    b->path = arena_strndup(&s->arena, s->text + r.off + 1, r.len - 2);
  }
  uint32_t on = value_token(p, open + 1, close, "offset", TK_NUMBER);
  if (on) {
    b->offset_tok = range_of(p, on, on);
    b->offset_ok = read_uint(s, b->offset_tok, &b->offset);
  }
  /* TYPE(BLOBFILE(...)): the type ends just before the '(' in front of us. */
  if (kw >= 2 && is_punct(p, kw - 1, '(') && is_punct(p, kw - 2, '>')) blob_type(p, kw - 2, b);
}

/* ---- statements and functions ---- */

/* Names declared in a result list [from, to): identifiers followed by ',',
 * '=' or the end, skipping types (bracketed groups). A leading '(' is the
 * lenient parenthesised form: its content is the list. */
static void scan_results(Scanner *p, uint32_t from, uint32_t to, NameList *defs, MilRange *first) {
  if (is_punct(p, from, '(') && p->toks[from].match + 1 == to) {
    to = p->toks[from].match;
    from++;
  }
  for (uint32_t i = from; i < to; i++) {
    if (is_open(p, i)) {
      i = p->toks[i].match;
      continue;
    }
    if (p->toks[i].kind == TK_IDENT && (i + 1 == to || is_punct(p, i + 1, ','))) {
      MilRange r = range_of(p, i, i);
      if (first->len == 0) *first = r;
      add_range(&defs->v, &defs->n, &defs->cap, r);
    }
  }
}

static void scan_args(Scanner *p, uint32_t open, MilScanStmt *st) {
  MilScan *s = p->s;
  uint32_t close = p->toks[open].match;
  st->first_arg = s->nargs;
  uint32_t i = open + 1;
  while (i < close) {
    uint32_t end = i; /* the ',' or ')' ending this argument */
    while (end < close && !is_punct(p, end, ',')) end = is_open(p, end) ? p->toks[end].match + 1 : end + 1;
    if (end > close) end = close;
    if (p->toks[i].kind == TK_IDENT && is_punct(p, i + 1, '=') && i + 2 < end) {
      xgrow((void **)&s->args, sizeof *s->args, &p->cap_args, s->nargs + 1);
      MilScanArg *a = &s->args[s->nargs++];
      a->key = range_of(p, i, i);
      a->value = range_of(p, i + 2, end - 1);
      a->is_list = is_punct(p, i + 2, '(');
      a->is_name = end == i + 3 && p->toks[i + 2].kind == TK_IDENT && !tok_is(p, i + 2, "true") &&
                   !tok_is(p, i + 2, "false");
      st->nargs++;
    }
    i = end + 1;
  }
}

/* One statement: tokens [from, semi). */
static bool scan_stmt(Scanner *p, uint32_t from, uint32_t semi, uint32_t func, NameList *defs) {
  MilScan *s = p->s;
  uint32_t eq = from;
  while (eq < semi && !is_punct(p, eq, '=')) eq = is_open(p, eq) ? p->toks[eq].match + 1 : eq + 1;
  if (eq >= semi) return fail_at(p, p->toks[from].off, "statement without '='");
  if (p->toks[eq + 1].kind != TK_IDENT || !is_punct(p, eq + 2, '('))
    return fail_at(p, p->toks[eq].off, "expected an op and '(' after '='");
  xgrow((void **)&s->stmts, sizeof *s->stmts, &p->cap_stmts, s->nstmts + 1);
  MilScanStmt *st = &s->stmts[s->nstmts++];
  memset(st, 0, sizeof *st);
  st->func = func;
  st->op = range_of(p, eq + 1, eq + 1);
  scan_results(p, from, eq, defs, &st->result);
  scan_args(p, eq + 2, st);
  for (uint32_t i = eq + 2; i < semi; i++)
    if (tok_is(p, i, "BLOBFILE") && is_punct(p, i + 1, '(')) scan_blob(p, i, func);
  return true;
}

/* `func NAME<OPSET>(params) [attrs]? { stmts } -> (names);` from token i
 * (`func`); returns the token after it. */
static uint32_t scan_func(Scanner *p, uint32_t i) {
  MilScan *s = p->s;
  uint32_t fi = s->nfuncs;
  xgrow((void **)&s->funcs, sizeof *s->funcs, &p->cap_funcs, s->nfuncs + 1);
  MilScanFunc *f = &s->funcs[s->nfuncs++];
  memset(f, 0, sizeof *f);
  if (p->toks[i + 1].kind != TK_IDENT) return fail_at(p, p->toks[i].off, "expected a function name after 'func'"), i;
  f->name = range_of(p, i + 1, i + 1);
  const char *fname = mil_range_str(s, f->name);
  uint32_t j = i + 2;
  if (is_punct(p, j, '<')) j = p->toks[j].match + 1;
  if (!is_punct(p, j, '('))
    return fail_at(p, j < p->ntoks ? p->toks[j].off : (uint32_t)s->len, "expected '(' after the name of function '%s'",
                   fname),
           j;
  NameList params = {0}, defs = {0}, rets = {0};
  uint32_t close = p->toks[j].match;
  for (uint32_t k = j + 1; k < close; k++) {
    if (is_open(p, k)) {
      k = p->toks[k].match;
      continue;
    }
    if (p->toks[k].kind == TK_IDENT && (k + 1 == close || is_punct(p, k + 1, ',')))
      add_range(&params.v, &params.n, &params.cap, range_of(p, k, k));
  }
  j = close + 1;
  if (is_punct(p, j, '[')) j = p->toks[j].match + 1;
  if (!is_punct(p, j, '{')) {
    fail_at(p, j < p->ntoks ? p->toks[j].off : (uint32_t)s->len, "expected '{' to open the body of function '%s'", fname);
  } else {
    uint32_t body_end = p->toks[j].match, k = j + 1;
    while (k < body_end && p->ok) {
      uint32_t semi = k;
      while (semi < body_end && !is_punct(p, semi, ';')) semi = is_open(p, semi) ? p->toks[semi].match + 1 : semi + 1;
      if (semi >= body_end) {
        fail_at(p, p->toks[k].off, "statement without ';' in function '%s'", fname);
        break;
      }
      if (semi > k) scan_stmt(p, k, semi, fi, &defs);
      k = semi + 1;
    }
    j = body_end + 1;
    if (p->ok && !(j < p->ntoks && p->toks[j].kind == TK_ARROW && is_punct(p, j + 1, '('))) {
      fail_at(p, p->toks[body_end].off, "expected '-> (...)' after the body of function '%s'", fname);
    } else if (p->ok) {
      uint32_t rclose = p->toks[j + 1].match;
      for (uint32_t k2 = j + 2; k2 < rclose; k2++)
        if (p->toks[k2].kind == TK_IDENT) add_range(&rets.v, &rets.n, &rets.cap, range_of(p, k2, k2));
      j = rclose + 1;
      if (is_punct(p, j, ';')) j++;
    }
  }
  f = &s->funcs[fi]; /* the array may have moved */
  f->nparams = params.n;
  f->params = to_arena(s, &params);
  f->ndefs = defs.n;
  f->defs = to_arena(s, &defs);
  f->nreturns = rets.n;
  f->returns = to_arena(s, &rets);
  return j;
}

bool mil_scan(MilScan *s, const char *text, size_t len, char *err, size_t errlen, uint32_t *err_off) {
  memset(s, 0, sizeof *s);
  arena_init(&s->arena);
  s->text = text;
  s->len = len;
  Scanner p = {.s = s, .err = err, .errlen = errlen, .err_off = err_off, .ok = true};
  if (len >= UINT32_MAX) {
    fail_at(&p, 0, "MIL text too large");
  } else if (lex(&p) && match_brackets(&p)) {
    uint32_t i = 0;
    while (i < p.ntoks && p.ok) {
      if (tok_is(&p, i, "func") && i + 1 < p.ntoks && p.toks[i + 1].kind == TK_IDENT) i = scan_func(&p, i);
      else i++;
    }
    if (p.ok && s->nfuncs == 0) fail_at(&p, 0, "no function ('func NAME<...>(...) {...} -> (...);') found");
  }
  free(p.toks);
  s->stmts = move_to_arena(&s->arena, s->stmts, sizeof *s->stmts * s->nstmts);
  s->args = move_to_arena(&s->arena, s->args, sizeof *s->args * s->nargs);
  s->blobs = move_to_arena(&s->arena, s->blobs, sizeof *s->blobs * s->nblobs);
  s->funcs = move_to_arena(&s->arena, s->funcs, sizeof *s->funcs * s->nfuncs);
  return p.ok;
}

void mil_scan_free(MilScan *s) {
  arena_free(&s->arena);
  memset(s, 0, sizeof *s);
}

bool mil_range_eq(const MilScan *s, MilRange r, const char *str) {
  size_t n = strlen(str);
  return r.len == n && !memcmp(s->text + r.off, str, n);
}

const char *mil_range_str(MilScan *s, MilRange r) { return arena_strndup(&s->arena, s->text + r.off, r.len); }
