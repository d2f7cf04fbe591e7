/*
 * Deciding which temporaries are leftovers of a killed writer, and removing
 * them (orion/temporaries.h has the rule). Everything here errs towards
 * keeping: a name, a marker or a process that cannot be read means "not a
 * leftover".
 */
#define _GNU_SOURCE
#include "orion/temporaries.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orion/support.h"
#include "temporaries_internal.h"

/* ---- names --------------------------------------------------------------------- */

/* What follows the name of the thing written: PATH.tmp-XXXXXX (a package or
 * a cache store), PATH.tmp.XXXXXX (an atomic file), PACKAGE.verify-XXXXXX. */
static const char *const suffix_patterns[] = {".tmp-", ".tmp.", ".verify-"};
/* Names of their own (in $TMPDIR): orion-verify-XXXXXX. */
static const char *const whole_patterns[] = {"orion-verify-"};

static bool random_part(const char *s) {
  for (int i = 0; i < 6; i++)
    if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9'))) return false;
  return s[6] == 0;
}

/* Whether `rest` is exactly a suffix pattern and its six random characters. */
static bool is_suffix(const char *rest) {
  for (size_t i = 0; i < sizeof suffix_patterns / sizeof *suffix_patterns; i++) {
    size_t n = strlen(suffix_patterns[i]);
    if (!strncmp(rest, suffix_patterns[i], n) && random_part(rest + n)) return true;
  }
  return false;
}

bool temp_name_matches(const char *name) {
  for (size_t i = 0; i < sizeof whole_patterns / sizeof *whole_patterns; i++) {
    size_t n = strlen(whole_patterns[i]);
    if (!strncmp(name, whole_patterns[i], n) && random_part(name + n)) return true;
  }
  /* Some name before the suffix: ".tmp-ABCDEF" alone is nobody's temporary. */
  for (const char *p = name + 1; *p; p++)
    if (*p == '.' && is_suffix(p)) return true;
  return false;
}

/* The name is prefix followed by a temporary's suffix, or prefix is a name
 * of its own ("orion-verify") and the name that with "-XXXXXX" (prefix
 * NULL: any temporary). */
static bool name_for(const char *name, const char *prefix) {
  if (!prefix) return temp_name_matches(name);
  size_t n = strlen(prefix);
  if (!n || strncmp(name, prefix, n)) return false;
  for (size_t i = 0; i < sizeof whole_patterns / sizeof *whole_patterns; i++)
    if (strlen(whole_patterns[i]) == n + 1 && !strncmp(whole_patterns[i], prefix, n))
      return name[n] == '-' && random_part(name + n + 1);
  return is_suffix(name + n);
}

/* ---- markers ------------------------------------------------------------------- */

static bool take_number(const char **p, const char *key, unsigned long long *v) {
  size_t n = strlen(key);
  if (strncmp(*p, key, n) || (*p)[n] < '0' || (*p)[n] > '9') return false;
  char *end;
  errno = 0;
  *v = strtoull(*p + n, &end, 10);
  if (errno || *end != ' ') return false;
  *p = end + 1;
  return true;
}

static bool take_word(const char **p, const char *key, char *out, size_t size) {
  size_t n = strlen(key);
  if (strncmp(*p, key, n)) return false;
  const char *start = *p + n, *space = strchr(start, ' ');
  if (!space || space == start || (size_t)(space - start) >= size || memchr(start, '=', (size_t)(space - start)))
    return false;
  memcpy(out, start, (size_t)(space - start));
  out[space - start] = 0;
  *p = space + 1;
  return true;
}

bool marker_parse(const char *text, uint32_t len, Marker *m) {
  /* Exactly one line, well formed, nothing after: anything else is not ours. */
  if (len == 0 || len >= MARKER_MAX || text[len - 1] != '\n' || memchr(text, 0, len) || memchr(text, '\n', len - 1))
    return false;
  char line[MARKER_MAX];
  memcpy(line, text, len - 1);
  line[len - 1] = ' '; /* each field ends in a space */
  line[len] = 0;
  const char *p = line;
  size_t magic = strlen(MARKER_MAGIC);
  if (strncmp(p, MARKER_MAGIC " ", magic + 1)) return false;
  p += magic + 1;
  unsigned long long pid, wall;
  if (!take_number(&p, "pid=", &pid) || pid == 0 || pid > 0x7fffffff) return false;
  if (!take_number(&p, "start=", &m->start_ticks)) return false;
  if (!take_word(&p, "boot=", m->boot, sizeof m->boot) || !take_word(&p, "host=", m->host, sizeof m->host))
    return false;
  if (!take_number(&p, "made=", &m->made_ns) || !take_number(&p, "time=", &wall) || *p) return false;
  m->pid = (long)pid;
  m->wall_time = (long long)wall;
  return true;
}

/* 1: read and parsed, 0: no marker (or not a plain file), -1: malformed. */
static int read_marker(const char *temp, Marker *m) {
  size_t n = strlen(temp) + sizeof TEMP_MARKER_SUFFIX;
  char *path = xmalloc(n), buf[MARKER_MAX];
  snprintf(path, n, "%s%s", temp, TEMP_MARKER_SUFFIX);
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  free(path);
  if (fd < 0) return 0;
  struct stat st;
  ssize_t got = -1;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) got = read(fd, buf, sizeof buf);
  close(fd);
  if (got < 0) return 0;
  return marker_parse(buf, (uint32_t)got, m) ? 1 : -1;
}

