/*
 * Name and path confinement for packages (orion/pkg_paths.h): every tool
 * judges a package's names and files by these, so they agree on which
 * packages are sound and none reads or writes outside what it was given.
 */
/* realpath() is XSI, beyond the project-wide _POSIX_C_SOURCE; syscall() (openat2) is a BSD/GNU extension. */
#define _XOPEN_SOURCE 700
#define _DEFAULT_SOURCE

#include "orion/pkg_paths.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__linux__)
#include <linux/openat2.h>
#include <sys/syscall.h>
#endif

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

/* ---- opening a package's files ---------------------------------------- */

bool pkg_dir_open(PkgDir *dir, const char *path, const char **err) {
  memset(dir, 0, sizeof *dir);
  dir->fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir->fd < 0) {
    *err = strerror(errno);
    return false;
  }
  dir->path = xstrdup(path);
  /* The realpath names the directory that is open only if nothing moved in
   * between; otherwise absolute links cannot be judged and are refused. */
  dir->real = realpath(path, NULL);
  struct stat a, b;
  if (dir->real && (stat(dir->real, &a) != 0 || fstat(dir->fd, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino)) {
    free(dir->real);
    dir->real = NULL;
  }
  return true;
}

void pkg_dir_close(PkgDir *dir) {
  if (dir->path) close(dir->fd);
  free(dir->path);
  free(dir->real);
  memset(dir, 0, sizeof *dir);
  dir->fd = -1;
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

/* Where a path that left the package leads, for the refusal only (nothing
 * is opened through it): its realpath, or that of its longest existing
 * prefix followed by the rest, following a dangling link's text, so that a
 * link leading out is named even when what it points at is missing. */
static void say_outside(const char *where, char *why, size_t why_size) {
  char *path = xstrdup(where), *orig = NULL, *real = NULL;
  for (int hops = 0;;) {
    real = realpath(path, NULL);
    if (real) break;
    struct stat st;
    char *target = !orig && hops < 40 && lstat(path, &st) == 0 && S_ISLNK(st.st_mode) ? link_target(path) : NULL;
    if (target) {
      free(path);
      path = target;
      hops++;
      continue;
    }
    char *slash = strrchr(path, '/');
    if (!slash || slash == path) break;
    if (!orig) orig = xstrdup(path);
    *slash = '\0';
  }
  snprintf(why, why_size, "leads outside the package (a symbolic link to '%s%s')", real ? real : where,
           real && orig ? orig + strlen(path) : "");
  free(real);
  free(orig);
  free(path);
}

typedef enum { WALK_OPEN, WALK_OUTSIDE, WALK_FAILED } WalkResult;

/* The file just opened as the last component: a regular file (a directory
 * with O_DIRECTORY), left blocking; false with `why` after closing it. */
static bool opened_kind_ok(int fd, int flags, char *why, size_t why_size) {
  struct stat st;
  bool want_dir = (flags & O_DIRECTORY) != 0;
  if (fstat(fd, &st) != 0) {
    snprintf(why, why_size, "%s", strerror(errno));
  } else if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
    snprintf(why, why_size, "%s", want_dir              ? "is not a directory"
                                  : S_ISDIR(st.st_mode) ? "is a directory"
                                                        : "is not a regular file");
  } else {
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return true;
  }
  close(fd);
  return false;
}

/* One call where the kernel has openat2 and the path has no link at all
 * (the common case): resolved beneath the package, links refused. -1 for
 * anything else, which the walk then decides (links that stay inside are
 * allowed, which RESOLVE_NO_SYMLINKS is not told). */
static int open_linkless(int dirfd, const char *rel, int flags) {
#if defined(__linux__) && defined(SYS_openat2)
  struct open_how how = {
      .flags = (uint64_t)(unsigned)(flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK),
      .mode = (flags & O_CREAT) ? 0644 : 0,
      .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
  };
  return (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof how);
#else
  (void)dirfd, (void)rel, (void)flags;
  errno = ENOSYS;
  return -1;
#endif
}

/* `path` starts with '..' at the package's root `real` (a realpath, so its
 * components are no links): the rest of `path` to walk from the root when
 * it climbs out and comes straight back in by name ("../p/x" in p), judged
 * by text alone as the rule has always been where a file ends up; NULL
 * when it stays out. */
