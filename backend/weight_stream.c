/*
 * The streamed weight file (weight_stream.h).
 *
 * The builder's side keeps which pages it has handed to the writer: the
 * final run [page, final_queued) and the tentative run [tent_from,
 * tent_queued). Jobs go to the writer in order; a job either writes a range
 * or gives back the memory of a range written by earlier jobs (moving its
 * pages ahead of the builder's claims for reuse). Memory is given back in
 * 2 MiB regions (the unit of a transparent huge page, asked
 * for with MADV_HUGEPAGE: a fault per 4 KiB page costs more than generating
 * the page's weights), only regions wholly inside a run, so a page still
 * being filled (the header, the record of the weight being generated) is
 * never given back.
 *
 * After drain(), the bytes of the two runs are on the disk and everything
 * else is in memory: that is how weight_stream_same reads.
 */
#define _GNU_SOURCE
#include "weight_stream.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "orion/support.h"

/* The unit in which memory is given back (and huge pages come). */
#define REGION ((size_t)2 << 20)
/* Most bytes one write call sends. */
#define MAX_WRITE ((size_t)8 << 20)
/* How far past the builder's frontier written regions are moved for reuse,
 * and how many moves at most (each may leave a mapping of its own, and a
 * process has a limited number). */
#define REUSE_AHEAD ((size_t)32 << 20)
#define MAX_MOVES 16384
/* Most bytes queued and not yet written before the builder waits: bounds
 * the memory a fast generator can fill ahead of a slow disk. */
#define MAX_PENDING ((size_t)256 << 20)
#define MAX_JOBS 1024

typedef struct Job {
  size_t off, len;
  bool release; /* give back the memory instead of writing */
} Job;

struct WeightStream {
  int fd, read_fd;
  bool direct;
  size_t page;
  uint8_t *map, *base; /* the reservation, and its REGION-aligned start */
  size_t map_len, cap;

  /* The builder's bookkeeping (builder thread only). */
  size_t final_queued, final_released;
  size_t tent_from, tent_queued; /* no run when tent_from == tent_queued */
  size_t tent_release_from, tent_released; /* the run's memory given back */

  /* The queue, under mu. */
  pthread_mutex_t mu;
  pthread_cond_t more, room;
  Job jobs[MAX_JOBS];
  size_t head, njobs, pending;
  bool busy, stop;
  int err;
  /* Reuse of written regions: none is moved below `frontier` (the builder
   * may be writing there); next_target is the next region to fill. */
  size_t frontier, next_target, moves;
  bool no_moves;
  pthread_t writer;
};

static size_t round_down(size_t x, size_t unit) { return x / unit * unit; }
static size_t round_up(size_t x, size_t unit) { return (x + unit - 1) / unit * unit; }

static int write_range(WeightStream *s, size_t off, size_t len) {
  while (len) {
    ssize_t w = pwrite(s->fd, s->base + off, len, (off_t)off);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EINVAL && s->direct) {
      /* The device wants another alignment than the page: write through the page cache. */
      int fl = fcntl(s->fd, F_GETFL);
      if (fl < 0 || fcntl(s->fd, F_SETFL, fl & ~O_DIRECT) < 0) return errno;
      s->direct = false;
      continue;
    }
    if (w < 0) return errno;
    if (w == 0) return EIO;
    off += (size_t)w;
    len -= (size_t)w;
  }
  return 0;
}

/* Gives back the memory of written regions [off, off + len). Rather than
 * freeing it (the kernel would zero fresh pages for the regions ahead, a
 * fifth of a compile's time), each region's pages are moved ahead of the
 * builder, where it will write next; the region left behind reads as zeros,
 * as after MADV_DONTNEED. Called on the writer thread. */
