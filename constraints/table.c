/*
 * The constraint table loader: JSON text (cJSON) -> ConstraintTable, checked
 * strictly, because the table is the contract between the documentation, the
 * checkers and the passes. Unknown, duplicate, missing or mistyped fields,
 * malformed or duplicate ids, enumerations outside their sets, ops that
 * ops.def does not know, passes the caller's registry does not know, chips naming an
 * unknown target or "inheriting" a value other than the default are all errors
 * that name the entry ("constraint ANE001: ..." or, before a usable id,
 * "constraint #3: ..."). Every problem is reported, up to the Diag's error
 * limit; a table with any problem is never returned.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "orion/constraint_table.h"

/* Generated from ane_constraints.json at build time (constraints/embed.c). */
extern const unsigned char constraints_builtin_json[];
extern const size_t constraints_builtin_json_len;

static const char *const category_names[CAT_COUNT] = {
    "compile-failure", "eval-failure", "silent-wrong-data", "compiler-level", "performance", "numeric", "crash"};
static const char *const check_names[] = {"static-ir", "static-package", "runtime", "advisory"};
static const char *const severity_names[] = {"note", "warning", "error"}; /* indexed by DiagLevel */

/* Fields of each object, in the order the table writes them. */
static const char *const top_fields[] = {"schema_version", "description", "parameters", "targets", "chips",
                                         "constraints"};
static const char *const rule_fields[] = {"id",       "name",     "summary", "category", "severity",
                                          "check",    "ops",      "symptom", "workaround", "fixed_by",
                                          "source",   "disputed", "dispute_note", "notes", "figures",
                                          "placement"};
static const char *const param_fields[] = {"description", "unit", "rule", "source", "disputed", "dispute_note"};
static const char *const chip_fields[] = {"description", "target", "min_surface_bytes", "sram_budget_bytes",
                                          "max_tensor_dim"};
static const char *const chip_value_fields[] = {"value", "inherited", "source", "disputed", "dispute_note"};

typedef enum ParamKind { PK_STRING, PK_UINT } ParamKind;
static const struct {
  const char *name;
  ParamKind kind;
} param_info[PARAM_COUNT] = {
    [PARAM_PROGRAM_VERSION] = {"program_version", PK_STRING}, [PARAM_OPSET] = {"opset", PK_STRING},
    [PARAM_MIN_SURFACE_BYTES] = {"min_surface_bytes", PK_UINT}, [PARAM_SRAM_BUDGET_BYTES] = {"sram_budget_bytes", PK_UINT},
    [PARAM_MAX_TENSOR_DIM] = {"max_tensor_dim", PK_UINT},
};

#define NELEM(a) (sizeof(a) / sizeof *(a))
/* Integers above this lose precision as JSON numbers (doubles). */
#define MAX_JSON_INT 9007199254740992.0

typedef struct Loader {
  const char *name; /* of the table, for messages */
  Diag *d;
  ConstraintTable *t;
  bool ok;
  ConstraintPassExists *pass_exists; /* checks 'fixed_by'; NULL: not checked */
} Loader;

static void fail(Loader *l, const char *where, const char *fmt, ...) ORION_PRINTF(3, 4);
static void fail(Loader *l, const char *where, const char *fmt, ...) {
  StrBuf sb;
  sb_init(&sb);
  va_list ap;
  va_start(ap, fmt);
  sb_vprintf(&sb, fmt, ap);
  va_end(ap);
  if (where) diag_error(l->d, (SrcSpan){0}, "%s: %s: %s", l->name, where, sb.data);
  else diag_error(l->d, (SrcSpan){0}, "%s: %s", l->name, sb.data);
  sb_free(&sb);
  l->ok = false;
}

static bool stop(const Loader *l) { return diag_should_stop(l->d); }

/* ---- generic field access ---- */

static int field_index(const char *const *fields, size_t n, const char *key) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(fields[i], key)) return (int)i;
  return -1;
}

/* Unknown and repeated keys of an object. Only the first such problem of an
 * object is reported: a hostile object may have a million keys. */
