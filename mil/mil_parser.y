/*
 * Grammar of MIL text (mil-spec §1.8), both dialects, with the tolerances of
 * §1.11: parenthesised result lists, optional attribute blocks, literal
 * arguments, empty payloads, keywords as argument and attribute names (the
 * iOS18 op coreml_update_state has an argument called `state`).
 *
 * Actions only build the tree (types, elements and literals in final form,
 * the rest as AstNode lists); names and payloads are checked by mil_read.c.
 * Recovery is at statement ends (`error ';'`) and, for a broken function
 * header, at the `{` that opens the body.
 */
%code requires {
#include "mil_ast.h"
typedef void *yyscan_t;
}

%code provides {
int mil_yylex(MIL_YYSTYPE *lval, SrcSpan *lloc, yyscan_t scanner);
}

%code {
#include <math.h>
#include <string.h>

#define YYLLOC_DEFAULT(Cur, Rhs, N)                      \
  do {                                                   \
    if (N) {                                             \
      (Cur).file = YYRHSLOC(Rhs, 1).file;                \
      (Cur).start = YYRHSLOC(Rhs, 1).start;              \
      (Cur).end = YYRHSLOC(Rhs, N).end;                  \
    } else {                                             \
      (Cur).file = YYRHSLOC(Rhs, 0).file;                \
      (Cur).start = (Cur).end = YYRHSLOC(Rhs, 0).end;    \
    }                                                    \
  } while (0)

static void mil_yyerror(SrcSpan *loc, yyscan_t scanner, MilParseCtx *ctx, const char *msg);
#define NEW(T) ((T *)arena_alloc(ctx->scratch, sizeof(T)))
#define PUSH(list, item) mil_ast_push(ctx, (list), (item))
static SrcSpan span(MilParseCtx *ctx, SrcSpan l) { l.file = ctx->file; return l; }
/* An error that leaves the tree usable: the checks of mil_read.c still run. */
#define SOFT_ERROR(loc, ...) (ctx->soft_errors++, diag_error(ctx->diag, span(ctx, loc), __VA_ARGS__))
static const char *source_text(MilParseCtx *ctx, SrcSpan l);
static MilType *tensor_type(MilParseCtx *ctx, MilDType dt, const int64_t *dims, uint32_t rank, bool bare, SrcSpan loc);
static MilType *compound_type(MilParseCtx *ctx, MilTypeKind kind, const MilType *sub, uint32_t nsub, int64_t length);
static AstLit *literal(MilParseCtx *ctx, MilPayloadKind payload);
static AstLit *blob_literal(MilParseCtx *ctx, const char *k1, SrcSpan l1, AstLit *v1, const char *k2, SrcSpan l2,
                            AstLit *v2);
}

%define api.pure full
%define api.prefix {mil_yy}
%define api.location.type {SrcSpan}
%define parse.error custom
%define parse.lac full
%locations
%param {yyscan_t scanner}
%parse-param {MilParseCtx *ctx}
%expect 0

%union {
  const char *s;
  MilDType dt;
  MilElem elem;
  uint32_t mark;
  int64_t dim;
  MilType *type;
  MilVar *var;
  AstNode *list;
  AstLit *lit;
  AstOperand *operand;
  AstArg *arg;
  AstAttr *attr;
  AstStmt *stmt;
  AstFunc *func;
  struct { int64_t d[MIL_MAX_RANK]; uint32_t n; } dims;
}

%token <s> IDENT "identifier"
%token <elem> INT "integer" FLOAT "number" STRING "string"
%token <dt> DTYPE "dtype"
%token PROGRAM "'program'" FUNC "'func'" TENSOR "'tensor'" LIST "'list'" DICT "'dict'" TUPLE "'tuple'"
%token STATE "'state'" TRUE "'true'" FALSE "'false'" BLOBFILE "'BLOBFILE'" ARROW "'->'"
%token BAD "invalid token"

