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
  if (len > MAX_SOURCE_BYTES) {
    diag_error(d, (SrcSpan){0}, "'%s' is too large (limit is %u bytes)", name, MAX_SOURCE_BYTES);
    return NULL;
  }
  uint32_t file = srcset_add(d->sources, name, text, len);
  return parse_registered(file, d);
}

IrModule *oir_parse_file(const char *path, Diag *d) {
  char *text;
  size_t len;
  const char *err;
  bool is_stdin = strcmp(path, "-") == 0;
  if (!read_file(is_stdin ? "/dev/stdin" : path, MAX_SOURCE_BYTES, &text, &len, &err)) {
    if (strcmp(err, "file too large") == 0)
      diag_error(d, (SrcSpan){0}, "'%s' is too large (limit is %u bytes)", path, MAX_SOURCE_BYTES);
    else
      diag_error(d, (SrcSpan){0}, "cannot read '%s': %s", path, err);
    return NULL;
  }
  uint32_t file = srcset_add(d->sources, is_stdin ? "<stdin>" : path, text, len);
  free(text);
  IrModule *m = parse_registered(file, d);
  if (m && !is_stdin) {
    const char *slash = strrchr(path, '/');
    m->base_dir = slash ? arena_strndup(&m->arena, path, (size_t)(slash - path + (slash == path))) : ".";
  }
  return m;
}