static bool check_keys(Loader *l, const cJSON *obj, const char *const *fields, size_t n, const char *where,
                       const char *what) {
  uint64_t seen = 0; /* n <= 64 */
  for (const cJSON *c = obj->child; c; c = c->next) {
    int i = field_index(fields, n, c->string);
    if (i < 0) {
      if (where) fail(l, where, "unknown %s '%s'", what, c->string);
      else fail(l, NULL, "unknown top-level %s '%s'", what, c->string);
      return false;
    }
    if (seen & (1ull << i)) {
      if (where) fail(l, where, "duplicate %s '%s'", what, c->string);
      else fail(l, NULL, "duplicate top-level %s '%s'", what, c->string);
      return false;
    }
    seen |= 1ull << i;
  }
  return true;
}

static const cJSON *get(Loader *l, const cJSON *obj, const char *key, const char *where, bool required) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!v && required) {
    if (where) fail(l, where, "missing field '%s'", key);
    else fail(l, NULL, "missing top-level field '%s'", key);
  }
  return v;
}

static void wrong_type(Loader *l, const char *where, const char *key, const char *what) {
  fail(l, where, "'%s' must be %s", key, what);
}

/* Valid UTF-8 without control characters: the text ends up in terminals,
 * Markdown and SARIF. */
static const char *text_problem(const char *s) {
  const unsigned char *u = (const unsigned char *)s;
  while (*u) {
    if (*u < 0x20 || *u == 0x7f) return "must not contain control characters";
    if (*u < 0x80) {
      u++;
      continue;
    }
    size_t n = (*u & 0xe0) == 0xc0 ? 2 : (*u & 0xf0) == 0xe0 ? 3 : (*u & 0xf8) == 0xf0 ? 4 : 0;
    if (n == 0 || (n == 2 && *u < 0xc2)) return "is not valid UTF-8";
    uint32_t cp = *u & (0x7f >> n);
    for (size_t i = 1; i < n; i++) {
      if ((u[i] & 0xc0) != 0x80) return "is not valid UTF-8";
      cp = cp << 6 | (u[i] & 0x3f);
    }
    /* Overlong forms, surrogates and values beyond Unicode. */
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
      return "is not valid UTF-8";
    u += n;
  }
  return NULL;
}

/* A string field; NULL (after reporting) if missing or invalid. JSON null
 * is accepted where `nullable` (then NULL is returned without an error). */
static const char *get_text(Loader *l, const cJSON *obj, const char *key, const char *where, bool required,
                            bool nullable, bool allow_empty) {
  const cJSON *v = get(l, obj, key, where, required);
  if (!v || (nullable && cJSON_IsNull(v))) return NULL;
  if (!cJSON_IsString(v)) {
    wrong_type(l, where, key, nullable ? "a string or null" : allow_empty ? "a string" : "a non-empty string");
    return NULL;
  }
  const char *s = v->valuestring;
  if (!allow_empty && !s[0]) {
    wrong_type(l, where, key, nullable ? "a string or null" : "a non-empty string");
    return NULL;
  }
  if (strlen(s) > CONSTRAINTS_MAX_TEXT) {
    fail(l, where, "'%s' is too long (limit is %u bytes)", key, CONSTRAINTS_MAX_TEXT);
    return NULL;
  }
  const char *problem = text_problem(s);
  if (problem) {
    fail(l, where, "'%s' %s", key, problem);
    return NULL;
  }
  return arena_strdup(&l->t->arena, s);
}

static bool get_bool(Loader *l, const cJSON *obj, const char *key, const char *where) {
  const cJSON *v = get(l, obj, key, where, true);
  if (v && !cJSON_IsBool(v)) wrong_type(l, where, key, "a boolean");
  return v && cJSON_IsTrue(v);
}

static bool is_positive_int(const cJSON *v) {
  return cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble <= MAX_JSON_INT &&
         floor(v->valuedouble) == v->valuedouble;
}

/* ---- rules ---- */

static bool valid_id(const char *s) {
  return strlen(s) == 6 && !strncmp(s, "ANE", 3) && s[3] >= '0' && s[3] <= '9' && s[4] >= '0' && s[4] <= '9' &&
         s[5] >= '0' && s[5] <= '9';
}

static bool valid_rule_name(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 48 || s[0] == '-' || s[n - 1] == '-') return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-') || (c == '-' && s[i + 1] == '-'))
      return false;
  }
  return true;
}

static int name_index(const char *const *names, size_t n, const char *s) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(names[i], s)) return (int)i;
  return -1;
}

/* "a, b, c or d" */
static void put_choices(StrBuf *sb, const char *const *names, size_t n) {
  for (size_t i = 0; i < n; i++) sb_printf(sb, "%s%s", i == 0 ? "" : i + 1 == n ? " or " : ", ", names[i]);
}

