/*
 * The training-contract tests' shared refusal check (contract_check.h).
 */
#include "contract_check.h"

#include <criterion/criterion.h>
#include <string.h>

#include "orion/manifest.h"
#include "orion/support.h"

void contract_refused(const char *manifest, const char *after, const char *from, const char *to, const char *want) {
  const char *t = strstr(manifest, after);
  cr_assert_not_null(t, "'%s' is not in the manifest", after);
  const char *at = strstr(t, from);
  cr_assert_not_null(at, "'%s' is not after '%s'", from, after);
  StrBuf text;
  sb_init(&text);
  sb_putn(&text, manifest, (size_t)(at - manifest));
  sb_puts(&text, to);
  sb_puts(&text, at + strlen(from));
  StrBuf msgs;
  sb_init(&msgs);
  Diag d;
  diag_init(&d, NULL);
  d.capture = &msgs;
  Package p;
  cr_assert_not(package_parse_manifest(text.data, text.len, "P/Manifest.plist", &p, &d), "accepted: %s -> %s", from, to);
  StrBuf expect;
  sb_init(&expect);
  sb_printf(&expect, "error: P/Manifest.plist: manifest: %s\n", want);
  cr_assert(msgs.data && strstr(msgs.data, expect.data), "expected\n  %s\ngot\n  %s", expect.data,
            msgs.data ? msgs.data : "");
  sb_free(&expect);
  sb_free(&msgs);
  sb_free(&text);
}
