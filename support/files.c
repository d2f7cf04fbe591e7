/*
 * Whole-file reads with a size limit, and atomic writes (temporary file in the
 * same directory, with its marker (orion/temporaries.h), fsync, rename) so
 * that a reader never sees half a file.
 */
#define _XOPEN_SOURCE 700 /* nftw */
#include "orion/support.h"
#include "orion/temporaries.h"

#include <ftw.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool read_fd(int fd, size_t limit, char **data, size_t *len, const char **err) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    *err = strerror(errno);
    return false;
  }
  if (S_ISDIR(st.st_mode)) {
    *err = "is a directory";
    return false;
  }
  size_t cap = S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : 4096, n = 0;
  if (S_ISREG(st.st_mode) && (size_t)st.st_size > limit) {
    *err = "file too large";
    return false;
  }
  char *buf = xmalloc(cap);
  for (;;) {
    if (n + 1 >= cap) {
      if (cap > limit) {
        free(buf);
        *err = "file too large";
        return false;
      }
      cap *= 2;
      buf = xrealloc(buf, cap);
    }
    ssize_t r = read(fd, buf + n, cap - n - 1);
    if (r < 0) {
      if (errno == EINTR) continue;
      *err = strerror(errno);
      free(buf);
      return false;
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  if (n > limit) {
    free(buf);
    *err = "file too large";
    return false;
  }
  buf[n] = 0;
  *data = buf;
  *len = n;
  return true;
}

bool read_file(const char *path, size_t limit, char **data, size_t *len, const char **err) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    *err = strerror(errno);
    return false;
  }
  bool ok = read_fd(fd, limit, data, len, err);
  close(fd);
  return ok;
}

bool write_fd_all(int fd, const void *data, size_t len) {
  const char *p = data;
  while (len) {
    ssize_t w = write(fd, p, len);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    len -= (size_t)w;
  }
  return true;
}

/* A device or a pipe (-o /dev/null, -o /dev/stdout) is written where it is:
 * a rename over it would put a file in its place (run as root, over
 * /dev/null itself), and a stream has no half-written state to hide. */
static bool write_in_place(const char *path, const void *data, size_t len, const char **err) {
  int fd = open(path, O_WRONLY);
  if (fd < 0) {
    *err = strerror(errno);
    return false;
  }
  bool ok = write_fd_all(fd, data, len);
  if (!ok) *err = strerror(errno);
  if (close(fd) != 0 && ok) {
    *err = strerror(errno);
    ok = false;
  }
  return ok;
}

bool write_file_atomic(const char *path, const void *data, size_t len, const char **err) {
  struct stat st;
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) return write_in_place(path, data, len, err);
  size_t plen = strlen(path);
  char *tmp = xmalloc(plen + 16);
  memcpy(tmp, path, plen);
  memcpy(tmp + plen, ".tmp.XXXXXX", 12);
  int fd = temp_make_file(tmp); /* with its marker: a kill leaves a recognisable leftover */
  if (fd < 0) {
    *err = strerror(errno);
    free(tmp);
    return false;
  }
  if (!write_fd_all(fd, data, len)) goto fail;
  test_pause_at("atomic-file");
  if (fchmod(fd, 0644) != 0 || fsync(fd) != 0) goto fail;
  if (close(fd) != 0) {
    fd = -1;
    goto fail;
  }
  fd = -1;
  if (rename(tmp, path) != 0) goto fail;
  temp_release(tmp);
  free(tmp);
  return true;
fail:
  *err = strerror(errno);
  if (fd >= 0) close(fd);
  temp_remove(tmp);
  free(tmp);
  return false;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

void remove_tree(const char *path) { nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }
