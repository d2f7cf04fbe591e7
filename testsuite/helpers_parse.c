/* The parsing helpers of helpers.h (they need the front end). */
#include "helpers.h"

#include <stdio.h>
#include <string.h>

void parsed_open(Parsed *p, const char *text) {
  srcset_init(&p->sources);
  diag_init(&p->d, &p->sources);
  sb_init(&p->diags);
  p->d.capture = &p->diags;
  p->m = oir_parse_string("t.oir", text, strlen(text), &p->d);
}

void parsed_close(Parsed *p) {
  ir_module_free(p->m);
  srcset_free(&p->sources);
  sb_free(&p->diags);
}

const char *parsed_output_type(Parsed *p, uint32_t index) {
  static char buf[256];
  IrFuncId f = ir_func_lookup(p->m, "main");
  StrBuf sb;
  sb_init(&sb);
  ir_type_print(&sb, &ir_value(p->m, ir_func(p->m, f)->outputs[index].value)->type);
  snprintf(buf, sizeof buf, "%s", sb.data);
  sb_free(&sb);
  return buf;
}

const char *diags_of(const char *text) {
  static char buf[8192];
  Parsed p;
  parsed_open(&p, text);
  snprintf(buf, sizeof buf, "%s", p.diags.data ? p.diags.data : "");
  parsed_close(&p);
  return buf;
}

const char *infer_of(const char *inputs, const char *body) {
  static char buf[1024];
  char text[4096];
  snprintf(text, sizeof text, "func main(%s) {\n%s\n}\n", inputs, body);
  Parsed p;
  parsed_open(&p, text);
  if (p.m) {
    snprintf(buf, sizeof buf, "%s", parsed_output_type(&p, 0));
  } else {
    /* First line of the first error, without the "t.oir:L:C: error: " prefix. */
    const char *s = p.diags.data ? p.diags.data : "";
    const char *e = strstr(s, "error: ");
    s = e ? e + 7 : s;
    size_t n = strcspn(s, "\n");
    snprintf(buf, sizeof buf, "%.*s", (int)n, s);
  }
  parsed_close(&p);
  return buf;
}