static void fail_choice(Loader *l, const char *where, const char *what, const char *got, const char *const *names,
                        size_t n) {
  StrBuf sb;
  sb_init(&sb);
  put_choices(&sb, names, n);
  fail(l, where, "unknown %s '%s' (expected %s)", what, got, sb.data);
  sb_free(&sb);
}

static void read_checks(Loader *l, const cJSON *obj, const char *where, Constraint *c) {
  const cJSON *v = get(l, obj, "check", where, true);
  if (!v) return;
  if (!cJSON_IsArray(v)) {
    wrong_type(l, where, "check", "an array of strings");
    return;
  }
  if (!v->child) {
    fail(l, where, "'check' must not be empty");
    return;
  }
  for (const cJSON *k = v->child; k; k = k->next) {
    if (!cJSON_IsString(k)) {
      wrong_type(l, where, "check", "an array of strings");
      return;
    }
    int i = name_index(check_names, NELEM(check_names), k->valuestring);
    if (i < 0) {
      fail_choice(l, where, "check kind", k->valuestring, check_names, NELEM(check_names));
      return;
    }
    if (c->checks & (1u << i)) {
      fail(l, where, "check kind '%s' listed twice", k->valuestring);
      return;
    }
    c->checks |= 1u << i;
  }
}

/* Op names from ops.def itself, so that the table needs no IR code. */
static const char *const op_names[] = {
#define OP(id, nm, min_in, max_in, nres, dtypes, attrs) [OP_##id] = nm,
#include "orion/ops.def"
#undef OP
};

const char *constraint_op_name(IrOpKind op) { return (size_t)op < NELEM(op_names) ? op_names[op] : NULL; }

/* The op a name spells; OP_COUNT if none. */
static IrOpKind op_from_name(const char *name) {
  for (size_t k = 0; k < NELEM(op_names); k++)
    if (strcmp(op_names[k], name) == 0) return (IrOpKind)k;
  return OP_COUNT;
}

static void read_ops(Loader *l, const cJSON *obj, const char *where, Constraint *c) {
  const cJSON *v = get(l, obj, "ops", where, true);
  if (!v) return;
  if (!cJSON_IsArray(v)) {
    wrong_type(l, where, "ops", "an array of strings");
    return;
  }
  bool seen[OP_COUNT] = {false};
  IrOpKind *ops = arena_alloc(&l->t->arena, sizeof *ops * OP_COUNT);
  uint32_t n = 0;
  for (const cJSON *k = v->child; k; k = k->next) {
    if (!cJSON_IsString(k)) {
      wrong_type(l, where, "ops", "an array of strings");
      return;
    }
    IrOpKind op = op_from_name(k->valuestring);
    /* OP_CALL has no ops.def name, but guard anyway: only real ops count. */
    if (op >= OP_CALL) {
      fail(l, where, "unknown op '%s' in 'ops'", k->valuestring);
      return;
    }
    if (seen[op]) {
      fail(l, where, "op '%s' listed twice in 'ops'", k->valuestring);
      return;
    }
    seen[op] = true;
    ops[n++] = op;
  }
  c->ops = ops;
  c->nops = n;
}

static bool valid_figure_name(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 48 || s[0] == '_' || s[n - 1] == '_') return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_') || (c == '_' && s[i + 1] == '_')) return false;
  }
  return true;
}

/* The optional "figures": {"name": positive integer, ...}. */
static void read_figures(Loader *l, const cJSON *obj, const char *where, Constraint *c) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, "figures");
  if (!v) return;
  if (!cJSON_IsObject(v) || !v->child) {
    wrong_type(l, where, "figures", "a non-empty object of positive integers");
    return;
  }
  ConstraintFigure *figs = arena_alloc(&l->t->arena, sizeof *figs * CONSTRAINTS_MAX_FIGURES);
  uint32_t n = 0;
  for (const cJSON *k = v->child; k; k = k->next) {
    if (n == CONSTRAINTS_MAX_FIGURES) {
      fail(l, where, "too many figures (limit is %u)", CONSTRAINTS_MAX_FIGURES);
      return;
    }
    if (!valid_figure_name(k->string)) {
      fail(l, where, "figure name '%.48s' must be lowercase words joined by '_' (at most 48 characters)", k->string);
      return;
    }
    for (uint32_t i = 0; i < n; i++)
      if (!strcmp(figs[i].name, k->string)) {
        fail(l, where, "figure '%s' listed twice", k->string);
        return;
      }
    if (!is_positive_int(k)) {
      fail(l, where, "figure '%s' must be a positive integer", k->string);
      return;
    }
    figs[n++] = (ConstraintFigure){arena_strdup(&l->t->arena, k->string), (uint64_t)k->valuedouble};
  }
  c->figures = figs;
  c->nfigures = n;
}

