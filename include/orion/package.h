/*
 * The .anepkg package: a directory holding one MIL program per function,
 * weights/weight.bin (MIL blob storage v2) and Manifest.plist (an XML
 * property list describing everything, with checksums). See
 * docs/package-format.md. Writing it is the compiler's (here); reading it is
 * the package I/O library's (orion/manifest.h).
 */
#ifndef ORION_PACKAGE_H
#define ORION_PACKAGE_H

#include "orion/manifest.h"
#include "orion/mil.h"
#include "orion/weights.h"

/* Per-target facts the package records (until the constraint table owns them). */
typedef struct TargetInfo {
  MilTarget target;
  uint64_t min_surface_bytes; /* smallest IOSurface the ANE accepts */
} TargetInfo;
const TargetInfo *target_info(MilTarget t);

/* Where the time of a package write went (filled when PackageOptions.stats is set). */
typedef struct PackageStats {
  double weights_ms;  /* producing weight bytes (initializers, file import, conversion) and laying out blobs */
  double mil_ms;      /* MIL text, excluding weights_ms */
  double manifest_ms; /* the manifest, including checksums */
  double write_ms;    /* writing and syncing the files, renaming into place */
  uint64_t weight_bytes;
} PackageStats;

/* Told the temporary directory a writer makes beside the package when it is
 * made, and NULL once it is gone, so that a driver can remove it when it is
 * killed in between (orion/compile.h, orion_compile_cleanup). begin
 * (optional) is called right before the directory is made and fn right
 * after (with NULL if it could not be made): a driver that holds a lock from
 * begin to fn never sees a directory that exists but was not reported. */
typedef struct TempDirHook {
  void (*fn)(void *ctx, const char *path);
  void (*begin)(void *ctx);
  void *ctx;
} TempDirHook;

/* Copies the files of the package at `from` (the manifest, the MIL files,
 * the weight file) into the existing empty directory `to`, each synced and
 * each read through the package's descriptor (orion/pkg_paths.h: a file
 * leading out of the package is not copied, ELOOP); false with errno set
 * on failure. */
bool package_copy(const char *from, const char *to);

/* mkdtemp(tmpl) between the hook's begin and fn (h may be NULL). */
bool temp_dir_make(const TempDirHook *h, char *tmpl);

typedef struct PackageOptions {
  MilTarget target;
  const char *chip;           /* orionc --chip, recorded in the manifest (Chip), or NULL */
  uint64_t min_surface_bytes; /* the chip's or target's minimum surface (0: target_info's) */
  const char *source_name;  /* for the manifest */
  const char *source_text;  /* hashed into the manifest */
  size_t source_len;
  WeightLoadOptions weights;
  uint32_t warnings;        /* compiler warnings */
  bool lint_checked;        /* the constraint checker ran on the program */
  uint32_t lint_errors, lint_warnings; /* its findings (errors only when allowed) */
  PackageStats *stats;      /* optional */
  bool keep_duplicate_weights; /* one blob per weight, even tied ones and equal consts (--no-dedup) */
  const char *const *compile_args; /* compiler options that shape the package (manifest CompileArguments) */
  uint32_t ncompile_args;
  TempDirHook temp_dir;     /* optional */
  /* The training contract to record (manifest Training), or NULL; its
   * saved_bytes is ignored (the writer computes it). Checked against the
   * functions before anything is written. */
  const PkgTraining *training;
} PackageOptions;

/* Emits every live function of a legalized module and writes the package to
 * `path` atomically: into a temporary directory beside it, then renamed into
 * place (an existing package is replaced only on success). */
bool package_write(IrModule *m, const char *path, const PackageOptions *opt, Diag *d);

/* Whether `path` may receive a package: nothing is there (*exists false), or
 * a package is (*exists true); anything else is reported. */
bool package_check_target(const char *path, bool *exists, Diag *d);
/* Puts the complete package directory `tmp` (beside path) in place: synced,
 * then renamed, or atomically exchanged with the existing package, which is
 * then at `tmp` for the caller to remove. */
bool package_install(const char *tmp, const char *path, bool exists, const char **err);

/* Emits the MIL of every live function to `out` (weights are still laid out,
 * in memory, so offsets are the ones a package would have). */
bool package_emit_mil(IrModule *m, const PackageOptions *opt, StrBuf *out, Diag *d);

#endif