static void give_back(WeightStream *s, size_t off, size_t len) {
  for (size_t r = off; r < off + len; r += REGION) {
    pthread_mutex_lock(&s->mu); /* the builder cannot claim a target while it is filled */
    size_t target = round_up(s->frontier, REGION);
    if (target < s->next_target) target = s->next_target;
    bool moved = false;
#ifdef MREMAP_DONTUNMAP
    if (!s->no_moves && s->moves < MAX_MOVES && target + REGION <= s->cap &&
        target < round_up(s->frontier, REGION) + REUSE_AHEAD) {
      moved = mremap(s->base + r, REGION, REGION, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP,
                     s->base + target) != MAP_FAILED;
      if (moved) {
        s->next_target = target + REGION;
        s->moves++;
      } else {
        s->no_moves = true; /* an older kernel: free instead */
        /* A failed move may already have unmapped its target: map it again. */
        if (mmap(s->base + target, REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
                 -1, 0) == MAP_FAILED)
          ice("weight stream: cannot map %zu bytes again after a failed move: %s", (size_t)REGION, strerror(errno));
        (void)madvise(s->base + target, REGION, MADV_HUGEPAGE);
      }
    }
#else
    (void)target; /* no MREMAP_DONTUNMAP in this build: regions are freed */
#endif
    pthread_mutex_unlock(&s->mu);
    if (!moved) (void)madvise(s->base + r, REGION, MADV_DONTNEED); /* advice: memory stays valid (zeros) if refused */
  }
}

static void *writer_main(void *arg) {
  WeightStream *s = arg;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (!s->njobs && !s->stop) pthread_cond_wait(&s->more, &s->mu);
    if (!s->njobs) break;
    Job j = s->jobs[s->head];
    size_t taken = 1;
    /* Adjacent writes go out as one call. */
    while (!j.release && taken < s->njobs) {
      const Job *n = &s->jobs[(s->head + taken) % MAX_JOBS];
      if (n->release || n->off != j.off + j.len || j.len + n->len > MAX_WRITE) break;
      j.len += n->len;
      taken++;
    }
    s->head = (s->head + taken) % MAX_JOBS;
    s->njobs -= taken;
    s->busy = true;
    int err = s->err;
    pthread_mutex_unlock(&s->mu);
    if (j.release) {
      give_back(s, j.off, j.len);
    } else if (!err) {
      err = write_range(s, j.off, j.len);
#ifdef SYNC_FILE_RANGE_WRITE
      /* Through the page cache, start the disk now rather than at the fsync. */
      if (!err && !s->direct) (void)sync_file_range(s->fd, (off_t)j.off, (off_t)j.len, SYNC_FILE_RANGE_WRITE);
#endif
    }
    pthread_mutex_lock(&s->mu);
    if (err && !s->err) s->err = err;
    if (!j.release) s->pending -= j.len;
    s->busy = false;
    pthread_cond_broadcast(&s->room);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

static void enqueue(WeightStream *s, size_t off, size_t len, bool release) {
  if (!len) return;
  pthread_mutex_lock(&s->mu);
  while (s->njobs == MAX_JOBS || (!release && s->pending && s->pending + len > MAX_PENDING))
    pthread_cond_wait(&s->room, &s->mu);
  s->jobs[(s->head + s->njobs) % MAX_JOBS] = (Job){off, len, release};
  s->njobs++;
  if (!release) s->pending += len;
  pthread_cond_signal(&s->more);
  pthread_mutex_unlock(&s->mu);
}

/* Waits until the writer has done every job. */
static void drain(WeightStream *s) {
  pthread_mutex_lock(&s->mu);
  while (s->njobs || s->busy) pthread_cond_wait(&s->room, &s->mu);
  pthread_mutex_unlock(&s->mu);
}

WeightStream *weight_stream_open(const char *path, size_t bound) {
  long pg = sysconf(_SC_PAGESIZE);
  size_t page = pg > 0 ? (size_t)pg : 4096;
  if (bound > SIZE_MAX - 2 * REGION - page) {
    errno = ENOMEM;
    return NULL;
  }
  size_t cap = round_up(bound, page) + page; /* the last page is padded when written */
  size_t map_len = cap + REGION;
  void *map = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED) return NULL;
  WeightStream *s = try_calloc(1, sizeof *s);
  if (s) s->read_fd = -1;
  if (!s) {
    munmap(map, map_len);
    errno = ENOMEM;
    return NULL;
  }
  s->map = map;
  s->map_len = map_len;
  s->base = (uint8_t *)round_up((uintptr_t)map, REGION);
  s->cap = cap;
  s->page = page;
  (void)madvise(s->base, cap, MADV_HUGEPAGE); /* advice; without it pages are small */
  s->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_DIRECT, 0644);
  s->direct = s->fd >= 0;
  if (s->fd < 0 && errno == EINVAL) {
    /* A file system without O_DIRECT refuses it after creating the file
     * (an existing file fails first, with EEXIST): ordinary writes then. */
    unlink(path);
    s->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  }
  int err = errno;
  if (s->fd < 0) goto fail;
  s->read_fd = open(path, O_RDONLY | O_CLOEXEC);
  err = errno;
  if (s->read_fd < 0 || (err = pthread_mutex_init(&s->mu, NULL)) != 0) goto fail_file;
  if ((err = pthread_cond_init(&s->more, NULL)) != 0) goto fail_mu;
  if ((err = pthread_cond_init(&s->room, NULL)) != 0) goto fail_more;
  if ((err = pthread_create(&s->writer, NULL, writer_main, s)) != 0) goto fail_room;
  s->final_queued = page; /* the first page goes last */
  s->frontier = REGION;   /* the header's region is written first and last */
  s->final_released = REGION;
  return s;