/* The optional "placement": "cpu": a statement that breaks the rule runs on
 * the CPU instead (the ane backend's partition), which mends the violation.
 * Only a rule decided per statement from the written program can say so: a
 * rule about the whole program or its surfaces is no placement question. */
static void read_placement(Loader *l, const cJSON *obj, const char *where, Constraint *c) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, "placement");
  if (!v) return;
  if (!cJSON_IsString(v) || strcmp(v->valuestring, "cpu")) {
    wrong_type(l, where, "placement", "the string \"cpu\"");
    return;
  }
  if (!(c->checks & CHECK_STATIC_PACKAGE)) {
    fail(l, where, "'placement' needs a rule checked from the written program (static-package)");
    return;
  }
  c->placed_on_cpu = true;
}

/* A disputed flag and its note: the note is required exactly when disputed. */
static void read_dispute(Loader *l, const cJSON *obj, const char *where, bool *disputed, const char **note) {
  *disputed = get_bool(l, obj, "disputed", where);
  const cJSON *nv = cJSON_GetObjectItemCaseSensitive(obj, "dispute_note");
  const cJSON *dv = cJSON_GetObjectItemCaseSensitive(obj, "disputed");
  if (!dv || !cJSON_IsBool(dv)) return;
  if (*disputed && !nv) fail(l, where, "'dispute_note' is required when 'disputed' is true");
  else if (!*disputed && nv) fail(l, where, "'dispute_note' is only allowed when 'disputed' is true");
  else if (nv) *note = get_text(l, obj, "dispute_note", where, true, false, false);
}

static void read_rule(Loader *l, const cJSON *obj, uint32_t index, int16_t *first_with_id) {
  char where[48];
  snprintf(where, sizeof where, "constraint #%u", index + 1);
  if (!cJSON_IsObject(obj)) {
    fail(l, where, "must be an object");
    return;
  }
  Constraint *c = &l->t->rules[l->t->nrules];
  memset(c, 0, sizeof *c);
  c->severity = DIAG_ERROR;
  /* The id first: once it is usable, messages name the entry by it. */
  const cJSON *idv = cJSON_GetObjectItemCaseSensitive(obj, "id");
  if (!idv) fail(l, where, "missing field 'id'");
  else if (!cJSON_IsString(idv)) wrong_type(l, where, "id", "a string");
  else if (!valid_id(idv->valuestring)) {
    /* Quote at most a short prefix of a bad id. */
    fail(l, where, "id '%.16s%s' does not match ANE followed by three digits", idv->valuestring,
         strlen(idv->valuestring) > 16 ? "..." : "");
  } else {
    uint32_t number = (uint32_t)atoi(idv->valuestring + 3);
    if (first_with_id[number]) {
      fail(l, where, "duplicate id '%s' (constraint #%d has it)", idv->valuestring, first_with_id[number]);
      return;
    }
    first_with_id[number] = (int16_t)(index + 1);
    c->id = arena_strdup(&l->t->arena, idv->valuestring);
    c->number = number;
    snprintf(where, sizeof where, "constraint %s", c->id);
  }
  if (!check_keys(l, obj, rule_fields, NELEM(rule_fields), where, "field")) return;

  c->name = get_text(l, obj, "name", where, true, false, false);
  if (c->name && !valid_rule_name(c->name))
    fail(l, where, "'name' must be lowercase words joined by '-' (at most 48 characters, e.g. no-concat)");
  c->summary = get_text(l, obj, "summary", where, true, false, false);
  const char *cat = get_text(l, obj, "category", where, true, false, false);
  if (cat) {
    int i = name_index(category_names, CAT_COUNT, cat);
    if (i < 0) fail_choice(l, where, "category", cat, category_names, CAT_COUNT);
    else c->category = (ConstraintCategory)i;
  }
  const char *sev = get_text(l, obj, "severity", where, true, false, false);
  if (sev && !constraint_severity_from_name(sev, &c->severity)) {
    static const char *const order[] = {"error", "warning", "note"};
    fail_choice(l, where, "severity", sev, order, 3);
  }
  read_checks(l, obj, where, c);
  read_ops(l, obj, where, c);
  c->symptom = get_text(l, obj, "symptom", where, true, false, false);
  c->workaround = get_text(l, obj, "workaround", where, true, false, false);
  const cJSON *fb = get(l, obj, "fixed_by", where, true);
  if (fb && !cJSON_IsNull(fb)) {
    c->fixed_by = get_text(l, obj, "fixed_by", where, true, true, false);
    if (c->fixed_by && l->pass_exists && !l->pass_exists(c->fixed_by))
      fail(l, where, "unknown pass '%s' in 'fixed_by'", c->fixed_by);
  }
  c->source = get_text(l, obj, "source", where, true, false, false);
  read_dispute(l, obj, where, &c->disputed, &c->dispute_note);
  c->notes = get_text(l, obj, "notes", where, false, false, false);
  read_figures(l, obj, where, c);
  read_placement(l, obj, where, c);
  if (c->id) l->t->nrules++;
}