%type <s> word
%type <dt> dtype
%type <dim> dim
%type <dims> dims dims_opt
%type <type> type known_type
%type <list> types types_opt params params_opt vars results stmts args args_opt operands attrs attrs_opt
%type <list> attr_block_opt rets rets_opt body
%type <var> var
%type <stmt> stmt
%type <func> func
%type <arg> arg
%type <operand> operand ret
%type <attr> attr
%type <lit> typed_value known_typed_value payload
%type <elem> elem
%type <mark> mark

%%

file
  : PROGRAM '(' version ')' attr_block_opt '{' funcs '}' { ctx->attrs = $5; ctx->seen_program = true; }
  ;

version
  : INT { ctx->version = source_text(ctx, @1); }
  | FLOAT { ctx->version = source_text(ctx, @1); }
  ;

funcs
  : %empty
  | funcs func { if ($2) ctx->funcs = PUSH(ctx->funcs, $2); }
  ;

func
  : FUNC IDENT '<' IDENT '>' '(' params_opt ')' attr_block_opt body ARROW '(' rets_opt ')' ';' {
      $$ = NEW(AstFunc);
      $$->name = $2; $$->loc = span(ctx, @2);
      $$->opset = $4; $$->opset_loc = span(ctx, @4);
      $$->params = $7; $$->attrs = $9; $$->stmts = $10; $$->rets = $13;
    }
  | FUNC error body ARROW '(' rets_opt ')' ';' { $$ = NULL; }
  ;

/* A statement whose error runs into the closing brace (an unterminated
 * string, a missing ';') ends the body there. */
body
  : '{' stmts '}' { $$ = $2; }
  | '{' stmts error '}' { $$ = $2; ctx->elems.len = 0; }
  ;

params_opt
  : %empty { $$ = NULL; }
  | params { $$ = $1; }
  ;

/* Lists are built newest first and flipped by mil_read.c. */
params
  : var { $$ = PUSH(NULL, $1); }
  | params ',' var { $$ = PUSH($1, $3); }
  ;

var
  : type IDENT { $$ = NEW(MilVar); $$->type = *$1; $$->name = $2; $$->loc = span(ctx, @2); }
  ;

rets_opt
  : %empty { $$ = NULL; }
  | rets { $$ = $1; }
  ;

rets
  : ret { $$ = PUSH(NULL, $1); }
  | rets ',' ret { $$ = PUSH($1, $3); }
  ;

ret
  : IDENT { $$ = NEW(AstOperand); $$->name = $1; $$->loc = span(ctx, @1); }
  ;

stmts
  : %empty { $$ = NULL; }
  | stmts stmt { $$ = $2 ? PUSH($1, $2) : $1; }
  ;

stmt
  : results '=' word '(' args_opt ')' attr_block_opt ';' {
      $$ = NEW(AstStmt); $$->loc = span(ctx, @$);
      $$->results = $1; $$->op = $3; $$->op_loc = span(ctx, @3); $$->args = $5; $$->attrs = $7;
    }
  | error ';' { $$ = NULL; ctx->elems.len = 0; yyerrok; }
  ;

results
  : vars { $$ = $1; }
  | '(' vars ')' { $$ = $2; }
  ;

vars
  : var { $$ = PUSH(NULL, $1); }
  | vars ',' var { $$ = PUSH($1, $3); }
  ;

/* Argument, attribute and op names may be keywords. */
word
  : IDENT { $$ = $1; }
  | DTYPE { $$ = mil_dtype_name($1); }
  | PROGRAM { $$ = "program"; }
  | FUNC { $$ = "func"; }
  | TENSOR { $$ = "tensor"; }
  | LIST { $$ = "list"; }
  | DICT { $$ = "dict"; }
  | TUPLE { $$ = "tuple"; }
  | STATE { $$ = "state"; }
  | TRUE { $$ = "true"; }
  | FALSE { $$ = "false"; }
  | BLOBFILE { $$ = "BLOBFILE"; }
  ;

args_opt
  : %empty { $$ = NULL; }
  | args { $$ = $1; }
  ;

