/* The cached weight-update choice (ane_update_cache.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ane_update.h"
#include "ane_update_cache.h"
#include "orion/hash.h"

static bool valid_component(const char *s) {
  size_t n = s ? strlen(s) : 0;
  if (n == 0 || n > 64 || s[0] == '.') return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
          c == '-'))
      return false;
  }
  return true;
}

static const char *process_env(const char *name) { return getenv(name); }

bool ane_update_cache_path(const char *dir, AneGetenv *env, const char *os_build, const char *ane_arch, StrBuf *path,
                           Diag *d) {
  if (!valid_component(os_build) || !valid_component(ane_arch)) {
    diag_error(d, (SrcSpan){0},
               "the ane backend cannot name its weight-update cache for OS build '%.64s' and ANE architecture "
               "'%.64s': each must be 1 to 64 letters, digits, '.', '_' or '-'",
               os_build ? os_build : "", ane_arch ? ane_arch : "");
    return false;
  }
  if (!env) env = process_env;
  const char *xdg = env("XDG_CACHE_HOME"), *home = env("HOME");
  if (dir) sb_printf(path, "%s", dir);
  else if (xdg && xdg[0] == '/') sb_printf(path, "%s/orion", xdg); /* the XDG spec ignores relative paths */
  else if (home && home[0]) sb_printf(path, "%s/.cache/orion", home);
  else {
    diag_error(d, (SrcSpan){0},
               "the ane backend has nowhere to keep its weight-update choice: neither XDG_CACHE_HOME nor HOME is set");
    return false;
  }
  sb_printf(path, "/ane-update-%s-%s", os_build, ane_arch);
  return true;
}

static void body(const char *os_build, const char *ane_arch, const char *strategy, StrBuf *out) {
  sb_printf(out, "%s\nos-build %s\nane-arch %s\nstrategy %s\n", ANE_UPDATE_CACHE_MAGIC, os_build, ane_arch, strategy);
}

void ane_update_cache_format(const char *os_build, const char *ane_arch, const char *strategy, StrBuf *out) {
  size_t start = out->len;
  body(os_build, ane_arch, strategy, out);
  char sum[65];
  sha256_hex(out->data + start, out->len - start, sum);
  sb_printf(out, "sha256 %s\n", sum);
}

/* The value of line `key value\n` at *p; advances past it. */
static bool take_line(const char **p, const char *end, const char *key, char *value, size_t cap) {
  size_t klen = strlen(key);
  const char *nl = memchr(*p, '\n', (size_t)(end - *p));
  if (!nl || (size_t)(nl - *p) <= klen + 1 || strncmp(*p, key, klen) || (*p)[klen] != ' ') return false;
  size_t n = (size_t)(nl - *p) - klen - 1;
  if (n >= cap) return false;
  memcpy(value, *p + klen + 1, n);
  value[n] = '\0';
  *p = nl + 1;
  return true;
}

const char *ane_update_cache_parse(const char *text, size_t len, const char *os_build, const char *ane_arch,
                                   OrionReloadStrategy *out) {
  const char *p = text, *end = text + len;
  size_t mlen = strlen(ANE_UPDATE_CACHE_MAGIC);
  if (memchr(text, '\0', len)) return "it is malformed"; /* a NUL would end a value early */
  if (len < mlen + 1 || memcmp(p, ANE_UPDATE_CACHE_MAGIC, mlen) || p[mlen] != '\n')
    return "it is not an orion weight-update choice";
  p += mlen + 1;
  char build[80], arch[80], strategy[80], sum[80];
  if (!take_line(&p, end, "os-build", build, sizeof build) || !take_line(&p, end, "ane-arch", arch, sizeof arch) ||
      !take_line(&p, end, "strategy", strategy, sizeof strategy))
    return "it is malformed";
  size_t body_len = (size_t)(p - text);
  if (!take_line(&p, end, "sha256", sum, sizeof sum) || p != end) return "it is malformed";
  char want[65];
  sha256_hex(text, body_len, want);
  if (strcmp(sum, want)) return "its checksum does not match (the file is corrupt)";
  if (strcmp(build, os_build) || strcmp(arch, ane_arch)) return "it is for another OS build or ANE architecture";
  if (!ane_update_strategy_from_name(strategy, out)) return "it names an unknown strategy";
  return NULL;
}

bool ane_update_cache_read(const char *path, const char *os_build, const char *ane_arch, OrionReloadStrategy *out,
                           Diag *d) {
  struct stat st;
  if (stat(path, &st) != 0 && errno == ENOENT) return false;
  char *text = NULL;
  size_t len = 0;
  const char *err = NULL;
  if (!read_file(path, ANE_UPDATE_CACHE_MAX_BYTES, &text, &len, &err)) {
    diag_warning(d, (SrcSpan){0}, "ignoring the weight-update choice in '%s' (%s); running the self-test again",
                 path, err ? err : "unreadable");
    return false;
  }
  const char *problem = ane_update_cache_parse(text, len, os_build, ane_arch, out);
  free(text);
  if (problem) {
    diag_warning(d, (SrcSpan){0}, "ignoring the weight-update choice in '%s': %s; running the self-test again", path,
                 problem);
    return false;
  }
  return true;
}

/* mkdir -p of the directory part of path. */
static bool make_parents(const char *path, Diag *d) {
  char *dir = xstrdup(path);
  char *slash = strrchr(dir, '/');
  bool ok = true;
  if (slash && slash != dir) {
    *slash = '\0';
    for (char *p = dir + 1;; p++) {
      bool last = *p == '\0';
      if (*p == '/' || last) {
        char save = *p;
        *p = '\0';
        if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
          diag_error(d, (SrcSpan){0}, "the ane backend cannot create '%s' for its weight-update choice: %s", dir,
                     strerror(errno));
          ok = false;
          break;
        }
        *p = save;
      }
      if (last) break;
    }
  }
  free(dir);
  return ok;
}

bool ane_update_cache_write(const char *path, const char *os_build, const char *ane_arch, OrionReloadStrategy s,
                            Diag *d) {
  if (!make_parents(path, d)) return false;
  StrBuf text;
  sb_init(&text);
  ane_update_cache_format(os_build, ane_arch, ane_update_strategy_name(s), &text);
  const char *err = NULL;
  bool ok = write_file_atomic(path, text.data, text.len, &err);
  if (!ok) diag_error(d, (SrcSpan){0}, "the ane backend cannot write its weight-update choice to '%s': %s", path, err);
  sb_free(&text);
  return ok;
}