static void read_rules(Loader *l, const cJSON *root) {
  const cJSON *v = get(l, root, "constraints", NULL, true);
  if (!v) return;
  if (!cJSON_IsArray(v)) {
    wrong_type(l, NULL, "constraints", "an array");
    return;
  }
  uint32_t n = 0;
  for (const cJSON *c = v->child; c && n <= CONSTRAINTS_MAX_RULES; c = c->next) n++;
  if (n == 0) {
    fail(l, NULL, "'constraints' must not be empty");
    return;
  }
  if (n > CONSTRAINTS_MAX_RULES) {
    fail(l, NULL, "too many constraints (limit is %u)", CONSTRAINTS_MAX_RULES);
    return;
  }
  l->t->rules = arena_alloc(&l->t->arena, sizeof *l->t->rules * n);
  int16_t first_with_id[1000] = {0}; /* id number -> 1-based entry */
  uint32_t i = 0;
  for (const cJSON *c = v->child; c && !stop(l); c = c->next) read_rule(l, c, i++, first_with_id);
}

/* ---- parameters and targets ---- */

static void read_params(Loader *l, const cJSON *root) {
  const cJSON *v = get(l, root, "parameters", NULL, true);
  if (!v) return;
  if (!cJSON_IsObject(v)) {
    wrong_type(l, NULL, "parameters", "an object");
    return;
  }
  const char *names[PARAM_COUNT];
  for (int i = 0; i < PARAM_COUNT; i++) names[i] = param_info[i].name;
  if (!check_keys(l, v, names, PARAM_COUNT, "'parameters'", "parameter")) return;
  for (int i = 0; i < PARAM_COUNT && !stop(l); i++) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(v, names[i]);
    if (!p) {
      fail(l, "'parameters'", "missing parameter '%s'", names[i]);
      continue;
    }
    char where[64];
    snprintf(where, sizeof where, "parameter '%s'", names[i]);
    if (!cJSON_IsObject(p)) {
      fail(l, where, "must be an object");
      continue;
    }
    if (!check_keys(l, p, param_fields, NELEM(param_fields), where, "field")) continue;
    ConstraintParam *cp = &l->t->params[i];
    cp->name = names[i];
    cp->description = get_text(l, p, "description", where, true, false, false);
    cp->unit = get_text(l, p, "unit", where, true, false, true);
    const cJSON *rv = get(l, p, "rule", where, true);
    if (rv && !cJSON_IsNull(rv)) cp->rule = get_text(l, p, "rule", where, true, true, false);
    cp->source = get_text(l, p, "source", where, true, false, false);
    read_dispute(l, p, where, &cp->disputed, &cp->dispute_note);
  }
}

