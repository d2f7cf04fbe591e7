/*
 * Name and path confinement for packages (orion/pkg_paths.h): every tool
 * judges a package's names and files by these, so they agree on which
 * packages are sound and none reads or writes outside what it was given.
 */
/* realpath() is XSI, beyond the project-wide _POSIX_C_SOURCE. */
#define _XOPEN_SOURCE 700

#include "orion/pkg_paths.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orion/manifest.h"
#include "orion/patch.h"
#include "orion/support.h"

static bool refuse(char *why, size_t n, const char *reason) {
  snprintf(why, n, "%s", reason);
  return false;
}

bool pkg_name_ok(const char *name, PkgNameKind kind, char *why, size_t why_size) {
  if (!name[0]) return refuse(why, why_size, "is empty");
  for (const unsigned char *c = (const unsigned char *)name; *c; c++)
    if (*c < 0x20 || *c == 0x7f) return refuse(why, why_size, "has a control character");
  if (name[0] == '/') return refuse(why, why_size, "is an absolute path");
  if (kind == PKG_NAME_PLAIN && strchr(name, '/')) return refuse(why, why_size, "has a '/' where a plain name is meant");
  for (const char *c = name;;) {
    size_t n = strcspn(c, "/");
    if (n == 0) return refuse(why, why_size, "has an empty path component");
    if (n == 2 && c[0] == '.' && c[1] == '.') return refuse(why, why_size, "has a '..' component");
    if (n == 1 && c[0] == '.') return refuse(why, why_size, "has a '.' component");
    if (c[n] == '\0') break;
    c += n + 1;
  }
  return true;
}

/* The link at `link` (lstat said so) resolved textually: its target, joined
 * to the link's directory when relative; NULL if it cannot be read. */
static char *link_target(const char *link) {
  char target[4096];
  ssize_t n = readlink(link, target, sizeof target - 1);
  if (n <= 0) return NULL;
  target[n] = '\0';
  if (target[0] == '/') return xstrdup(target);
  const char *slash = strrchr(link, '/');
  size_t dir = slash ? (size_t)(slash - link) : 0, len = dir + (size_t)n + 2;
  char *out = xmalloc(len);
  snprintf(out, len, "%.*s%s%s", (int)dir, link, slash ? "/" : "", target);
  return out;
}

bool pkg_file_inside(const char *root, const char *rel, char *why, size_t why_size) {
  char *real_root = realpath(root, NULL);
  if (!real_root) return true; /* the package itself is missing: reading it says so */
  size_t n = strlen(root) + strlen(rel) + 2;
  char *path = xmalloc(n), *orig = NULL, *real = NULL;
  snprintf(path, n, "%s/%s", root, rel);
  /* Where the path leads: its realpath, or that of its longest existing
   * prefix, following a dangling link's text, so that a link leading out is
   * seen even when what it points at is missing. */
  size_t floor = strlen(root);
  for (int hops = 0;;) {
    real = realpath(path, NULL);
    if (real) break;
    struct stat st;
    char *target = !orig && hops < 40 && lstat(path, &st) == 0 && S_ISLNK(st.st_mode) ? link_target(path) : NULL;
    if (target) {
      free(path);
      path = target;
      floor = 0;
      hops++;
      continue;
    }
    char *slash = strrchr(path, '/');
    if (!slash || (size_t)(slash - path) < floor || slash == path) break;
    if (!orig) orig = xstrdup(path);
    *slash = '\0';
  }
  size_t rn = strlen(real_root);
  bool inside = !real || (rn == 1 && real_root[0] == '/') ||
                (!strncmp(real, real_root, rn) && (real[rn] == '/' || real[rn] == '\0'));
  if (!inside)
    snprintf(why, why_size, "leads outside the package (a symbolic link to '%s%s')", real,
             orig ? orig + strlen(path) : "");
  free(real);
  free(orig);
  free(path);
  free(real_root);
  return inside;
}

static bool exists_in(const char *dir, const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *p = xmalloc(n);
  snprintf(p, n, "%s/%s", dir, name);
  struct stat st;
  bool ok = lstat(p, &st) == 0;
  free(p);
  return ok;
}

PkgDirKind pkg_dir_kind(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return PKG_DIR_NONE;
  if (exists_in(path, PACKAGE_MANIFEST)) return PKG_DIR_PACKAGE;
  /* By the directory's own name, however the path spells it ("p.anepkg/", "."). */
  char *real = realpath(path, NULL);
  size_t n = real ? strlen(real) : 0;
  static const char ext[] = ".anepkg";
  bool named = n >= sizeof ext - 1 && !strcmp(real + n - (sizeof ext - 1), ext);
  free(real);
  if (named || package_has_journal(path)) return PKG_DIR_PACKAGE_NO_MANIFEST;
  return exists_in(path, "model.mil") ? PKG_DIR_BARE : PKG_DIR_NONE;
}
