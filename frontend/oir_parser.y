/*
 * Grammar of the .oir graph language (see docs/language.md).
 * Actions only build AST nodes; names, types and attributes are checked by
 * the builder. Recovery is at statement boundaries: `error ';'`.
 */
%code requires {
#include "ast.h"
typedef void *yyscan_t;
}

%code provides {
int oir_yylex(OIR_YYSTYPE *lval, SrcSpan *lloc, yyscan_t scanner);
}

%code {
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

static void oir_yyerror(SrcSpan *loc, yyscan_t scanner, OirParseCtx *ctx, const char *msg);
#define NEW(T) ((T *)arena_alloc(ctx->arena, sizeof(T)))
static SrcSpan span(OirParseCtx *ctx, SrcSpan l) { l.file = ctx->file; return l; }
}

%define api.pure full
%define api.prefix {oir_yy}
%define api.location.type {SrcSpan}
%define parse.error custom
%locations
%param {yyscan_t scanner}
%parse-param {OirParseCtx *ctx}
%expect 0

%union {
  int64_t i;
  double f;
  const char *s;
  AstLit *lit;
  AstType *type;
  AstArg *arg;
  AstResult *res;
  AstRet *ret;
  AstStmt *stmt;
  AstInput *input;
  AstFunc *func;
  struct { int64_t dims[IR_MAX_RANK]; uint32_t n; } dims;
}

%token <s> IDENT "identifier" STRING "string"
%token <i> INT "integer"
%token <f> FLOAT "number"
%token FUNC "func" PARAM "param" CONST "const" RETURN "return" CALL "call" AS "as"
%token TRUE "true" FALSE "false"
%token BAD "invalid token"

%type <type> type
%type <dims> dims dims_opt
%type <lit> literal lits lits_opt
%type <arg> arg args args_opt
%type <res> result results
%type <ret> ret rets
%type <stmt> stmt stmts decl_stmt
%type <input> input inputs inputs_opt
%type <func> func

%%

module
  : %empty
  | module func { *ctx->funcs_tail = $2; ctx->funcs_tail = &$2->next; }
  | module error '}'
  ;

func
  : FUNC IDENT '(' inputs_opt ')' '{' stmts '}' {
      $$ = NEW(AstFunc);
      $$->name = $2; $$->loc = span(ctx, @$); $$->name_loc = span(ctx, @2);
      $$->end_loc = span(ctx, @8);
      $$->inputs = $4; $$->stmts = $7;
    }
  ;

inputs_opt
  : %empty { $$ = NULL; }
  | inputs { $$ = $1; }
  | inputs ',' { $$ = $1; }
  ;

/* Lists are built in reverse and flipped by the builder. */
inputs
  : input { $$ = $1; }
  | inputs ',' input { $3->next = $1; $$ = $3; }
  ;

input
  : IDENT ':' type { $$ = NEW(AstInput); $$->name = $1; $$->type = $3; $$->loc = span(ctx, @1); }
  ;

type
  : IDENT '[' dims_opt ']' {
      $$ = NEW(AstType);
      $$->dtype = $1; $$->dtype_loc = span(ctx, @1); $$->loc = span(ctx, @$);
      memcpy($$->dims, $3.dims, sizeof $$->dims); $$->rank = $3.n;
    }
  ;

dims_opt
  : %empty { $$.n = 0; }
  | dims { $$ = $1; }
  ;

dims
  : INT { $$.n = 1; $$.dims[0] = $1; }
  | dims ',' INT { $$ = $1; if ($$.n < IR_MAX_RANK) $$.dims[$$.n] = $3; $$.n++; }
  ;

stmts
  : %empty { $$ = NULL; }
  | stmts stmt { if ($2) { $2->next = $1; $$ = $2; } else $$ = $1; }
  ;

stmt
  : decl_stmt { $$ = $1; }
  | IDENT decl_stmt {
      /* A contextual modifier ("frozen param ..."), not a reserved word: the builder checks it. */
      $$ = $2; $$->modifier = $1; $$->modifier_loc = span(ctx, @1); $$->loc = span(ctx, @$);
    }
  | results '=' IDENT '(' args_opt ')' ';' {
      $$ = NEW(AstStmt); $$->kind = STMT_OP; $$->loc = span(ctx, @$);
      $$->results = $1; $$->op = $3; $$->op_loc = span(ctx, @3); $$->args = $5;
    }
  | results '=' CALL IDENT '(' args_opt ')' AS IDENT ';' {
      $$ = NEW(AstStmt); $$->kind = STMT_CALL; $$->loc = span(ctx, @$);
      $$->results = $1; $$->op = $4; $$->op_loc = span(ctx, @4); $$->args = $6;
      $$->instance = $9; $$->instance_loc = span(ctx, @9);
    }
  | RETURN rets ';' {
      $$ = NEW(AstStmt); $$->kind = STMT_RETURN; $$->loc = span(ctx, @$); $$->rets = $2;
    }
  | error ';' { $$ = NULL; yyerrok; }
  ;

