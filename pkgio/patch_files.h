/*
 * The file steps of a weight update (patch.c): package files written,
 * synced, renamed and removed relative to descriptors opened by the package
 * rule (orion/pkg_paths.h), each durable step counted for the crash tests'
 * fault injection (PATCH_FAULT_ENV), the temporaries registered for the
 * signal cleanup. Internal to the package I/O library.
 */
#ifndef ORION_PATCH_FILES_H
#define ORION_PATCH_FILES_H

#include "orion/support.h"

/* Writes are cut into pieces of this size so that injected faults (and real
 * crashes) can land inside a region. */
#define WRITE_PIECE (4u << 20)

double patch_now_ms(void);
/* "PKG/NAME", malloc'd. */
char *patch_pkg_path(const char *pkg, const char *name);

/* Fault injection: patch_fault_init reads PATCH_FAULT_ENV (step N is
 * killed with SIGKILL; unset or 0: none) and restarts the count that every
 * durable step (patch_step) advances. */
void patch_fault_init(void);
void patch_step(void);

/* Little-endian u64 in the journal. */
void patch_put_u64(uint8_t *p, uint64_t v);
uint64_t patch_get_u64(const uint8_t *p);

/* n bytes at offset off, in pieces of WRITE_PIECE (each a step); false with errno. */
bool patch_write_all(int fd, const uint8_t *p, uint64_t n, uint64_t off);
bool patch_sync_fd(int fd);
bool patch_sync_dir(const char *path);
/* The directory holding package file `name` and name's last component; -1 with errno. */
int patch_open_parent(const char *pkg, const char *name, const char **base);
/* Package file `name` opened with flags by the package rule; -1 with errno (ELOOP when it leads outside). */
int patch_open_member(const char *pkg, const char *name, int flags);
/* fsync of the package directory `sub`. */
bool patch_sync_parent(const char *pkg, const char *sub);
/* A temporary of the package registered for (or taken off) the signal cleanup. */
void patch_track_in(const char *pkg, const char *name);
void patch_untrack_in(const char *pkg, const char *name);
/* Both names in one directory of the package (a temporary beside its file). */
bool patch_rename_in(const char *pkg, const char *from, const char *to);
bool patch_unlink_in(const char *pkg, const char *name);
/* The parts written as one new file under `name` in the package, synced; a link planted there is refused. */
bool patch_write_new_file(const char *pkg, const char *name, const uint8_t *const *parts, const uint64_t *lens,
                          uint32_t nparts);
/* A whole package file, malloc'd; false with *err. */
bool patch_read_member(const char *pkg, const char *name, char **text, size_t *len, const char **err);

#endif