static const char *back_inside(const char *real, const char *path) {
  size_t up = strlen(real); /* real[0, up) is where the climb is */
  const char *c = path;
  for (;;) {
    while (*c == '/') c++;
    size_t n = strcspn(c, "/");
    if (n == 2 && c[0] == '.' && c[1] == '.') {
      while (up > 0 && real[up - 1] != '/') up--;
      if (up > 1) up--; /* not the root's own '/' */
    } else if (!(n == 1 && c[0] == '.')) {
      break;
    }
    c += n;
  }
  size_t rn = strlen(real);
  if (up == 1 && real[0] == '/') up = 0; /* climbed to '/': components follow it */
  while (up < rn) {
    while (*c == '/') c++;
    size_t n = strcspn(c, "/");
    /* The next component of real after real[0, up) must be c's. */
    size_t at = up + 1;
    size_t m = strcspn(real + at, "/");
    if (!n || n != m || strncmp(real + at, c, n)) return NULL;
    up = at + m;
    c += n;
  }
  return c;
}

/* The walk's place: the directories from the package down to where it is
 * (descriptors; the first is the package's own, not the walk's to close). */
typedef struct Walk {
  int fds[64];
  uint32_t depth;
} Walk;

static void walk_up(Walk *w) { close(w->fds[w->depth--]); }

static bool walk_down(Walk *w, int fd) {
  if (w->depth + 1 >= sizeof w->fds / sizeof w->fds[0]) {
    close(fd);
    errno = ENAMETOOLONG;
    return false;
  }
  w->fds[++w->depth] = fd;
  return true;
}

/* Resolves `rel` beneath the package one component at a time, each opened
 * with O_NOFOLLOW relative to the directory before it; a link found on the
 * way is read (readlinkat) and its text walked in its place: relative from
 * the link's directory, absolute from the package's root when it names a
 * place inside the package's realpath. '..' above the package, or an
 * absolute target elsewhere, leads outside. */
static WalkResult walk_open(const PkgDir *dir, const char *rel, int flags, int *out, char *why, size_t why_size) {
  Walk w = {.fds = {dir->fd}};
  char *todo = xstrdup(rel);
  const char *root = dir->real ? dir->real : dir->path;
  StrBuf outside; /* the path that left the package, for the message */
  sb_init(&outside);
  size_t pos = 0;
  int links = 0, err = 0;
  bool why_set = false;
  WalkResult res = WALK_FAILED;
  for (;;) {
    while (todo[pos] == '/') pos++;
    if (!todo[pos]) { /* "" or a trailing '/', '.' or '..': a directory is no file */
      err = EISDIR;
      break;
    }
    const char *name = todo + pos;
    size_t n = strcspn(name, "/"), next = pos + n;
    while (todo[next] == '/') next++;
    bool last = todo[next] == '\0';
    if (n == 1 && name[0] == '.') {
      pos = next;
      continue;
    }
    if (n == 2 && name[0] == '.' && name[1] == '.') {
      const char *back = w.depth == 0 && dir->real ? back_inside(dir->real, name) : NULL;
      if (back) {
        char *again = xstrdup(back);
        free(todo);
        todo = again;
        pos = 0;
        continue;
      }
      if (w.depth == 0) {
        sb_printf(&outside, "%s/%s", root, name); /* name: this ".." and the rest of the path */
        res = WALK_OUTSIDE;
        break;
      }
      walk_up(&w);
      pos = next;
      continue;
    }
    char part[NAME_MAX + 1];
    if (n > NAME_MAX) {
      err = ENAMETOOLONG;
      break;
    }
    memcpy(part, name, n);
    part[n] = '\0';
    int cur = w.fds[w.depth];
    /* O_NONBLOCK: a FIFO in a package must not hang the reader; regular files ignore it. */
    int fd = last ? openat(cur, part, flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644)
                  : openat(cur, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0 && last) {
      why_set = !opened_kind_ok(fd, flags, why, why_size);
      if (!why_set) {
        *out = fd;
        res = WALK_OPEN;
      }
      break;
    }
    if (fd >= 0) {
      if (!walk_down(&w, fd)) {
        err = errno;
        break;
      }
      pos = next;
      continue;
    }
    /* O_NOFOLLOW on a link: ELOOP for the last component, ENOTDIR (with O_DIRECTORY) before it. */
    err = errno;
    if (err != ELOOP && err != ENOTDIR) break;
    char target[4096];
    ssize_t tn = readlinkat(cur, part, target, sizeof target - 1);
    if (tn <= 0) break; /* no link: err stands */
    target[tn] = '\0';
    if (++links > 40) {
      err = ELOOP;
      break;
    }
    err = 0;
    const char *rest = last ? "" : todo + next;
    size_t rn = dir->real ? strlen(dir->real) : 0;
    const char *from = target; /* the target, relative to where the walk goes on */
    if (target[0] == '/') {
      bool within = dir->real && (rn == 1 || (!strncmp(target, dir->real, rn) && (target[rn] == '/' || !target[rn])));
      if (!within) {
        sb_printf(&outside, "%s%s%s", target, *rest ? "/" : "", rest);
        res = WALK_OUTSIDE;
        break;
      }
      while (w.depth) walk_up(&w);
      from = rn == 1 ? target : target + rn;
    }
    StrBuf t;
    sb_init(&t);
    sb_printf(&t, "%s%s%s", from, *rest ? "/" : "", rest);
    free(todo);
    todo = t.data;
    pos = 0;
  }
  if (res == WALK_OUTSIDE) {
    say_outside(outside.data, why, why_size);
  } else if (res == WALK_FAILED && !why_set) {
    snprintf(why, why_size, "%s", strerror(err ? err : EIO));
  }
  while (w.depth) walk_up(&w);
  sb_free(&outside);
  free(todo);
  return res;
}