fail_room:
  pthread_cond_destroy(&s->room);
fail_more:
  pthread_cond_destroy(&s->more);
fail_mu:
  pthread_mutex_destroy(&s->mu);
fail_file:
  if (s->read_fd >= 0) close(s->read_fd);
  close(s->fd);
  unlink(path); /* created here: nothing is left behind */
fail:
  munmap(s->map, s->map_len);
  free(s);
  errno = err ? err : ENOMEM;
  return NULL;
}

uint8_t *weight_stream_base(const WeightStream *s) { return s->base; }

void weight_stream_claim(WeightStream *s, size_t end) {
  pthread_mutex_lock(&s->mu);
  if (end > s->frontier) s->frontier = end;
  pthread_mutex_unlock(&s->mu);
}

/* Gives back the whole regions of [*released, end) and moves the cursor. */
static void release_upto(WeightStream *s, size_t *released, size_t end) {
  size_t e = round_down(end, REGION);
  if (e > *released) enqueue(s, *released, e - *released, true);
  if (e > *released) *released = e;
}

void weight_stream_final(WeightStream *s, size_t end) {
  size_t e = round_down(end, s->page);
  if (e > s->cap) ice("weight stream: final end %zu past the reserved %zu bytes", end, s->cap);
  if (e <= s->final_queued) return;
  if (s->tent_queued > s->tent_from && s->tent_from < e) {
    if (s->tent_queued > e) ice("weight stream: tentative bytes past the final end");
    enqueue(s, s->final_queued, s->tent_from - s->final_queued, false);
    enqueue(s, s->tent_queued, e - s->tent_queued, false);
    /* The run gave back its own regions: give back those before it, and
     * go on after them (giving a region back twice would move emptiness). */
    release_upto(s, &s->final_released, s->tent_release_from < e ? s->tent_release_from : e);
    if (s->tent_released > s->tent_release_from && s->tent_released > s->final_released)
      s->final_released = s->tent_released;
    s->tent_from = s->tent_queued = s->tent_release_from = s->tent_released = 0;
  } else {
    enqueue(s, s->final_queued, e - s->final_queued, false);
  }
  s->final_queued = e;
  release_upto(s, &s->final_released, e);
}

void weight_stream_tentative(WeightStream *s, size_t from, size_t to) {
  size_t start = round_up(from, s->page), e = round_down(to, s->page);
  if (e > s->cap || start < s->final_queued) ice("weight stream: tentative bytes [%zu, %zu) out of order", from, to);
  if (start != s->tent_from || s->tent_queued == 0) {
    if (s->tent_queued > s->tent_from) ice("weight stream: a second tentative run before the first ended");
    s->tent_from = s->tent_queued = start;
    s->tent_release_from = s->tent_released = round_up(start, REGION);
  }
  if (e <= s->tent_queued) return;
  enqueue(s, s->tent_queued, e - s->tent_queued, false);
  s->tent_queued = e;
  release_upto(s, &s->tent_released, e);
}

void weight_stream_rollback(WeightStream *s) {
  if (s->tent_queued > s->tent_from) drain(s); /* its pages may be written again soon: no job may still touch them */
  s->tent_from = s->tent_queued = s->tent_release_from = s->tent_released = 0;
}

/* Whether any of [off, off + n) lies where memory was given back (or is
 * about to be: the jobs may still be queued). */
