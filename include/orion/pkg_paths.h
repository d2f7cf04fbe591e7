/*
 * Confinement of the names a package uses as paths or that become file
 * names (MIL file names, weight file names, output and output-group names
 * that orion-run writes as NAME.npy), and of the files a package's names
 * reach on disk. One rule for every tool: the manifest reader, the loader,
 * inspect, lint, run and patch all go through these. See
 * docs/package-format.md, "Names and paths".
 */
#ifndef ORION_PKG_PATHS_H
#define ORION_PKG_PATHS_H

#include <stdbool.h>
#include <stddef.h>

typedef enum PkgNameKind {
  PKG_NAME_PLAIN,   /* one file name: no separator (MIL files, outputs, groups) */
  PKG_NAME_RELPATH, /* a relative path inside the package (weight files) */
} PkgNameKind;

/* Whether `name` may be used as a name of that kind: not empty, no control
 * character, not absolute, no '.' or '..' component, no '/' in a plain name,
 * no empty component. On false `why` holds the reason ("has a '..' component"). */
bool pkg_name_ok(const char *name, PkgNameKind kind, char *why, size_t why_size);

/* Whether the file `rel` (already pkg_name_ok) of the package at `root`
 * stays inside the package once symbolic links are followed; a missing file
 * is judged by the longest prefix that exists. On false `why` holds the
 * reason, naming the link's target path but never its content. */
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