args
  : arg { $$ = PUSH(NULL, $1); }
  | args ',' arg { $$ = PUSH($1, $3); }
  ;

arg
  : word '=' operand {
      $$ = NEW(AstArg); $$->name = $1; $$->loc = span(ctx, @1); $$->items = PUSH(NULL, $3);
    }
  | word '=' '(' operands ')' {
      $$ = NEW(AstArg); $$->name = $1; $$->loc = span(ctx, @1); $$->items = $4; $$->is_list = true;
    }
  ;

operands
  : operand { $$ = PUSH(NULL, $1); }
  | operands ',' operand { $$ = PUSH($1, $3); }
  ;

operand
  : IDENT { $$ = NEW(AstOperand); $$->name = $1; $$->loc = span(ctx, @1); }
  | known_typed_value { $$ = NEW(AstOperand); $$->lit = $1; $$->loc = span(ctx, @1); }
  ;

attr_block_opt
  : %empty { $$ = NULL; }
  | '[' attrs_opt ']' { $$ = $2; }
  ;

attrs_opt
  : %empty { $$ = NULL; }
  | attrs { $$ = $1; }
  ;

attrs
  : attr { $$ = PUSH(NULL, $1); }
  | attrs ',' attr { $$ = PUSH($1, $3); }
  ;

attr
  : word '=' typed_value { $$ = NEW(AstAttr); $$->name = $1; $$->loc = span(ctx, @1); $$->value = $3; }
  ;

/* A name, or a typed value whose type is spelled with keywords only: after
 * `x = y`, an identifier `y` cannot also start an (unknown) type. */
typed_value
  : type payload { $$ = $2; $$->lit->type = *$1; $$->lit->loc = span(ctx, @$); }
  ;

known_typed_value
  : known_type payload { $$ = $2; $$->lit->type = *$1; $$->lit->loc = span(ctx, @$); }
  ;

payload
  : '(' ')' { $$ = literal(ctx, MIL_PAYLOAD_NONE); }
  | '(' elem ')' { $$ = literal(ctx, MIL_PAYLOAD_INLINE); $$->lit->value = $2; }
  | '(' BLOBFILE '(' word '=' typed_value ',' word '=' typed_value ')' ')' {
      $$ = blob_literal(ctx, $4, @4, $6, $8, @8, $10);
      $$->lit->blob_loc = span(ctx, @2);
    }
  ;

type
  : known_type { $$ = $1; }
  | IDENT { SOFT_ERROR(@1, "unknown dtype '%s'", $1); $$ = tensor_type(ctx, MIL_DT_NONE, NULL, 0, true, @$); }
  ;

known_type
  : TENSOR '<' dtype ',' '[' dims_opt ']' '>' { $$ = tensor_type(ctx, $3, $6.d, $6.n, false, @$); }
  | DTYPE { $$ = tensor_type(ctx, $1, NULL, 0, true, @$); }
  | LIST '<' type ',' dim '>' { $$ = compound_type(ctx, MIL_TYPE_LIST, $3, 1, $5); }
  | TUPLE '<' types_opt '>' {
      uint32_t n;
      const MilType *sub = mil_ast_types(ctx, $3, &n);
      $$ = compound_type(ctx, MIL_TYPE_TUPLE, sub, n, 0);
    }
  | DICT '<' type ',' type '>' {
      MilType *kv = arena_alloc(ctx->arena, 2 * sizeof *kv);
      kv[0] = *$3; kv[1] = *$5;
      $$ = compound_type(ctx, MIL_TYPE_DICT, kv, 2, 0);
    }
  | STATE '<' type '>' { $$ = compound_type(ctx, MIL_TYPE_STATE, $3, 1, 0); }
  ;

dtype
  : DTYPE { $$ = $1; }
  | IDENT { SOFT_ERROR(@1, "unknown dtype '%s'", $1); $$ = MIL_DT_NONE; }
  ;

types_opt
  : %empty { $$ = NULL; }
  | types { $$ = $1; }
  ;

