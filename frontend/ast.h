/*
 * The .oir syntax tree: what the grammar actions build, nothing more. Names
 * are not resolved and nothing is checked here; the builder (build.c) does
 * that. Everything lives in the parse arena.
 */
#ifndef ORION_FRONTEND_AST_H
#define ORION_FRONTEND_AST_H

#include "orion/ir.h"

typedef enum AstLitKind { LIT_INT, LIT_FLOAT, LIT_BOOL, LIT_STR, LIT_LIST } AstLitKind;

typedef struct AstLit {
  AstLitKind kind;
  int64_t i;
  double f;
  bool b;
  const char *s;
  struct AstLit *items; /* LIT_LIST: first item; items chain through next */
  uint32_t n;
  struct AstLit *next;
  SrcSpan loc;
} AstLit;

typedef struct AstType {
  const char *dtype;
  SrcSpan dtype_loc;
  int64_t dims[IR_MAX_RANK];
  uint32_t rank; /* may exceed IR_MAX_RANK: the builder reports it */
  SrcSpan loc;
} AstType;

typedef enum AstArgKind { ARG_VALUE, ARG_LIT, ARG_ATTR } AstArgKind;

/* One argument in parentheses: a value name, a positional literal, or name=literal. */
typedef struct AstArg {
  AstArgKind kind;
  const char *name; /* ARG_VALUE: the value; ARG_ATTR: the attribute */
  AstLit *lit;      /* ARG_LIT, ARG_ATTR */
  SrcSpan loc;
  struct AstArg *next;
} AstArg;

typedef struct AstResult {
  const char *name;
  AstType *type; /* optional annotation */
  SrcSpan loc;
  struct AstResult *next;
} AstResult;

typedef struct AstRet {
  const char *out_name;
  const char *value;
  SrcSpan loc;
  struct AstRet *next;
} AstRet;

typedef enum AstStmtKind { STMT_PARAM, STMT_CONST, STMT_OP, STMT_CALL, STMT_RETURN } AstStmtKind;

typedef struct AstStmt {
  AstStmtKind kind;
  SrcSpan loc;
  /* param/const */
  const char *name;
  SrcSpan name_loc;
  AstType *type;
  const char *modifier; /* a word before `param`/`const` ("frozen"), or NULL */
  SrcSpan modifier_loc;
  const char *source; /* param: initializer or loader name */
  SrcSpan source_loc;
  AstArg *source_args;
  bool source_has_parens;
  AstLit *value; /* const */
  /* op/call */
  AstResult *results;
  const char *op;
  SrcSpan op_loc;
  AstArg *args;
  const char *instance;
  SrcSpan instance_loc;
  /* return */
  AstRet *rets;
  struct AstStmt *next;
} AstStmt;

typedef struct AstInput {
  const char *name;
  AstType *type;
  SrcSpan loc;
  struct AstInput *next;
} AstInput;

typedef struct AstFunc {
  const char *name;
  SrcSpan loc, name_loc, end_loc;
  AstInput *inputs;
  AstStmt *stmts;
  struct AstFunc *next;
} AstFunc;

/* Scanner/parser state (yyextra and the parse parameter): no globals. */
typedef struct OirParseCtx {
  Arena *arena;
  Diag *diag;
  uint32_t file;
  uint32_t offset;  /* byte offset of the next token */
  uint32_t nesting; /* open brackets in the current statement */
  bool nesting_reported;
  uint32_t comment_start; /* of the open block comment */
  bool lexer_reported; /* the lexer reported this token: no second syntax error */
  AstFunc *funcs, **funcs_tail;
} OirParseCtx;

/* Builds and verifies the IR from the AST; NULL when errors were reported. */
IrModule *oir_build(OirParseCtx *ctx, AstFunc *funcs);

#endif