decl_stmt
  : PARAM IDENT ':' type '=' IDENT ';' {
      $$ = NEW(AstStmt); $$->kind = STMT_PARAM; $$->loc = span(ctx, @$);
      $$->name = $2; $$->name_loc = span(ctx, @2); $$->type = $4;
      $$->source = $6; $$->source_loc = span(ctx, @6);
    }
  | PARAM IDENT ':' type '=' IDENT '(' args_opt ')' ';' {
      $$ = NEW(AstStmt); $$->kind = STMT_PARAM; $$->loc = span(ctx, @$);
      $$->name = $2; $$->name_loc = span(ctx, @2); $$->type = $4;
      $$->source = $6; $$->source_loc = span(ctx, @6);
      $$->source_args = $8; $$->source_has_parens = true;
    }
  | CONST IDENT ':' type '=' literal ';' {
      $$ = NEW(AstStmt); $$->kind = STMT_CONST; $$->loc = span(ctx, @$);
      $$->name = $2; $$->name_loc = span(ctx, @2); $$->type = $4; $$->value = $6;
    }
  ;

results
  : result { $$ = $1; }
  | results ',' result { $3->next = $1; $$ = $3; }
  ;

result
  : IDENT { $$ = NEW(AstResult); $$->name = $1; $$->loc = span(ctx, @1); }
  | IDENT ':' type { $$ = NEW(AstResult); $$->name = $1; $$->type = $3; $$->loc = span(ctx, @1); }
  ;

args_opt
  : %empty { $$ = NULL; }
  | args { $$ = $1; }
  ;

args
  : arg { $$ = $1; }
  | args ',' arg { $3->next = $1; $$ = $3; }
  ;

arg
  : IDENT { $$ = NEW(AstArg); $$->kind = ARG_VALUE; $$->name = $1; $$->loc = span(ctx, @$); }
  | IDENT '=' literal {
      $$ = NEW(AstArg); $$->kind = ARG_ATTR; $$->name = $1; $$->lit = $3; $$->loc = span(ctx, @$);
    }
  | literal { $$ = NEW(AstArg); $$->kind = ARG_LIT; $$->lit = $1; $$->loc = span(ctx, @$); }
  ;

literal
  : INT { $$ = NEW(AstLit); $$->kind = LIT_INT; $$->i = $1; $$->loc = span(ctx, @$); }
  | FLOAT { $$ = NEW(AstLit); $$->kind = LIT_FLOAT; $$->f = $1; $$->loc = span(ctx, @$); }
  | STRING { $$ = NEW(AstLit); $$->kind = LIT_STR; $$->s = $1; $$->loc = span(ctx, @$); }
  | TRUE { $$ = NEW(AstLit); $$->kind = LIT_BOOL; $$->b = true; $$->loc = span(ctx, @$); }
  | FALSE { $$ = NEW(AstLit); $$->kind = LIT_BOOL; $$->b = false; $$->loc = span(ctx, @$); }
  | '[' lits_opt ']' {
      $$ = NEW(AstLit); $$->kind = LIT_LIST; $$->loc = span(ctx, @$);
      /* Flip the reversed item chain into source order. */
      AstLit *prev = NULL, *it = $2;
      uint32_t n = 0;
      while (it) { AstLit *nx = it->next; it->next = prev; prev = it; it = nx; n++; }
      $$->items = prev; $$->n = n;
    }
  ;

lits_opt
  : %empty { $$ = NULL; }
  | lits { $$ = $1; }
  ;

lits
  : literal { $$ = $1; }
  | lits ',' literal { $3->next = $1; $$ = $3; }
  ;

rets
  : ret { $$ = $1; }
  | rets ',' ret { $3->next = $1; $$ = $3; }
  ;

ret
  : IDENT { $$ = NEW(AstRet); $$->out_name = $1; $$->value = $1; $$->loc = span(ctx, @$); }
  | IDENT '=' IDENT { $$ = NEW(AstRet); $$->out_name = $1; $$->value = $3; $$->loc = span(ctx, @$); }
  ;

%%

static void oir_yyerror(SrcSpan *loc, yyscan_t scanner, OirParseCtx *ctx, const char *msg) {
  (void)scanner;
  diag_error(ctx->diag, span(ctx, *loc), "%s", msg);
}

/* "unexpected 'foo', expected ';' or ','": the offending token is quoted from
 * the source so the message shows what the user wrote. */
static int yyreport_syntax_error(const yypcontext_t *pctx, yyscan_t scanner, OirParseCtx *ctx) {
  (void)scanner;
  if (ctx->lexer_reported) { /* the lexer already explained this token */
    ctx->lexer_reported = false;
    return 0;
  }
  SrcSpan loc = span(ctx, *yypcontext_location(pctx));
  yysymbol_kind_t tok = yypcontext_token(pctx);
  StrBuf sb;
  sb_init(&sb);
  if (tok == YYSYMBOL_YYEOF) {
    sb_puts(&sb, "unexpected end of file");
  } else {
    const SourceFile *f = srcset_get(ctx->diag->sources, ctx->file);
    uint32_t n = loc.end - loc.start;
    bool quote = tok == YYSYMBOL_IDENT || tok == YYSYMBOL_INT || tok == YYSYMBOL_FLOAT || tok == YYSYMBOL_STRING;
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