static void read_target(Loader *l, const cJSON *obj, MilTarget target) {
  char where[48];
  snprintf(where, sizeof where, "target '%s'", mil_target_name(target));
  if (!cJSON_IsObject(obj)) {
    fail(l, where, "must be an object");
    return;
  }
  const char *names[PARAM_COUNT];
  for (int i = 0; i < PARAM_COUNT; i++) names[i] = param_info[i].name;
  if (!check_keys(l, obj, names, PARAM_COUNT, where, "field")) return;
  ConstraintTarget *ct = &l->t->targets[target];
  ct->target = target;
  for (int i = 0; i < PARAM_COUNT; i++) {
    const char *key = names[i];
    if (param_info[i].kind == PK_STRING) {
      const char *s = get_text(l, obj, key, where, true, false, false);
      if (i == PARAM_PROGRAM_VERSION) ct->program_version = s;
      else ct->opset = s;
      continue;
    }
    const cJSON *v = get(l, obj, key, where, true);
    if (!v) continue;
    if (!is_positive_int(v)) {
      wrong_type(l, where, key, "a positive integer");
      continue;
    }
    uint64_t x = (uint64_t)v->valuedouble;
    if (i == PARAM_MIN_SURFACE_BYTES) ct->min_surface_bytes = x;
    else if (i == PARAM_SRAM_BUDGET_BYTES) ct->sram_budget_bytes = x;
    else ct->max_tensor_dim = x;
  }
}

static void read_targets(Loader *l, const cJSON *root) {
  const cJSON *v = get(l, root, "targets", NULL, true);
  if (!v) return;
  if (!cJSON_IsObject(v)) {
    wrong_type(l, NULL, "targets", "an object");
    return;
  }
  bool seen[CONSTRAINT_TARGET_COUNT] = {false};
  for (const cJSON *c = v->child; c && !stop(l); c = c->next) {
    MilTarget t;
    if (!mil_target_from_name(c->string, &t)) {
      fail(l, "'targets'", "unknown target '%.32s' (expected ios16, ios17 or ios18)", c->string);
      return;
    }
    if (seen[t]) {
      fail(l, "'targets'", "duplicate target '%s'", c->string);
      return;
    }
    seen[t] = true;
    read_target(l, c, t);
  }
  for (int t = 0; t < CONSTRAINT_TARGET_COUNT; t++)
    if (!seen[t]) fail(l, "'targets'", "missing target '%s'", mil_target_name((MilTarget)t));
}

/* ---- chips ---- */

static bool valid_chip_name(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 16) return false;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9'))) return false;
  return true;
}

/* One sourced value of a chip; returns the JSON value (NULL if unusable). */
static const cJSON *read_chip_value(Loader *l, const cJSON *chip, const char *key, const char *chip_where,
                                    ConstraintChipValue *cv) {
  char where[96];
  snprintf(where, sizeof where, "%s: '%s'", chip_where, key);
  const cJSON *obj = get(l, chip, key, chip_where, true);
  if (!obj) return NULL;
  if (!cJSON_IsObject(obj)) {
    fail(l, where, "must be an object");
    return NULL;
  }
  if (!check_keys(l, obj, chip_value_fields, NELEM(chip_value_fields), where, "field")) return NULL;
  cv->inherited = get_bool(l, obj, "inherited", where);
  cv->source = get_text(l, obj, "source", where, true, false, false);
  read_dispute(l, obj, where, &cv->disputed, &cv->dispute_note);
  return get(l, obj, "value", where, true);
}

/* A number a chip sets; an inherited one must equal the default of the
 * chip's target, so that "inherited" never hides a different figure. */
static void read_chip_number(Loader *l, const cJSON *chip, const char *key, const char *chip_where,
                             ConstraintChipValue *cv, uint64_t default_value) {
  const cJSON *v = read_chip_value(l, chip, key, chip_where, cv);
  if (!v) return;
  char where[96];
  snprintf(where, sizeof where, "%s: '%s'", chip_where, key);
  if (!is_positive_int(v)) {
    wrong_type(l, where, "value", "a positive integer");
    return;
  }
  cv->value = (uint64_t)v->valuedouble;
  if (cv->inherited && default_value && cv->value != default_value)
    fail(l, where, "an inherited value must be the target's default %llu, not %llu",
         (unsigned long long)default_value, (unsigned long long)cv->value);
}