types
  : type { $$ = PUSH(NULL, $1); }
  | types ',' type { $$ = PUSH($1, $3); }
  ;

dims_opt
  : %empty { $$.n = 0; }
  | dims { $$ = $1; }
  ;

dims
  : dim { $$.n = 1; $$.d[0] = $1; }
  | dims ',' dim { $$ = $1; if ($$.n < MIL_MAX_RANK) $$.d[$$.n] = $3; $$.n++; }
  ;

dim
  : INT {
      if ($1.i < 0 || $1.big) {
        SOFT_ERROR(@1, "dimension %s is out of range (write ? for an unknown size)", source_text(ctx, @1));
        $$ = 0;
      } else {
        $$ = $1.i;
      }
    }
  | '?' { $$ = -1; }
  ;

/* Payload elements: a list takes its items off ctx->elems (from its mark). */
elem
  : INT { $$ = $1; }
  | FLOAT { $$ = $1; }
  | STRING { $$ = $1; }
  | TRUE { memset(&$$, 0, sizeof $$); $$.kind = MIL_ELEM_BOOL; $$.b = true; $$.offset = @1.start; }
  | FALSE { memset(&$$, 0, sizeof $$); $$.kind = MIL_ELEM_BOOL; $$.b = false; $$.offset = @1.start; }
  | IDENT {
      /* inf and nan are identifiers to the scanner (a variable may be named so) */
      memset(&$$, 0, sizeof $$);
      $$.kind = MIL_ELEM_FLOAT;
      $$.offset = @1.start;
      if (strcmp($1, "inf") == 0) $$.f = HUGE_VAL;
      else if (strcmp($1, "nan") == 0) $$.f = (double)NAN;
      else diag_error(ctx->diag, span(ctx, @1), "unexpected identifier '%s' in a literal", $1);
    }
  | '[' mark elems_opt ']' { $$ = mil_ast_close_list(ctx, MIL_ELEM_LIST, $2, span(ctx, @$)); }
  | '(' mark elems_opt ')' { $$ = mil_ast_close_list(ctx, MIL_ELEM_TUPLE, $2, span(ctx, @$)); }
  | '{' mark elems_opt '}' { $$ = mil_ast_close_list(ctx, MIL_ELEM_DICT, $2, span(ctx, @$)); }
  ;

mark
  : %empty { $$ = ctx->elems.len; }
  ;

elems_opt
  : %empty
  | elems
  ;

elems
  : elem { mil_ast_push_elem(ctx, $1); }
  | elems ',' elem { mil_ast_push_elem(ctx, $3); }
  ;

%%

static void mil_yyerror(SrcSpan *loc, yyscan_t scanner, MilParseCtx *ctx, const char *msg) {
  (void)scanner;
  diag_error(ctx->diag, span(ctx, *loc), "%s", msg);
}

/* The source text of a span, copied (numbers are kept as written). */
static const char *source_text(MilParseCtx *ctx, SrcSpan l) {
  const SourceFile *f = srcset_get(ctx->diag->sources, ctx->file);
  if (!f || l.end > f->len || l.end < l.start) return "";
  return arena_strndup(ctx->arena, f->text + l.start, l.end - l.start);
}

static MilType *tensor_type(MilParseCtx *ctx, MilDType dt, const int64_t *dims, uint32_t rank, bool bare, SrcSpan loc) {
  MilType *t = arena_alloc(ctx->arena, sizeof *t);
  t->kind = MIL_TYPE_TENSOR;
  t->dtype = dt;
  t->bare = bare;
  if (rank > MIL_MAX_RANK) {
    SOFT_ERROR(loc, "tensor rank %u exceeds the limit of %d", rank, MIL_MAX_RANK);
    rank = MIL_MAX_RANK;
  }
  t->rank = rank;
  if (rank) memcpy(t->dims, dims, rank * sizeof *dims);
  return t;
}

