/*
 * Making and removing temporaries, each with its marker (orion/temporaries.h),
 * and the registry of those that exist now, which the signal cleanup
 * empties. The registry is this module's own: it only records, and acts
 * only when a driver installed temp_cleanup_on_signals.
 */
#define _GNU_SOURCE
#include "orion/temporaries.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "orion/support.h"
#include "temporaries_internal.h"

/* ---- where a process's start and the boot are read ------------------------- */

bool process_start(long pid, unsigned long long *ticks, char *state) {
  char path[64], buf[1024];
  if (pid) snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  else snprintf(path, sizeof path, "/proc/self/stat");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = 0;
  /* "pid (comm) S ppid ..." where comm may hold anything, spaces and ')' too:
   * the fields start after the last ')'. Start time is field 22. */
  char *p = strrchr(buf, ')');
  if (!p || p[1] != ' ' || !p[2]) return false;
  *state = p[2];
  p += 3;
  for (int field = 4; field <= 22; field++) {
    while (*p == ' ') p++;
    if (!*p) return false;
    if (field == 22) {
      char *end;
      errno = 0;
      *ticks = strtoull(p, &end, 10);
      return errno == 0 && end != p;
    }
    while (*p && *p != ' ') p++;
  }
  return false;
}

bool boot_id(char *buf, uint32_t size) {
  int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = read(fd, buf, size - 1);
  close(fd);
  if (n <= 0) return false;
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) n--;
  buf[n] = 0;
  for (ssize_t i = 0; i < n; i++)
    if (buf[i] <= ' ' || buf[i] == '=') return false; /* one word in the marker */
  return n > 0;
}

void host_name(char *buf, uint32_t size) {
  struct utsname u;
  snprintf(buf, size, "%s", uname(&u) == 0 && u.nodename[0] ? u.nodename : "unknown");
  for (char *p = buf; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' || *p == '-'))
      *p = '_';
}

static unsigned long long boottime_ns(void) {
  struct timespec t;
#ifdef CLOCK_BOOTTIME
  if (clock_gettime(CLOCK_BOOTTIME, &t) == 0) return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
#endif
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
}

bool temp_marker_line(char *buf, uint32_t size) {
  unsigned long long start;
  char state, boot[BOOT_ID_MAX], host[HOST_MAX];
  if (!process_start(0, &start, &state) || !boot_id(boot, sizeof boot)) return false;
  host_name(host, sizeof host);
  int n = snprintf(buf, size, MARKER_MAGIC " pid=%ld start=%llu boot=%s host=%s made=%llu time=%lld\n", (long)getpid(),
                   start, boot, host, boottime_ns(), (long long)time(NULL));
  return n > 0 && (uint32_t)n < size;
}

/* ---- the registry -------------------------------------------------------------- */

typedef struct Registered {
  char *path;
  bool marked; /* has a marker (made here), or is a tracked file of fixed name */
} Registered;

/* Recursive: a commit holds it around its own untracking (pkgio/patch.c). */
static pthread_mutex_t registry_lock;
static pthread_once_t registry_once = PTHREAD_ONCE_INIT;
static Registered *registry;
static uint32_t registry_n, registry_cap;

static void registry_init(void) {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&registry_lock, &attr);
  pthread_mutexattr_destroy(&attr);
}

void temp_registry_lock(void) {
  pthread_once(&registry_once, registry_init);
  pthread_mutex_lock(&registry_lock);
}

void temp_registry_unlock(void) { pthread_mutex_unlock(&registry_lock); }

/* Both with the lock held. */
static void registry_add(const char *path, bool marked) {
  /* Each allocation before the entry counts: running out in either must
   * leave the registry whole for the cleanup that follows. */
  char *copy = xstrdup(path);
  xgrow((void **)&registry, sizeof *registry, &registry_cap, registry_n + 1);
  registry[registry_n] = (Registered){copy, marked};
  registry_n++;
}

static void registry_drop(const char *path) {
  for (uint32_t i = registry_n; i-- > 0;)
    if (!strcmp(registry[i].path, path)) {
      free(registry[i].path);
      registry[i] = registry[--registry_n];
      break;
    }
  if (!registry_n) { /* nothing outlives its last temporary (leak checkers see an empty registry) */
    free(registry);
    registry = NULL;
    registry_cap = 0;
  }
}

void temp_track(const char *path) {
  temp_registry_lock();
  registry_add(path, false);
  temp_registry_unlock();
}

bool temp_is_tracked(const char *path) {
  temp_registry_lock();
  bool found = false;
  for (uint32_t i = 0; i < registry_n && !found; i++) found = !strcmp(registry[i].path, path);
  temp_registry_unlock();
  return found;
}

void temp_untrack(const char *path) {
  temp_registry_lock();
  registry_drop(path);
  temp_registry_unlock();
}

/* ---- making ------------------------------------------------------------------ */

