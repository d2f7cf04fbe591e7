/*
 * Temporaries: the directories and files orion's writers make beside what
 * they write (a package's PATH.tmp-XXXXXX, an atomic file's PATH.tmp.XXXXXX,
 * a compile-cache store, a PACKAGE.verify-XXXXXX copy, an orion-verify-XXXXXX
 * directory, the ane backend's directories under $TMPDIR), and what becomes of them when the writer dies.
 *
 * Every temporary has a marker beside it, TEMP.owner, made before the
 * temporary itself and removed after it, that names its maker: the pid, the
 * process's start time (clock ticks since boot, /proc/PID/stat) and the boot
 * id, so that a reused pid is not taken for the maker, the host's name (a
 * directory another machine or container shares is not judged from here),
 * and when it was made.
 * A temporary a killed writer left (a "leftover") is one whose name has one
 * of the patterns above, whose marker is present and well-formed, made on
 * this host before the process that cleans started, by a process that is gone (no
 * such pid, a zombie, a different start time or an earlier boot). Nothing
 * else is ever removed: not a look-alike without a marker, not a symbolic
 * link, not the temporary of a writer still running. See
 * docs/package-format.md ("Temporaries and leftovers").
 *
 * A writer that is told SIGINT or SIGTERM removes its own temporaries before
 * it dies, when its driver installs temp_cleanup_on_signals: every temporary
 * is registered while it exists (support/temporaries.c), and the signal
 * thread removes what is registered (support/interrupt.c).
 */
#ifndef ORION_TEMPORARIES_H
#define ORION_TEMPORARIES_H

#include <stdbool.h>
#include <stdint.h>

/* The marker of TEMP is TEMP followed by this. */
#define TEMP_MARKER_SUFFIX ".owner"

/* ---- making and removing (support/temporaries.c) --------------------------- */

/* Replaces the trailing XXXXXX of tmpl by a name nothing has, makes the
 * marker and then the directory (mode 0755), and registers it. False with
 * errno set on failure (nothing is left then). */
bool temp_make_dir(char *tmpl);
/* The same for a file (mode 0600, opened for writing): the descriptor, or -1. */
int temp_make_file(char *tmpl);
/* A directory whose name someone else fixes (a device segment's, which the
 * ane backend names after its program): made (mode 0700),
 * or taken as it is when a directory of that name already exists (one
 * content, one directory), and registered either way, so that a signal
 * removes it. No marker: its name is no temporary's, so no cleaner could ever
 * judge it a leftover. The maker removes it with temp_remove. False with
 * errno set when it cannot be made or the name is taken by something that is
 * not a directory (a symbolic link included); nothing is registered then. */
bool temp_make_named_dir(const char *path);
/* The maker is done with its temporary: removes it (a tree, not following
 * symbolic links) if it is still there, then its marker, and unregisters it. */
void temp_remove(const char *temp);
/* The temporary was renamed into place: removes its marker and unregisters it. */
void temp_release(const char *temp);

/* A file of fixed name that a writer makes and that must go if it is
 * interrupted (a patch's journal under construction): registered only, no
 * marker (the patcher's lock on its package tells its leftovers, pkgio/patch.c).
 * temp_track registers, temp_untrack unregisters. */
void temp_track(const char *path);
void temp_untrack(const char *path);
/* Whether path is registered (a signal would remove it). */
bool temp_is_tracked(const char *path);
/* Holds the registry while the caller does something that must not be cut
 * by the signal cleanup (a commit that turns temporaries into real files). */
void temp_registry_lock(void);
void temp_registry_unlock(void);

/* Removes every registered temporary (each first renamed out of the way, so
 * that a writer's concurrent rename into place either came first or fails)
 * and keeps the registry locked for good: no new temporary is made after.
 * For the signal thread; the process is to end right after. */
void temp_remove_all_and_freeze(void);
/* The same for one temporary, leaving the registry open: safe while its
 * writer still runs (orion_compile_cleanup). */
void temp_remove_claimed(const char *temp);

/* The marker's line for the calling process, made now (for tests: what
 * temp_make_* write). Returns false without /proc (no start time to record). */
bool temp_marker_line(char *buf, uint32_t size);

/* ---- leftovers (support/leftovers.c) ---------------------------------------- */

typedef enum LeftoverVerdict {
  LEFTOVER_YES,          /* made by a process that is gone, before this one started */
  LEFTOVER_NOT_A_NAME,   /* the name is not one a writer gives its temporaries */
  LEFTOVER_NO_MARKER,    /* nothing names a maker (or the marker is not a plain file) */
  LEFTOVER_BAD_MARKER,   /* the marker does not parse */
  LEFTOVER_SYMLINK,      /* the temporary is a symbolic link: never followed nor removed */
  LEFTOVER_MAKER_ALIVE,  /* its maker still runs */
  LEFTOVER_TOO_NEW,      /* made after this process started */
  LEFTOVER_UNKNOWN,      /* this system does not tell process start times */
  LEFTOVER_OTHER_HOST,   /* made on another host (or container): its processes are not visible here */
} LeftoverVerdict;

/* Whether the name (a final path component) is one of a temporary. */
bool temp_name_matches(const char *name);
/* The verdict on the temporary at `path` (its marker is path + ".owner"). */
LeftoverVerdict leftover_check(const char *path);
const char *leftover_verdict_text(LeftoverVerdict v);

/* Told each leftover that was removed: its path and the pid of its maker. */
typedef struct LeftoverReport {
  void (*fn)(void *ctx, const char *path, long maker_pid);
  void *ctx;
} LeftoverReport;

/* Removes the leftovers in `dir` (not below it) whose names begin with
 * `prefix` followed by a temporary's pattern (NULL prefix: any). Returns how
 * many were removed; report (may be NULL) is told each. */
uint32_t leftovers_clean(const char *dir, const char *prefix, const LeftoverReport *report);

/* Removes the leftovers beside `path` that were made for it (PATH.tmp-…,
 * PATH.tmp.…, PATH.verify-…), in path's directory. */
uint32_t leftovers_clean_beside(const char *path, const LeftoverReport *report);

/* ---- signals (support/interrupt.c) ----------------------------------------- */

/* Blocks SIGINT and SIGTERM in the calling thread (threads made later
 * inherit the mask), catches them in any other, and starts a thread that,
 * told of one, removes the registered temporaries and ends the process by
 * the same signal (exit status 130 or 143 in a shell). A signal ignored from
 * the start stays ignored. For a driver's main, once. */
void temp_cleanup_on_signals(void);

/* ---- deterministic pauses for tests (support/test_pause.c) ------------------- */

/* When ORION_TEST_PAUSE_AT names `point`, writes the point's name and a
 * newline to the fifo ORION_TEST_PAUSE_FIFO, then blocks reading it until a
 * test writes to it (or kills the process): a test knows for certain that
 * the writer is at that point. Nothing happens otherwise. */
#define TEST_PAUSE_AT_ENV "ORION_TEST_PAUSE_AT"
#define TEST_PAUSE_FIFO_ENV "ORION_TEST_PAUSE_FIFO"
void test_pause_at(const char *point);

#endif