static MilType *compound_type(MilParseCtx *ctx, MilTypeKind kind, const MilType *sub, uint32_t nsub, int64_t length) {
  MilType *t = arena_alloc(ctx->arena, sizeof *t);
  t->kind = kind;
  t->sub = sub;
  t->nsub = nsub;
  t->length = length;
  return t;
}

/* The type and location are filled in by the typed value around the payload. */
static AstLit *literal(MilParseCtx *ctx, MilPayloadKind payload) {
  AstLit *l = NEW(AstLit);
  l->lit = arena_alloc(ctx->arena, sizeof *l->lit);
  l->lit->payload = payload;
  return l;
}

/* BLOBFILE(path = ..., offset = ...); either order is read. */
static AstLit *blob_literal(MilParseCtx *ctx, const char *k1, SrcSpan l1, AstLit *v1, const char *k2, SrcSpan l2,
                            AstLit *v2) {
  AstLit *l = literal(ctx, MIL_PAYLOAD_BLOB);
  if (strcmp(k1, "path") == 0 && strcmp(k2, "offset") == 0) {
    l->blob_path = v1;
    l->blob_offset = v2;
  } else if (strcmp(k1, "offset") == 0 && strcmp(k2, "path") == 0) {
    l->blob_path = v2;
    l->blob_offset = v1;
  } else {
    bool first_ok = strcmp(k1, "path") == 0 || strcmp(k1, "offset") == 0;
    SOFT_ERROR(first_ok ? l2 : l1, "unexpected '%s' in BLOBFILE, expected path and offset", first_ok ? k2 : k1);
  }
  return l;
}

/* "unexpected identifier 'foo', expected '=' or ','": the offending token is
 * quoted from the source so the message shows what was written. A BAD token
 * has already been explained by the scanner. */
static int yyreport_syntax_error(const yypcontext_t *pctx, yyscan_t scanner, MilParseCtx *ctx) {
  (void)scanner;
  yysymbol_kind_t tok = yypcontext_token(pctx);
  if (tok == YYSYMBOL_BAD) return 0;
  SrcSpan loc = span(ctx, *yypcontext_location(pctx));
  StrBuf sb;
  sb_init(&sb);
  if (tok == YYSYMBOL_YYEOF && ctx->nopen) {
    /* The text ends inside brackets: the innermost open one says where. */
    const OpenBracket *ob = &ctx->open[ctx->nopen - 1];
    diag_error(ctx->diag, (SrcSpan){ctx->file, ob->offset, ob->offset + 1}, "'%c' is never closed", ob->c);
    sb_free(&sb);
    return 0;
  }
  if (tok == YYSYMBOL_YYEOF) {
    sb_puts(&sb, "unexpected end of file");
  } else {
    const SourceFile *f = srcset_get(ctx->diag->sources, ctx->file);
    uint32_t n = loc.end - loc.start;
    bool quote = tok == YYSYMBOL_IDENT || tok == YYSYMBOL_INT || tok == YYSYMBOL_FLOAT || tok == YYSYMBOL_STRING ||
                 tok == YYSYMBOL_DTYPE;
    if (quote && f && n > 0 && n <= 40 && loc.end <= f->len) {
      sb_printf(&sb, "unexpected %s '", yysymbol_name(tok));
      for (uint32_t i = 0; i < n; i++) {
        char c = f->text[loc.start + i];
        sb_putc(&sb, (c >= 0x20 && c < 0x7f) ? c : '?');
      }
      sb_putc(&sb, '\'');
    } else {
      sb_printf(&sb, "unexpected %s", yysymbol_name(tok));
    }
  }
  enum { MAX_EXPECTED = 5 };
  yysymbol_kind_t expected[MAX_EXPECTED];
  int n = yypcontext_expected_tokens(pctx, expected, MAX_EXPECTED);
  if (n > 0) {
    sb_puts(&sb, ", expected ");
    for (int i = 0; i < n; i++)
      sb_printf(&sb, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ", yysymbol_name(expected[i]));
  }
  diag_error(ctx->diag, loc, "%s", sb.data);
  sb_free(&sb);
  return 0;
}
