/*
 * Confinement of the names a package uses as paths or that become file
 * names (MIL file names, weight file names, output and output-group names
 * that orion-run writes as NAME.npy), and of the files a package's names
 * reach on disk. One rule for every tool: the manifest reader, the loader,
 * inspect, lint, run and patch all go through these, and open a package's
 * files only through pkg_open_file. See docs/package-format.md, "Names,
 * paths and what is verified" and "How a package's files are opened".
 */
#ifndef ORION_PKG_PATHS_H
#define ORION_PKG_PATHS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum PkgNameKind {
  PKG_NAME_PLAIN,   /* one file name: no separator (MIL files, outputs, groups) */
  PKG_NAME_RELPATH, /* a relative path inside the package (weight files) */
} PkgNameKind;

/* Whether `name` may be used as a name of that kind: not empty, no control
 * character, not absolute, no '.' or '..' component, no '/' in a plain name,
 * no empty component. On false `why` holds the reason ("has a '..' component"). */
bool pkg_name_ok(const char *name, PkgNameKind kind, char *why, size_t why_size);

/* A package directory, opened once; every file of the package is then
 * opened relative to it by pkg_open_file, so that no check by name comes
 * before a separate open by name (which a file swapped for a link between
 * the two would escape). The directory itself is opened following links:
 * it is the path the user gave (a link to a package is that package). */
typedef struct PkgDir {
  int fd;
  char *path; /* as given, for messages */
  char *real; /* its realpath at open, what absolute links are judged by; NULL if it moved meanwhile */
} PkgDir;

/* False with `err` (a static message) when `path` is no directory one can open. */
bool pkg_dir_open(PkgDir *dir, const char *path, const char **err);
void pkg_dir_close(PkgDir *dir);

/* Opens the file `rel` (already pkg_name_ok) of the package with `flags`
 * (O_RDONLY, O_WRONLY, O_RDWR, with O_CREAT/O_EXCL/O_TRUNC as needed; mode
 * 0644 when created), one component at a time relative to the directory's
 * descriptor with O_NOFOLLOW, and checks with fstat that it is a regular
 * file (a directory with O_DIRECTORY). A symbolic link on the way is
 * followed only while it stays inside the package (its target read with
 * readlinkat and walked in turn, the same way). Returns
 * the descriptor, or -1 with `why`: "leads outside the package (a symbolic
 * link to 'T')" with *outside set, naming the target's path but never its
 * content, or the reason it could not be opened (strerror, "is a directory",
 * "is not a regular file"). */
int pkg_open_file(const PkgDir *dir, const char *rel, int flags, bool *outside, char *why, size_t why_size);

/* The directory holding the file `rel` of the package, opened by
 * pkg_open_file's rule (O_DIRECTORY: a directory is wanted), with *base at
 * rel's last component: what creates, renames or removes a file of the
 * package does it relative to that (openat with O_NOFOLLOW, renameat,
 * unlinkat). -1 with errno on failure, ELOOP when it leads outside. */
int pkg_open_parent(const PkgDir *dir, const char *rel, const char **base);

/* Reads the whole file `rel` of the package (pkg_open_file, then read_fd). */
bool pkg_read_file(const PkgDir *dir, const char *rel, size_t limit, char **data, size_t *len, bool *outside,
                   char *why, size_t why_size);

/* Maps the whole file `rel` of the package read-only (MAP_PRIVATE; *data
 * NULL for an empty file); unmap with pkg_unmap_file. */
bool pkg_map_file(const PkgDir *dir, const char *rel, const uint8_t **data, size_t *len, bool *outside, char *why,
                  size_t why_size);
void pkg_unmap_file(const uint8_t *data, size_t len);

/* Whether the file `rel` of the package at `root` stays inside the package
 * once symbolic links are followed (pkg_open_file's rule; a file that is
 * missing or cannot be opened for another reason is not refused here). On
 * false `why` holds the reason. For a message before any reading: whatever
 * reads the file must still open it through pkg_open_file. */
bool pkg_file_inside(const char *root, const char *rel, char *why, size_t why_size);

/* What a directory is to orion. A directory is an orion package when it
 * holds Manifest.plist, when its name ends in ".anepkg", or when it holds a
 * weight update's journal; a package without its manifest cannot be
 * verified and is refused. A directory with model.mil and none of those is
 * a bare (Apple-style, .mlmodelc) model directory. */
typedef enum PkgDirKind {
  PKG_DIR_NONE,             /* not a model directory */
  PKG_DIR_PACKAGE,          /* an orion package with its manifest */
  PKG_DIR_PACKAGE_NO_MANIFEST,
  PKG_DIR_BARE,
} PkgDirKind;

PkgDirKind pkg_dir_kind(const char *path);

#endif