static void read_chip(Loader *l, const cJSON *obj, ConstraintChip *chip) {
  char where[48];
  snprintf(where, sizeof where, "chip '%.16s'", obj->string);
  if (!valid_chip_name(obj->string)) {
    fail(l, "'chips'", "chip name '%.16s%s' must be lowercase letters and digits (at most 16, e.g. m1)",
         obj->string, strlen(obj->string) > 16 ? "..." : "");
    return;
  }
  if (!cJSON_IsObject(obj)) {
    fail(l, where, "must be an object");
    return;
  }
  if (!check_keys(l, obj, chip_fields, NELEM(chip_fields), where, "field")) return;
  chip->name = arena_strdup(&l->t->arena, obj->string);
  chip->description = get_text(l, obj, "description", where, true, false, false);
  const cJSON *tv = read_chip_value(l, obj, "target", where, &chip->dialect);
  const ConstraintTarget *defaults = NULL;
  if (tv) {
    char twhere[96];
    snprintf(twhere, sizeof twhere, "%s: 'target'", where);
    if (!cJSON_IsString(tv)) wrong_type(l, twhere, "value", "a string");
    else if (!mil_target_from_name(tv->valuestring, &chip->target))
      fail(l, twhere, "unknown target '%.32s' (expected ios16, ios17 or ios18)", tv->valuestring);
    else defaults = &l->t->targets[chip->target];
  }
  read_chip_number(l, obj, "min_surface_bytes", where, &chip->min_surface_bytes,
                   defaults ? defaults->min_surface_bytes : 0);
  read_chip_number(l, obj, "sram_budget_bytes", where, &chip->sram_budget_bytes,
                   defaults ? defaults->sram_budget_bytes : 0);
  read_chip_number(l, obj, "max_tensor_dim", where, &chip->max_tensor_dim, defaults ? defaults->max_tensor_dim : 0);
}

static void read_chips(Loader *l, const cJSON *root) {
  const cJSON *v = get(l, root, "chips", NULL, true);
  if (!v) return;
  if (!cJSON_IsObject(v)) {
    wrong_type(l, NULL, "chips", "an object");
    return;
  }
  uint32_t n = 0;
  for (const cJSON *c = v->child; c && n <= CONSTRAINTS_MAX_CHIPS; c = c->next) n++;
  if (n > CONSTRAINTS_MAX_CHIPS) {
    fail(l, NULL, "too many chips (limit is %u)", CONSTRAINTS_MAX_CHIPS);
    return;
  }
  for (const cJSON *c = v->child; c; c = c->next) /* at most 32 chips: quadratic is fine */
    for (const cJSON *p = v->child; p != c; p = p->next)
      if (!strcmp(p->string, c->string)) {
        fail(l, "'chips'", "duplicate chip '%.16s'", c->string);
        return;
      }
  l->t->chips = arena_alloc(&l->t->arena, sizeof *l->t->chips * (n ? n : 1));
  for (const cJSON *c = v->child; c && !stop(l); c = c->next) {
    ConstraintChip *chip = &l->t->chips[l->t->nchips];
    memset(chip, 0, sizeof *chip);
    read_chip(l, c, chip);
    if (chip->name) l->t->nchips++;
  }
}

/* ---- loading ---- */

static void line_col(const char *text, size_t off, uint32_t *line, uint32_t *col) {
  *line = 1;
  *col = 1;
  for (size_t i = 0; i < off; i++) {
    if (text[i] == '\n') {
      ++*line;
      *col = 1;
    } else {
      ++*col;
    }
  }
}

static bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

