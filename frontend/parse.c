/*
 * Frontend entry points: source text -> verified IR module.
 */
#include <stdlib.h>
#include <string.h>

#include "ast.h"
#include "oir_parser.h"
#include "orion/frontend.h"

/* From the generated scanner (reentrant API). */
typedef struct yy_buffer_state *YY_BUFFER_STATE;
int oir_yylex_init_extra(OirParseCtx *extra, yyscan_t *scanner);
int oir_yylex_destroy(yyscan_t scanner);
YY_BUFFER_STATE oir_yy_scan_bytes(const char *bytes, int len, yyscan_t scanner);
int oir_yyparse(yyscan_t scanner, OirParseCtx *ctx);

static IrModule *parse_registered(uint32_t file, Diag *d) {
  const SourceFile *src = srcset_get(d->sources, file);
  Arena arena;
  arena_init(&arena);
  OirParseCtx ctx = {.arena = &arena, .diag = d, .file = file};
  ctx.funcs_tail = &ctx.funcs;
  uint32_t errors_before = d->nerrors;
  yyscan_t scanner;
  if (oir_yylex_init_extra(&ctx, &scanner)) ice("cannot create the .oir scanner");
  oir_yy_scan_bytes(src->text, (int)src->len, scanner);
  int rc = oir_yyparse(scanner, &ctx);
  oir_yylex_destroy(scanner);
  IrModule *m = NULL;
  if (rc == 0 && d->nerrors == errors_before) m = oir_build(&ctx, ctx.funcs);
  else if (rc == 2) diag_error(d, (SrcSpan){file, 0, 0}, "parser stack exhausted");
  arena_free(&arena);
  return m;
}

IrModule *oir_parse_string(const char *name, const char *text, size_t len, Diag *d) {
  uint32_t file = srcset_load_string(name, text, len, d);
  return file ? parse_registered(file, d) : NULL;
}

IrModule *oir_parse_file(const char *path, Diag *d) {
  bool is_stdin = strcmp(path, "-") == 0;
  uint32_t file = srcset_load(path, d);
  if (!file) return NULL;
  IrModule *m = parse_registered(file, d);
  if (m && !is_stdin) {
    const char *slash = strrchr(path, '/');
    m->base_dir = slash ? arena_strndup(&m->arena, path, (size_t)(slash - path + (slash == path))) : ".";
  }
  return m;
}