/* ---- the verdict ----------------------------------------------------------------- */

static LeftoverVerdict judge(const char *path, Marker *m) {
  const char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : path;
  if (!temp_name_matches(name)) return LEFTOVER_NOT_A_NAME;
  struct stat st;
  if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) return LEFTOVER_SYMLINK;
  int r = read_marker(path, m);
  if (r == 0) return LEFTOVER_NO_MARKER;
  if (r < 0) return LEFTOVER_BAD_MARKER;
  unsigned long long my_start, maker_start;
  char my_state, maker_state, my_boot[BOOT_ID_MAX], my_host[HOST_MAX];
  long tick = sysconf(_SC_CLK_TCK);
  if (!process_start(0, &my_start, &my_state) || !boot_id(my_boot, sizeof my_boot) || tick <= 0)
    return LEFTOVER_UNKNOWN;
  /* Another machine's (a shared home) or container's (another pid space):
   * its processes cannot be seen from here. */
  host_name(my_host, sizeof my_host);
  if (strcmp(m->host, my_host)) return LEFTOVER_OTHER_HOST;
  if (strcmp(m->boot, my_boot)) return LEFTOVER_YES; /* an earlier boot: older, and its maker is gone */
  /* Made at or before the tick this process started (ticks are coarse). */
  unsigned long long tick_ns = 1000000000ull / (unsigned long long)tick;
  if (m->made_ns / tick_ns > my_start) return LEFTOVER_TOO_NEW;
  if (!process_start(m->pid, &maker_start, &maker_state)) return LEFTOVER_YES; /* no such process */
  if (maker_start != m->start_ticks) return LEFTOVER_YES;                      /* the pid was reused */
  if (maker_state == 'Z' || maker_state == 'X') return LEFTOVER_YES;           /* dead, not yet reaped */
  return LEFTOVER_MAKER_ALIVE;
}

LeftoverVerdict leftover_check(const char *path) {
  Marker m;
  return judge(path, &m);
}

const char *leftover_verdict_text(LeftoverVerdict v) {
  switch (v) {
  case LEFTOVER_YES: return "a leftover";
  case LEFTOVER_NOT_A_NAME: return "not named like a temporary";
  case LEFTOVER_NO_MARKER: return "no marker";
  case LEFTOVER_BAD_MARKER: return "a malformed marker";
  case LEFTOVER_SYMLINK: return "a symbolic link";
  case LEFTOVER_MAKER_ALIVE: return "its maker is running";
  case LEFTOVER_TOO_NEW: return "made after this process started";
  case LEFTOVER_UNKNOWN: return "process start times unknown here";
  case LEFTOVER_OTHER_HOST: return "made on another host";
  }
  return "?";
}

/* ---- removal --------------------------------------------------------------------- */

/* A directory as a tree (nftw without following links), anything else
 * unlinked; a symbolic link is judged before and never gets here. */
static void remove_entry(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) return;
  if (S_ISDIR(st.st_mode)) remove_tree(path);
  else if (!S_ISLNK(st.st_mode)) unlink(path);
}

uint32_t leftovers_clean(const char *dir, const char *prefix, const LeftoverReport *report) {
  DIR *dd = opendir(dir);
  if (!dd) return 0;
  /* Names first, removal after: the directory is not changed under readdir. */
  char **temps = NULL;
  uint32_t n = 0, cap = 0;
  size_t suffix = strlen(TEMP_MARKER_SUFFIX);
  for (struct dirent *e; (e = readdir(dd));) {
    size_t len = strlen(e->d_name);
    if (len <= suffix || strcmp(e->d_name + len - suffix, TEMP_MARKER_SUFFIX)) continue;
    char *stem = xstrdup(e->d_name);
    stem[len - suffix] = 0;
    if (!name_for(stem, prefix)) {
      free(stem);
      continue;
    }
    xgrow((void **)&temps, sizeof *temps, &cap, n + 1);
    temps[n++] = stem;
  }
  closedir(dd);
  uint32_t removed = 0;
  for (uint32_t i = 0; i < n; i++) {
    StrBuf path;
    sb_init(&path);
    if (strcmp(dir, ".")) sb_printf(&path, "%s/", dir); /* "x.tmp-…", as the user would write it */
    sb_puts(&path, temps[i]);
    Marker m;
    if (judge(path.data, &m) == LEFTOVER_YES) {
      remove_entry(path.data);
      size_t base = path.len;
      sb_puts(&path, "-removing"); /* where a signal cleanup had moved it */
      remove_entry(path.data);
      path.len = base;
      sb_puts(&path, TEMP_MARKER_SUFFIX); /* last: until here it is still recognisable */
      unlink(path.data);
      path.data[base] = 0;
      removed++;
      if (report && report->fn) report->fn(report->ctx, path.data, m.pid);
    }
    sb_free(&path);
    free(temps[i]);
  }
  free(temps);
  return removed;
}

uint32_t leftovers_clean_beside(const char *path, const LeftoverReport *report) {
  char *copy = xstrdup(path);
  size_t len = strlen(copy);
  while (len > 1 && copy[len - 1] == '/') copy[--len] = 0; /* "m.anepkg/" */
  char *slash = strrchr(copy, '/');
  const char *dir = ".", *name = copy;
  if (slash) {
    *slash = 0;
    dir = slash == copy ? "/" : copy;
    name = slash + 1;
  }
  uint32_t n = *name ? leftovers_clean(dir, name, report) : 0;
  free(copy);
  return n;
}