ConstraintTable *constraints_parse(const char *name, const char *json, size_t len, ConstraintPassExists *pass_exists,
                                   Diag *d) {
  Loader l = {name, d, xcalloc(1, sizeof(ConstraintTable)), true, pass_exists};
  arena_init(&l.t->arena);
  if (len > CONSTRAINTS_MAX_BYTES) {
    fail(&l, NULL, "the table is too large (limit is %u bytes)", CONSTRAINTS_MAX_BYTES);
    constraints_free(l.t);
    return NULL;
  }
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, false);
  if (root && end) { /* cJSON stops after the first value; anything but space after it is an error */
    while ((size_t)(end - json) < len && is_json_space(*end)) end++;
    if ((size_t)(end - json) < len) {
      cJSON_Delete(root);
      root = NULL;
    }
  }
  if (!root) {
    uint32_t line, col;
    size_t off = end && end >= json && (size_t)(end - json) <= len ? (size_t)(end - json) : 0;
    line_col(json, off, &line, &col);
    fail(&l, NULL, "malformed JSON at line %u, column %u", line, col);
    constraints_free(l.t);
    return NULL;
  }
  if (!cJSON_IsObject(root)) {
    fail(&l, NULL, "the top level must be an object");
  } else if (check_keys(&l, root, top_fields, NELEM(top_fields), NULL, "field")) {
    const cJSON *sv = get(&l, root, "schema_version", NULL, true);
    if (sv && !is_positive_int(sv)) wrong_type(&l, NULL, "schema_version", "a positive integer");
    else if (sv && sv->valuedouble != CONSTRAINTS_SCHEMA_VERSION)
      fail(&l, NULL, "schema version %.0f is not supported (this is version %u)", sv->valuedouble,
           CONSTRAINTS_SCHEMA_VERSION);
    l.t->schema_version = CONSTRAINTS_SCHEMA_VERSION;
    if (l.ok) {
      l.t->description = get_text(&l, root, "description", NULL, true, false, false);
      read_rules(&l, root);
      if (!stop(&l)) read_params(&l, root);
      if (!stop(&l)) read_targets(&l, root);
      if (!stop(&l)) read_chips(&l, root); /* after the targets: inherited values are checked against them */
      /* Cross references, once every rule is known. */
      for (int i = 0; i < PARAM_COUNT && l.ok; i++) {
        const ConstraintParam *p = &l.t->params[i];
        if (p->rule && !constraints_find(l.t, p->rule)) {
          char where[64];
          snprintf(where, sizeof where, "parameter '%s'", p->name);
          fail(&l, where, "unknown rule '%s' in 'rule'", p->rule);
        }
      }
    }
  }
  cJSON_Delete(root);
  if (!l.ok) {
    constraints_free(l.t);
    return NULL;
  }
  return l.t;
}

const char *constraints_builtin_text(size_t *len) {
  *len = constraints_builtin_json_len;
  return (const char *)constraints_builtin_json;
}

void constraints_free(ConstraintTable *t) {
  if (!t) return;
  arena_free(&t->arena);
  free(t);
}

/* ---- queries ---- */

const Constraint *constraints_find(const ConstraintTable *t, const char *id) {
  for (uint32_t i = 0; i < t->nrules; i++)
    if (!strcmp(t->rules[i].id, id)) return &t->rules[i];
  return NULL;
}

const ConstraintTarget *constraints_target(const ConstraintTable *t, MilTarget target) {
  return &t->targets[target];
}

const ConstraintChip *constraints_chip(const ConstraintTable *t, const char *name) {
  for (uint32_t i = 0; i < t->nchips; i++)
    if (!strcmp(t->chips[i].name, name)) return &t->chips[i];
  return NULL;
}

void constraints_chip_names(const ConstraintTable *t, StrBuf *out) {
  for (uint32_t i = 0; i < t->nchips; i++)
    sb_printf(out, "%s%s", i == 0 ? "" : i + 1 == t->nchips ? " or " : ", ", t->chips[i].name);
}

ConstraintTarget constraints_chip_target(const ConstraintTable *t, const ConstraintChip *chip, MilTarget target) {
  ConstraintTarget ct = t->targets[target];
  ct.chip = chip->name;
  ct.min_surface_bytes = chip->min_surface_bytes.value;
  ct.sram_budget_bytes = chip->sram_budget_bytes.value;
  ct.max_tensor_dim = chip->max_tensor_dim.value;
  return ct;
}

const char *constraint_category_name(ConstraintCategory c) {
  return c < CAT_COUNT ? category_names[c] : "unknown";
}

const char *constraint_severity_name(DiagLevel level) {
  return level <= DIAG_ERROR ? severity_names[level] : "unknown";
}

bool constraint_severity_from_name(const char *s, DiagLevel *out) {
  for (int i = 0; i < 3; i++)
    if (!strcmp(s, severity_names[i])) {
      *out = (DiagLevel)i;
      return true;
    }
  return false;
}

void constraint_checks_print(unsigned checks, StrBuf *out) {
  bool first = true;
  for (size_t i = 0; i < NELEM(check_names); i++)
    if (checks & (1u << i)) {
      sb_printf(out, "%s%s", first ? "" : ", ", check_names[i]);
      first = false;
    }
}

const ConstraintFigure *constraint_figure(const Constraint *c, const char *name) {
  for (uint32_t i = 0; i < c->nfigures; i++)
    if (!strcmp(c->figures[i].name, name)) return &c->figures[i];
  return NULL;
}

bool constraint_has_op(const Constraint *c, IrOpKind op) {
  for (uint32_t i = 0; i < c->nops; i++)
    if (c->ops[i] == op) return true;
  return false;
}