static char *marker_path(const char *temp) {
  size_t n = strlen(temp) + sizeof TEMP_MARKER_SUFFIX;
  char *p = xmalloc(n);
  snprintf(p, n, "%s%s", temp, TEMP_MARKER_SUFFIX);
  return p;
}

static bool write_marker(const char *path) {
  char line[MARKER_MAX];
  if (!temp_marker_line(line, sizeof line)) {
    /* Without /proc no leftover could ever be recognised: still make one,
     * with a start of 0, which never matches a process (never removed). */
    char host[HOST_MAX];
    host_name(host, sizeof host);
    snprintf(line, sizeof line, MARKER_MAGIC " pid=%ld start=0 boot=unknown host=%s made=%llu time=%lld\n",
             (long)getpid(), host, boottime_ns(), (long long)time(NULL));
  }
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  size_t len = strlen(line);
  bool ok = write(fd, line, len) == (ssize_t)len;
  int saved = errno;
  if (close(fd) != 0) ok = false;
  if (!ok) {
    unlink(path);
    errno = saved ? saved : EIO;
  }
  return ok;
}

/* Fills the XXXXXX at the end of tmpl; tries another name while one exists. */
static bool make_marked(char *tmpl, bool dir, int *fd_out) {
  static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  size_t len = strlen(tmpl);
  if (len < 6 || strcmp(tmpl + len - 6, "XXXXXX")) {
    errno = EINVAL;
    return false;
  }
  static uint64_t counter; /* only varies the names; guarded by the registry lock */
  temp_registry_lock();
  /* Every allocation before anything is made: running out of memory must
   * not come between making a marker or a temporary and registering it. */
  xgrow((void **)&registry, sizeof *registry, &registry_cap, registry_n + 1);
  uint64_t state = boottime_ns() ^ ((uint64_t)getpid() << 32) ^ (counter += SPLITMIX64_GAMMA);
  bool ok = false;
  for (int attempt = 0; attempt < 100 && !ok; attempt++) {
    uint64_t r = splitmix64(&state);
    for (int i = 0; i < 6; i++) tmpl[len - 6 + (size_t)i] = alphabet[(r >> (6 * i)) % (sizeof alphabet - 1)];
    char *marker = marker_path(tmpl), *copy = xstrdup(tmpl);
    if (!write_marker(marker)) {
      free(marker);
      free(copy);
      if (errno == EEXIST) continue;
      break;
    }
    /* The marker first: a temporary never exists without one. */
    if (dir) ok = mkdir(tmpl, 0755) == 0;
    else ok = (*fd_out = open(tmpl, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) >= 0;
    int saved = errno;
    if (!ok) unlink(marker);
    free(marker);
    if (ok) registry[registry_n++] = (Registered){copy, true}; /* the slot was reserved above */
    else free(copy);
    errno = saved;
    if (!ok && errno != EEXIST) break;
  }
  temp_registry_unlock();
  return ok;
}

bool temp_make_dir(char *tmpl) { return make_marked(tmpl, true, NULL); }

bool temp_make_named_dir(const char *path) {
  temp_registry_lock();
  /* Reserved first, as in make_marked: a directory made is always registered. */
  xgrow((void **)&registry, sizeof *registry, &registry_cap, registry_n + 1);
  char *copy = xstrdup(path);
  bool ok = mkdir(path, 0700) == 0;
  if (!ok && errno == EEXIST) {
    struct stat st;
    ok = lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
    if (!ok) errno = EEXIST;
  }
  int saved = errno;
  if (ok) registry[registry_n++] = (Registered){copy, false};
  else free(copy);
  temp_registry_unlock();
  errno = saved;
  return ok;
}

int temp_make_file(char *tmpl) {
  int fd = -1;
  return make_marked(tmpl, false, &fd) ? fd : -1;
}

/* ---- removing ----------------------------------------------------------------- */

static void remove_entry(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) return;
  if (S_ISDIR(st.st_mode)) remove_tree(path);
  else unlink(path);
}

void temp_remove(const char *temp) {
  remove_entry(temp);
  temp_release(temp);
}

void temp_release(const char *temp) {
  char *marker = marker_path(temp);
  unlink(marker);
  free(marker);
  temp_untrack(temp);
}

/* Out of the writer's way first: the rename is atomic, so either the
 * writer's own rename of the temporary into place came first, or it fails. */
static void remove_claimed(const char *temp, bool marked) {
  size_t n = strlen(temp) + sizeof "-removing";
  char *gone = xmalloc(n);
  snprintf(gone, n, "%s-removing", temp);
  if (rename(temp, gone) == 0) remove_entry(gone);
  free(gone);
  if (marked) {
    char *marker = marker_path(temp);
    unlink(marker);
    free(marker);
  }
}

void temp_remove_claimed(const char *temp) {
  remove_claimed(temp, true);
  temp_untrack(temp);
}

void temp_remove_all_and_freeze(void) {
  temp_registry_lock(); /* for good: a writer blocks before it makes another */
  for (uint32_t i = registry_n; i-- > 0;) remove_claimed(registry[i].path, registry[i].marked);
}
