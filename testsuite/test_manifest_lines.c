/*
 * A well-formed Manifest.plist on disk that is wrong says where:
 * "PACKAGE/Manifest.plist:LINE:COL: error: manifest: ..." at the element
 * at fault (libxml2's line, the column of its start tag), the message text
 * after the location as it always was (pkgio/package_read.c).
 */
/* realpath() and setenv() are XSI/POSIX beyond the project-wide _POSIX_C_SOURCE. */
#define _XOPEN_SOURCE 700

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "orion/manifest.h"
#include "orion/support.h"

#define HASH "0000000000000000000000000000000000000000000000000000000000000000"
#define XXH "0123456789abcdef"

/* One element per line, as orionc writes it; line numbers are in the comments. */
static const char *const lines[] = {
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>",     /* 1 */
    "<plist version=\"1.0\">",                        /* 2 */
    "<dict>",                                         /* 3 */
    "  <key>FormatVersion</key>",                     /* 4 */
    "  <integer>1</integer>",                         /* 5 */
    "  <key>CompilerVersion</key>",                   /* 6 */
    "  <string>orionc</string>",                      /* 7 */
    "  <key>Target</key>",                            /* 8 */
    "  <string>ios18</string>",                       /* 9 */
    "  <key>ProgramVersion</key>",                    /* 10 */
    "  <string>1.3</string>",                         /* 11 */
    "  <key>Source</key>",                            /* 12 */
    "  <string>t.oir</string>",                       /* 13 */
    "  <key>SourceSHA256</key>",                      /* 14 */
    "  <string>" HASH "</string>",                    /* 15 */
    "  <key>WeightsFile</key>",                       /* 16 */
    "  <string>weights/weight.bin</string>",          /* 17 */
    "  <key>WeightsLayoutXXH64</key>",                /* 18 */
    "  <string>" XXH "</string>",                     /* 19 */
    "  <key>WeightsSize</key>",                       /* 20 */
    "  <integer>64</integer>",                        /* 21 */
    "  <key>WeightsGeneration</key>",                 /* 22 */
    "  <integer>0</integer>",                         /* 23 */
    "  <key>MinimumSurfaceBytes</key>",               /* 24 */
    "  <integer>49152</integer>",                     /* 25 */
    "  <key>Functions</key>",                         /* 26 */
    "  <array>",                                      /* 27 */
    "    <dict>",                                     /* 28 */
    "      <key>Name</key>",                          /* 29 */
    "      <string>main</string>",                    /* 30 */
    "      <key>MILFile</key>",                       /* 31 */
    "      <string>model.mil</string>",               /* 32 */
    "      <key>MILXXH64</key>",                      /* 33 */
    "      <string>" XXH "</string>",                 /* 34 */
    "      <key>SurfaceBytes</key>",                  /* 35 */
    "      <integer>49152</integer>",                 /* 36 */
    "      <key>Inputs</key>",                        /* 37 */
    "      <array>",                                  /* 38 */
    "        <dict>",                                 /* 39 */
    "          <key>Name</key>",                      /* 40 */
    "          <string>a</string>",                   /* 41 */
    "          <key>MILName</key>",                   /* 42 */
    "          <string>a_mil</string>",               /* 43 */
    "          <key>DType</key>",                     /* 44 */
    "          <string>fp16</string>",                /* 45 */
    "          <key>Shape</key>",                     /* 46 */
    "          <array>",                              /* 47 */
    "            <integer>2</integer>",               /* 48 */
    "          </array>",                             /* 49 */
    "          <key>Binding</key>",                   /* 50 */
    "          <integer>0</integer>",                 /* 51 */
    "          <key>Bytes</key>",                     /* 52 */
    "          <integer>4</integer>",                 /* 53 */
    "          <key>SurfaceBytes</key>",              /* 54 */
    "          <integer>49152</integer>",             /* 55 */
    "        </dict>",                                /* 56 */
    "      </array>",                                 /* 57 */
    "      <key>Outputs</key>",                       /* 58 */
    "      <array>",                                  /* 59 */
    "        <dict>",                                 /* 60 */
    "          <key>Name</key>",                      /* 61 */
    "          <string>y</string>",                   /* 62 */
    "          <key>MILName</key>",                   /* 63 */
    "          <string>y_mil</string>",               /* 64 */
    "          <key>DType</key>",                     /* 65 */
    "          <string>fp32</string>",                /* 66 */
    "          <key>Shape</key>",                     /* 67 */
    "          <array>",                              /* 68 */
    "            <integer>2</integer>",               /* 69 */
    "          </array>",                             /* 70 */
    "          <key>Binding</key>",                   /* 71 */
    "          <integer>1</integer>",                 /* 72 */
    "          <key>Bytes</key>",                     /* 73 */
    "          <integer>8</integer>",                 /* 74 */
    "          <key>SurfaceBytes</key>",              /* 75 */
    "          <integer>49152</integer>",             /* 76 */
    "        </dict>",                                /* 77 */
    "        <dict>",                                 /* 78 */
    "          <key>Name</key>",                      /* 79 */
    "          <string>z</string>",                   /* 80 */
    "          <key>MILName</key>",                   /* 81 */
    "          <string>z_mil</string>",               /* 82 */
    "          <key>DType</key>",                     /* 83 */
    "          <string>fp16</string>",                /* 84 */
    "          <key>Shape</key>",                     /* 85 */
    "          <array>",                              /* 86 */
    "            <integer>2</integer>",               /* 87 */
    "          </array>",                             /* 88 */
    "          <key>Binding</key>",                   /* 89 */
    "          <integer>0</integer>",                 /* 90 */
    "          <key>Bytes</key>",                     /* 91 */
    "          <integer>4</integer>",                 /* 92 */
    "          <key>SurfaceBytes</key>",              /* 93 */
    "          <integer>49152</integer>",             /* 94 */
    "        </dict>",                                /* 95 */
    "      </array>",                                 /* 96 */
    "      <key>Weights</key>",                       /* 97 */
    "      <array>",                                  /* 98 */
    "      </array>",                                 /* 99 */
    "    </dict>",                                    /* 100 */
    "  </array>",                                     /* 101 */
    "  <key>Lint</key>",                              /* 102 */
    "  <dict>",                                       /* 103 */
    "    <key>Checked</key>",                         /* 104 */
    "    <false/>",                                   /* 105 */
    "    <key>Errors</key>",                          /* 106 */
    "    <integer>0</integer>",                       /* 107 */
    "    <key>Warnings</key>",                        /* 108 */
    "    <integer>0</integer>",                       /* 109 */
    "  </dict>",                                      /* 110 */
    "</dict>",                                        /* 111 */
    "</plist>",                                       /* 112 */
};