int pkg_open_file(const PkgDir *dir, const char *rel, int flags, bool *outside, char *why, size_t why_size) {
  int fd = open_linkless(dir->fd, rel, flags);
  if (fd >= 0) {
    *outside = false;
    return opened_kind_ok(fd, flags, why, why_size) ? fd : -1;
  }
  WalkResult r = walk_open(dir, rel, flags, &fd, why, why_size);
  *outside = r == WALK_OUTSIDE;
  return r == WALK_OPEN ? fd : -1;
}

int pkg_open_parent(const PkgDir *dir, const char *rel, const char **base) {
  const char *slash = strrchr(rel, '/');
  *base = slash ? slash + 1 : rel;
  if (!slash) return fcntl(dir->fd, F_DUPFD_CLOEXEC, 0);
  char *sub = xmalloc((size_t)(slash - rel) + 1);
  memcpy(sub, rel, (size_t)(slash - rel));
  sub[slash - rel] = '\0';
  bool outside;
  char why[4096 + 128];
  int fd = pkg_open_file(dir, sub, O_RDONLY | O_DIRECTORY, &outside, why, sizeof why);
  free(sub);
  if (fd < 0 && outside) errno = ELOOP;
  return fd;
}

bool pkg_read_file(const PkgDir *dir, const char *rel, size_t limit, char **data, size_t *len, bool *outside,
                   char *why, size_t why_size) {
  int fd = pkg_open_file(dir, rel, O_RDONLY, outside, why, why_size);
  if (fd < 0) return false;
  const char *err;
  bool ok = read_fd(fd, limit, data, len, &err);
  if (!ok) snprintf(why, why_size, "%s", err);
  close(fd);
  return ok;
}

bool pkg_map_file(const PkgDir *dir, const char *rel, const uint8_t **data, size_t *len, bool *outside, char *why,
                  size_t why_size) {
  int fd = pkg_open_file(dir, rel, O_RDONLY, outside, why, why_size);
  if (fd < 0) return false;
  struct stat st;
  bool ok = fstat(fd, &st) == 0;
  *len = ok ? (size_t)st.st_size : 0;
  void *p = ok && *len ? mmap(NULL, *len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
  if (!ok || p == MAP_FAILED) {
    snprintf(why, why_size, "%s", strerror(errno));
    ok = false;
  }
  close(fd);
  *data = ok ? p : NULL;
  return ok;
}

void pkg_unmap_file(const uint8_t *data, size_t len) {
  if (data && len) munmap((void *)(uintptr_t)data, len);
}

bool pkg_file_inside(const char *root, const char *rel, char *why, size_t why_size) {
  PkgDir dir;
  const char *err;
  if (!pkg_dir_open(&dir, root, &err)) return true; /* the package itself is missing: reading it says so */
  bool outside;
  char reason[4096 + 128];
  int fd = pkg_open_file(&dir, rel, O_RDONLY, &outside, reason, sizeof reason);
  if (fd >= 0) close(fd);
  if (outside) snprintf(why, why_size, "%s", reason);
  pkg_dir_close(&dir);
  return !outside;
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
