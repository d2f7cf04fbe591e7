/*
 * The MIL syntax tree and the scanner/parser state (internal to the reader).
 *
 * The grammar actions build types, payload elements and literals directly in
 * their final form (public structs, in the program arena); everything else
 * (statements, arguments, functions) is chained in AstNode lists, newest
 * first, in a scratch arena. mil_read.c turns those lists into the program's
 * index-addressed arrays and runs the semantic checks.
 */
#ifndef ORION_RUNTIME_MIL_AST_H
#define ORION_RUNTIME_MIL_AST_H

#include "orion/mil_reader.h"

/* A list cell; lists are built newest first and flipped when flattened. */
typedef struct AstNode {
  struct AstNode *next;
  void *item;
} AstNode;

/* A typed value as parsed, before its payload is checked against the type. */
typedef struct AstLit {
  MilLiteral *lit; /* final struct; payload, blob fields and data filled by checks */
  /* BLOBFILE(path = ..., offset = ...): the two inner literals, by key */
  struct AstLit *blob_path, *blob_offset;
} AstLit;

/* An open bracket not closed yet: at the end of the text it is reported as
 * never closed. */
typedef struct OpenBracket {
  uint32_t offset;
  char c;
} OpenBracket;

typedef struct AstOperand {
  const char *name; /* a name, or NULL for a literal */
  AstLit *lit;
  SrcSpan loc;
} AstOperand;

typedef struct AstArg {
  const char *name;
  SrcSpan loc;
  bool is_list;
  AstNode *items; /* of AstOperand */
} AstArg;

typedef struct AstAttr {
  const char *name;
  SrcSpan loc;
  AstLit *value;
} AstAttr;

typedef struct AstStmt {
  AstNode *results; /* of MilVar */
  const char *op;
  SrcSpan loc, op_loc;
  AstNode *args;  /* of AstArg */
  AstNode *attrs; /* of AstAttr */
} AstStmt;

typedef struct AstFunc {
  const char *name, *opset;
  SrcSpan loc, opset_loc;
  AstNode *params; /* of MilVar */
  AstNode *attrs;  /* of AstAttr */
  AstNode *stmts;  /* of AstStmt */
  AstNode *rets;   /* of AstOperand */
} AstFunc;

/* Payload elements of the lists being parsed, innermost last: a list takes
 * its items off the top when it closes. */
typedef struct ElemStack {
  MilElem *items;
  uint32_t len, cap;
} ElemStack;

/* Scanner/parser state (yyextra and the parse parameter): no globals. */
typedef struct MilParseCtx {
  Arena *arena;   /* the program's: strings, types, elements, literals */
  Arena *scratch; /* AST nodes, freed after the build */
  Diag *diag;
  uint32_t file;
  uint32_t offset;  /* byte offset of the next token */
  uint32_t nesting; /* open brackets in the current statement */
  bool nesting_reported;
  uint32_t soft_errors; /* reported by grammar actions; the tree stays checkable */
  OpenBracket *open;    /* every bracket still open, innermost last */
  uint32_t nopen, cap_open;
  ElemStack elems;
  /* the program */
  const char *version; /* as written */
  AstNode *attrs; /* of AstAttr */
  AstNode *funcs; /* of AstFunc */
  bool seen_program;
} MilParseCtx;

/* Helpers for the grammar actions (mil_read.c). */
AstNode *mil_ast_push(MilParseCtx *ctx, AstNode *list, void *item);
/* Closes a bracketed payload list opened when the stack had `mark` items. */
MilElem mil_ast_close_list(MilParseCtx *ctx, MilElemKind kind, uint32_t mark, SrcSpan loc);
void mil_ast_push_elem(MilParseCtx *ctx, MilElem e);
/* A flattened copy of a list of MilTypes (for tuple members). */
const MilType *mil_ast_types(MilParseCtx *ctx, AstNode *list, uint32_t *n);

#endif