static char dir[64];

static void in_scratch(void) {
  test_dir_make(dir, sizeof dir, "manifest-lines");
  char p[128];
  snprintf(p, sizeof p, "%s/p.anepkg", dir);
  cr_assert_eq(mkdir(p, 0755), 0);
}

static void out_of_scratch(void) { test_dir_remove(dir); }

/* The template with line `at` (1-based) replaced by `with` (NULL: removed;
 * 0: nothing replaced), and `pad` blank lines before it, written as the
 * package's manifest; what package_read says of it, the scratch directory
 * shown as D. */
static const char *read_with(unsigned at, const char *with, unsigned pad) {
  StrBuf text;
  sb_init(&text);
  for (unsigned i = 0; i < sizeof lines / sizeof *lines; i++) {
    if (i + 1 == at)
      for (unsigned k = 0; k < pad; k++) sb_putc(&text, '\n');
    if (i + 1 == at && !with) continue;
    sb_puts(&text, i + 1 == at ? with : lines[i]);
    sb_putc(&text, '\n');
  }
  char p[128];
  snprintf(p, sizeof p, "%s/p.anepkg/" PACKAGE_MANIFEST, dir);
  FILE *f = fopen(p, "w");
  cr_assert_not_null(f);
  cr_assert_eq(fwrite(text.data, 1, text.len, f), text.len);
  cr_assert_eq(fclose(f), 0);
  sb_free(&text);
  StrBuf out;
  sb_init(&out);
  Diag d;
  diag_init(&d, NULL);
  d.capture = &out;
  Package pkg;
  snprintf(p, sizeof p, "%s/p.anepkg", dir);
  static char got[1024];
  if (package_read(p, &pkg, &d)) {
    package_free(&pkg);
    snprintf(got, sizeof got, "read");
  } else {
    const char *m = out.data ? out.data : "";
    const char *at_dir = strstr(m, dir);
    if (at_dir) snprintf(got, sizeof got, "%.*sD%s", (int)(at_dir - m), m, at_dir + strlen(dir));
    else snprintf(got, sizeof got, "%s", m);
  }
  sb_free(&out);
  return got;
}