static bool given_back(const WeightStream *s, size_t off, size_t n) {
  size_t end = off + n;
  return (off < s->final_released && end > REGION) ||
         (s->tent_released > s->tent_release_from && off < s->tent_released && end > s->tent_release_from);
}

/* Copies n bytes at off: from the disk where they were written (their
 * memory may be given back), else from memory. Call after drain(). */
static bool read_bytes(WeightStream *s, size_t off, size_t n, uint8_t *out) {
  while (n) {
    bool on_disk;
    size_t until; /* where the current kind of byte ends */
    if (off >= s->page && off < s->final_queued) on_disk = true, until = s->final_queued;
    else if (off >= s->tent_from && off < s->tent_queued) on_disk = true, until = s->tent_queued;
    else {
      on_disk = false;
      until = off < s->page ? s->page : SIZE_MAX;
      if (off < s->final_queued && s->final_queued < until) until = s->final_queued;
      if (off < s->tent_from && s->tent_from < until) until = s->tent_from;
    }
    size_t k = until - off < n ? until - off : n;
    if (on_disk) {
      for (size_t done = 0; done < k;) {
        ssize_t r = pread(s->read_fd, out + done, k - done, (off_t)(off + done));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        done += (size_t)r;
      }
    } else {
      memcpy(out, s->base + off, k);
    }
    off += k;
    out += k;
    n -= k;
  }
  return true;
}

bool weight_stream_same(WeightStream *s, uint64_t offset, const void *bytes, size_t n) {
  const uint8_t *b = bytes;
  bool inside = b >= s->base && b < s->base + s->cap;
  /* Both still in memory: no need to wait for the writer. */
  if (!given_back(s, (size_t)offset, n) && !(inside && given_back(s, (size_t)(b - s->base), n)))
    return memcmp(s->base + offset, b, n) == 0;
  drain(s);
  size_t piece = (size_t)1 << 20;
  uint8_t *x = xmalloc(piece), *y = xmalloc(piece);
  bool same = true;
  for (size_t done = 0; same && done < n; done += piece) {
    size_t k = n - done < piece ? n - done : piece;
    /* A read error counts as a difference: storing a tensor twice is safe. */
    same = read_bytes(s, (size_t)offset + done, k, x) &&
           (inside ? read_bytes(s, (size_t)(b - s->base) + done, k, y) && memcmp(x, y, k) == 0
                   : memcmp(x, b + done, k) == 0);
  }
  free(x);
  free(y);
  return same;
}

bool weight_stream_finish(WeightStream *s, size_t len) {
  if (len > s->cap - s->page) ice("weight stream: %zu bytes, more than the %zu reserved", len, s->cap);
  weight_stream_final(s, len);
  size_t tail = round_down(len, s->page);
  if (len % s->page) {
    /* Whole pages only (O_DIRECT); the padding is cut off below. */
    weight_stream_claim(s, round_up(len, s->page));
    memset(s->base + len, 0, round_up(len, s->page) - len);
    if (tail) enqueue(s, tail, s->page, false);
  }
  enqueue(s, 0, s->page, false);
  drain(s);
  int err = weight_stream_error(s);
  if (err) {
    errno = err;
    return false;
  }
  return ftruncate(s->fd, (off_t)len) == 0 && fsync(s->fd) == 0;
}

size_t weight_stream_reused(WeightStream *s) {
  pthread_mutex_lock(&s->mu);
  size_t n = s->moves;
  pthread_mutex_unlock(&s->mu);
  return n;
}

int weight_stream_error(WeightStream *s) {
  pthread_mutex_lock(&s->mu);
  int err = s->err;
  pthread_mutex_unlock(&s->mu);
  return err;
}

void weight_stream_close(WeightStream *s) {
  if (!s) return;
  pthread_mutex_lock(&s->mu);
  s->stop = true;
  s->njobs = 0; /* nothing more is written: the caller is done or giving up */
  pthread_cond_signal(&s->more);
  pthread_mutex_unlock(&s->mu);
  pthread_join(s->writer, NULL);
  pthread_cond_destroy(&s->room);
  pthread_cond_destroy(&s->more);
  pthread_mutex_destroy(&s->mu);
  close(s->fd);
  close(s->read_fd);
  munmap(s->map, s->map_len);
  free(s);
}