#define AT(line_col) "D/p.anepkg/Manifest.plist:" line_col ": error: manifest: "

Test(manifest_lines, template_is_sound, .init = in_scratch, .fini = out_of_scratch) {
  /* The files it names do not exist: a missing file is for the verifier, not the manifest reader. */
  cr_assert_str_eq(read_with(0, NULL, 0), "read");
}

Test(manifest_lines, missing_key_at_its_dict, .init = in_scratch, .fini = out_of_scratch) {
  cr_assert_str_eq(read_with(42, NULL, 0), AT("39:9") "input has no 'MILName'\n");
  cr_assert_str_eq(read_with(102, NULL, 0), AT("3:1") "the manifest has no 'Lint'\n");
}

Test(manifest_lines, wrong_type_at_the_value, .init = in_scratch, .fini = out_of_scratch) {
  cr_assert_str_eq(read_with(9, "  <integer>18</integer>", 0), AT("9:3") "'Target' of the manifest must be <string>\n");
  cr_assert_str_eq(read_with(51, "          <string>0</string>", 0), AT("51:11") "'Binding' of input must be <integer>\n");
  cr_assert_str_eq(read_with(105, "    <string>no</string>", 0), AT("105:5") "'Checked' of 'Lint' must be <true/> or <false/>\n");
}

Test(manifest_lines, bad_values, .init = in_scratch, .fini = out_of_scratch) {
  cr_assert_str_eq(read_with(21, "  <integer>-1</integer>", 0),
                   AT("21:3") "'WeightsSize' of the manifest must be an integer from 0 to 18446744073709551615\n");
  cr_assert_str_eq(read_with(72, "          <integer>2000000</integer>", 0),
                   AT("72:11") "'Binding' of output must be an integer from 0 to 1048576\n");
  cr_assert_str_eq(read_with(9, "  <string>ios12</string>", 0), AT("9:3") "unknown target 'ios12'\n");
  cr_assert_str_eq(read_with(48, "            <integer>0</integer>", 0), AT("48:13") "input 'a' has an invalid shape\n");
  cr_assert_str_eq(read_with(74, "          <integer>6</integer>", 0),
                   AT("74:11") "output 'y' has 6 bytes but its shape and dtype need 8\n");
  cr_assert_str_eq(read_with(34, "      <string>0123</string>", 0),
                   AT("34:7") "'MILXXH64' of a function must be 16 lowercase hex digits\n");
  cr_assert_str_eq(read_with(90, "          <integer>1</integer>", 0),
                   AT("90:11") "the output bindings are not 0..1, each once\n");
}

Test(manifest_lines, unknown_dtype, .init = in_scratch, .fini = out_of_scratch) {
  cr_assert_str_eq(read_with(66, "          <string>fp17</string>", 0), AT("66:11") "output 'y' has the unknown dtype 'fp17'\n");
}

Test(manifest_lines, names, .init = in_scratch, .fini = out_of_scratch) {
  cr_assert_str_eq(read_with(32, "      <string>../m.mil</string>", 0),
                   AT("32:7") "MIL file name '../m.mil' has a '/' where a plain name is meant; it must be a plain "
                              "name inside the package\n");
  cr_assert_str_eq(read_with(62, "          <string>..</string>", 0),
                   AT("62:11") "output name '..' of function 'main' has a '..' component (outputs are written as "
                               "NAME.npy)\n");
  /* Two outputs written to one file: at the later name. */
  cr_assert_str_eq(read_with(80, "          <string>y</string>", 0),
                   AT("80:11") "two outputs of function 'main' would both be written as 'y.npy'\n");
  cr_assert_str_eq(read_with(17, "  <string>weights/other.bin</string>", 0),
                   AT("17:3") "'WeightsFile' must be 'weights/weight.bin'\n");
}

/* libxml2 caps line numbers at 65535 unless asked not to. */
Test(manifest_lines, past_line_65535, .init = in_scratch, .fini = out_of_scratch) {
  cr_assert_str_eq(read_with(9, "  <string>ios12</string>", 70000), AT("70009:3") "unknown target 'ios12'\n");
}
