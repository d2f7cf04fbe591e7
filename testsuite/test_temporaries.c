/*
 * Temporaries and their leftovers (support/temporaries.c, support/leftovers.c):
 * which names are temporaries', what a marker must say for its temporary to
 * be a leftover, and that nothing else is ever removed.
 */
#define _GNU_SOURCE

#include "orion/temporaries.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "orion/support.h"

static char dir[64];

static void scratch(void) {
  snprintf(dir, sizeof dir, "/tmp/orion-test-temporaries-XXXXXX");
  cr_assert(mkdtemp(dir));
}

static void unscratch(void) { remove_tree(dir); }

static char *in_dir(const char *name) {
  static char paths[4][256];
  static int next;
  char *p = paths[next++ % 4];
  snprintf(p, 256, "%s/%s", dir, name);
  return p;
}

static bool exists(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0;
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  cr_assert(f);
  fputs(text, f);
  fclose(f);
}

/* The fields of this process's own marker line. */
typedef struct Fields {
  long pid;
  unsigned long long start, made;
  long long time;
  char boot[64], host[80];
} Fields;

static Fields my_fields(void) {
  char line[256];
  cr_assert(temp_marker_line(line, sizeof line));
  Fields f;
  cr_assert_eq(sscanf(line, "orion-temporary 1 pid=%ld start=%llu boot=%63s host=%79s made=%llu time=%lld", &f.pid,
                      &f.start, f.boot, f.host, &f.made, &f.time),
               6, "%s", line);
  return f;
}

static void write_marker(const char *temp, const Fields *f) {
  char path[300], line[256];
  snprintf(path, sizeof path, "%s.owner", temp);
  snprintf(line, sizeof line, "orion-temporary 1 pid=%ld start=%llu boot=%s host=%s made=%llu time=%lld\n", f->pid,
           f->start, f->boot, f->host, f->made, f->time);
  write_text(path, line);
}

/* A pid that has just ended and been reaped: no process has it. */
static long gone_pid(void) {
  pid_t p = fork();
  cr_assert(p >= 0);
  if (p == 0) _exit(0);
  waitpid(p, NULL, 0);
  return (long)p;
}

/* Made by a process that is gone, before this one started. */
static Fields gone_fields(void) {
  Fields f = my_fields();
  f.pid = gone_pid();
  f.made = 0;
  return f;
}

Test(temp_names, patterns) {
  cr_assert(temp_name_matches("x.anepkg.tmp-AbC123"));
  cr_assert(temp_name_matches("Manifest.plist.tmp.z9Z9z9"));
  cr_assert(temp_name_matches("m.anepkg.verify-000000"));
  cr_assert(temp_name_matches("orion-verify-aaaaaa"));
  cr_assert(temp_name_matches("k.anepkg.tmp-XXXXXX"));
  cr_assert_not(temp_name_matches(".tmp-AbC123"), "no name before the suffix");
  cr_assert_not(temp_name_matches("x.anepkg.tmp-AbC12"), "five random characters");
  cr_assert_not(temp_name_matches("x.anepkg.tmp-AbC1234"), "seven");
  cr_assert_not(temp_name_matches("x.anepkg.tmp-AbC-23"));
  cr_assert_not(temp_name_matches("x.anepkg"));
  cr_assert_not(temp_name_matches("x.anepkg.tmp-AbC123.owner"));
  cr_assert_not(temp_name_matches("my-orion-verify-aaaaaa"));
  cr_assert_not(temp_name_matches("x.backup-AbC123"));
}

Test(temporaries, made_with_a_marker_naming_this_process, .init = scratch, .fini = unscratch) {
  char *tmpl = xstrdup(in_dir("x.anepkg.tmp-XXXXXX"));
  cr_assert(temp_make_dir(tmpl));
  cr_assert(temp_name_matches(strrchr(tmpl, '/') + 1));
  struct stat st;
  cr_assert(stat(tmpl, &st) == 0 && S_ISDIR(st.st_mode));
  char marker[300], text[256] = "";
  snprintf(marker, sizeof marker, "%s.owner", tmpl);
  FILE *f = fopen(marker, "r");
  cr_assert(f);
  cr_assert(fgets(text, sizeof text, f));
  fclose(f);
  char want[64];
  snprintf(want, sizeof want, "orion-temporary 1 pid=%ld ", (long)getpid());
  cr_assert(!strncmp(text, want, strlen(want)), "%s", text);
  /* Never a leftover: made after this process started, or, when the test
   * runs within the clock tick this process started in (the start time's
   * resolution), made by a live maker. Which of the two depends on how fast
   * the machine is; "made too late" itself is tested in what_is_left_alone. */
  LeftoverVerdict v = leftover_check(tmpl);
  cr_assert(v == LEFTOVER_TOO_NEW || v == LEFTOVER_MAKER_ALIVE, "verdict %d: this process's own temporary", (int)v);
  cr_assert_eq(leftovers_clean(dir, NULL, NULL), 0);
  cr_assert(exists(tmpl));
  temp_remove(tmpl);
  cr_assert_not(exists(tmpl));
  cr_assert_not(exists(marker));
  free(tmpl);
}

Test(temporaries, file_released_after_rename_leaves_no_marker, .init = scratch, .fini = unscratch) {
  char *tmpl = xstrdup(in_dir("out.npy.tmp.XXXXXX"));
  int fd = temp_make_file(tmpl);
  cr_assert(fd >= 0);
  cr_assert_eq(write(fd, "x", 1), 1);
  close(fd);
  cr_assert(rename(tmpl, in_dir("out.npy")) == 0);
  temp_release(tmpl);
  char marker[300];
  snprintf(marker, sizeof marker, "%s.owner", tmpl);
  cr_assert_not(exists(marker));
  cr_assert(exists(in_dir("out.npy")));
  free(tmpl);
}

static int count_entries(void) {
  DIR *d = opendir(dir);
  cr_assert(d);
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  closedir(d);
  return n;
}

Test(temporaries, atomic_write_leaves_only_the_file, .init = scratch, .fini = unscratch) {
  const char *err;
  cr_assert(write_file_atomic(in_dir("a.txt"), "abc", 3, &err));
  struct stat st;
  cr_assert(stat(in_dir("a.txt"), &st) == 0 && st.st_size == 3);
  cr_assert_eq(count_entries(), 1);
}

/* A device or a pipe is written where it is, not replaced by a file: with
 * -o /dev/null run as root, a rename would put a file in /dev/null's place. */
Test(temporaries, atomic_write_to_a_pipe_writes_into_it, .init = scratch, .fini = unscratch) {
  const char *err;
  cr_assert_eq(mkfifo(in_dir("pipe"), 0600), 0);
  int reader = open(in_dir("pipe"), O_RDONLY | O_NONBLOCK);
  cr_assert(reader >= 0);
  cr_assert(write_file_atomic(in_dir("pipe"), "abc", 3, &err), "%s", err);
  char got[8] = "";
  cr_assert_eq(read(reader, got, sizeof got), 3);
  cr_assert_str_eq(got, "abc");
  close(reader);
  struct stat st;
  cr_assert(stat(in_dir("pipe"), &st) == 0 && S_ISFIFO(st.st_mode), "still the pipe");
  cr_assert_eq(count_entries(), 1);
}

typedef struct Seen {
  char path[300];
  long pid;
  int n;
} Seen;

static void seen(void *ctx, const char *path, long pid) {
  Seen *s = ctx;
  snprintf(s->path, sizeof s->path, "%s", path);
  s->pid = pid;
  s->n++;
}

Test(leftovers, a_dead_makers_directory_is_removed_and_named, .init = scratch, .fini = unscratch) {
  const char *temp = in_dir("x.anepkg.tmp-AbC123");
  cr_assert(mkdir(temp, 0755) == 0);
  cr_assert(mkdir(in_dir("x.anepkg.tmp-AbC123/weights"), 0755) == 0);
  write_text(in_dir("x.anepkg.tmp-AbC123/weights/weight.bin"), "data");
  Fields f = gone_fields();
  write_marker(temp, &f);
  cr_assert_eq(leftover_check(temp), LEFTOVER_YES);
  Seen s = {0};
  cr_assert_eq(leftovers_clean(dir, NULL, &(LeftoverReport){.fn = seen, .ctx = &s}), 1);
  cr_assert_eq(s.n, 1);
  cr_assert_str_eq(s.path, temp);
  cr_assert_eq(s.pid, f.pid);
  cr_assert_eq(count_entries(), 0, "the directory and its marker are gone");
}

Test(leftovers, a_reused_pid_is_not_the_maker, .init = scratch, .fini = unscratch) {
  const char *temp = in_dir("a.npy.tmp.qqqqqq");
  write_text(temp, "partial");
  Fields f = my_fields(); /* this process's pid, but another start: the maker died, the pid came back */
  f.start += 1;
  f.made = 0;
  write_marker(temp, &f);
  cr_assert_eq(leftover_check(temp), LEFTOVER_YES);
  cr_assert_eq(leftovers_clean_beside(in_dir("a.npy"), NULL), 1);
  cr_assert_eq(count_entries(), 0);
}

Test(leftovers, an_earlier_boot_is_gone, .init = scratch, .fini = unscratch) {
  const char *temp = in_dir("m.anepkg.verify-b00t00");
  cr_assert(mkdir(temp, 0755) == 0);
  Fields f = my_fields();
  snprintf(f.boot, sizeof f.boot, "00000000-0000-0000-0000-000000000000");
  f.made = ~0ull; /* in that boot's terms: says nothing about this one */
  write_marker(temp, &f);
  cr_assert_eq(leftover_check(temp), LEFTOVER_YES);
}

Test(leftovers, another_hosts_is_kept, .init = scratch, .fini = unscratch) {
  const char *temp = in_dir("m.anepkg.tmp-h0st00");
  cr_assert(mkdir(temp, 0755) == 0);
  Fields f = gone_fields(); /* a gone pid here, which says nothing about the other host's processes */
  snprintf(f.host, sizeof f.host, "%s", strcmp(f.host, "elsewhere") ? "elsewhere" : "elsewhere2");
  write_marker(temp, &f);
  cr_assert_eq(leftover_check(temp), LEFTOVER_OTHER_HOST);
  cr_assert_eq(leftovers_clean(dir, NULL, NULL), 0);
  cr_assert(exists(temp));
}

Test(leftovers, what_is_left_alone, .init = scratch, .fini = unscratch) {
  Fields gone = gone_fields();
  /* Named like one, no marker. */
  cr_assert(mkdir(in_dir("a.anepkg.tmp-nomark"), 0755) == 0);
  cr_assert_eq(leftover_check(in_dir("a.anepkg.tmp-nomark")), LEFTOVER_NO_MARKER);
  /* Its maker runs: this process, with its real start time. */
  Fields mine = my_fields();
  mine.made = 0;
  cr_assert(mkdir(in_dir("b.anepkg.tmp-alive0"), 0755) == 0);
  write_marker(in_dir("b.anepkg.tmp-alive0"), &mine);
  cr_assert_eq(leftover_check(in_dir("b.anepkg.tmp-alive0")), LEFTOVER_MAKER_ALIVE);
  /* A symbolic link named like one, with a marker of a dead maker: neither it nor its target goes. */
  cr_assert(mkdir(in_dir("target"), 0755) == 0);
  write_text(in_dir("target/keep"), "keep");
  cr_assert(symlink(in_dir("target"), in_dir("c.anepkg.tmp-symlnk")) == 0);
  write_marker(in_dir("c.anepkg.tmp-symlnk"), &gone);
  cr_assert_eq(leftover_check(in_dir("c.anepkg.tmp-symlnk")), LEFTOVER_SYMLINK);
  /* A marker that is a symbolic link (to a valid marker) is no marker. */
  cr_assert(mkdir(in_dir("d.anepkg.tmp-lnkmrk"), 0755) == 0);
  write_marker(in_dir("real"), &gone);
  cr_assert(symlink(in_dir("real.owner"), in_dir("d.anepkg.tmp-lnkmrk.owner")) == 0);
  cr_assert_eq(leftover_check(in_dir("d.anepkg.tmp-lnkmrk")), LEFTOVER_NO_MARKER);
  /* A malformed marker. */
  cr_assert(mkdir(in_dir("e.anepkg.tmp-badmrk"), 0755) == 0);
  write_text(in_dir("e.anepkg.tmp-badmrk.owner"), "orion-temporary 1 pid=12 start=x\n");
  cr_assert_eq(leftover_check(in_dir("e.anepkg.tmp-badmrk")), LEFTOVER_BAD_MARKER);
  /* Made after this process started. */
  Fields late = gone;
  late.made = ~0ull / 2;
  cr_assert(mkdir(in_dir("f.anepkg.tmp-latest"), 0755) == 0);
  write_marker(in_dir("f.anepkg.tmp-latest"), &late);
  cr_assert_eq(leftover_check(in_dir("f.anepkg.tmp-latest")), LEFTOVER_TOO_NEW);
  /* Not a temporary's name, even with a marker. */
  cr_assert(mkdir(in_dir("g.anepkg"), 0755) == 0);
  write_marker(in_dir("g.anepkg"), &gone);
  cr_assert_eq(leftover_check(in_dir("g.anepkg")), LEFTOVER_NOT_A_NAME);

  int before = count_entries();
  cr_assert_eq(leftovers_clean(dir, NULL, NULL), 0);
  cr_assert_eq(count_entries(), before);
  cr_assert(exists(in_dir("target/keep")));
}

Test(leftovers, markers_parse_strictly, .init = scratch, .fini = unscratch) {
  static const char *const bad[] = {
      "",
      "orion-temporary 1 pid=1 start=2 boot=b host=HOST made=3 time=4",          /* no newline */
      "orion-temporary 2 pid=1 start=2 boot=b host=HOST made=3 time=4\n",        /* another version */
      "orion-temporary 1 pid=0 start=2 boot=b host=HOST made=3 time=4\n",        /* pid 0 */
      "orion-temporary 1 pid=1 start=2 boot= host=HOST made=3 time=4\n",         /* empty boot id */
      "orion-temporary 1 pid=1 start=2 boot=b host=HOST made=3 time=4 x=5\n",    /* more */
      "orion-temporary 1 pid=1 start=2 boot=b host=HOST made=3 time=4\nagain\n", /* two lines */
      "orion-temporary 1 pid=-1 start=2 boot=b host=HOST made=3 time=4\n",
      "orion-temporary 1 start=2 pid=1 boot=b host=HOST made=3 time=4\n", /* order */
      "orion-temporary 1 pid=1 start=2 boot=b made=3 time=4\n",           /* no host */
      "orion-temporary 1 pid=1 start=2 boot=b host=a=b made=3 time=4\n",  /* not a word */
  };
  cr_assert(mkdir(in_dir("p.anepkg.tmp-parse0"), 0755) == 0);
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    write_text(in_dir("p.anepkg.tmp-parse0.owner"), bad[i]);
    cr_assert_eq(leftover_check(in_dir("p.anepkg.tmp-parse0")), LEFTOVER_BAD_MARKER, "%s", bad[i]);
  }
  write_text(in_dir("p.anepkg.tmp-parse0.owner"), "orion-temporary 1 pid=1 start=2 boot=b host=HOST made=0 time=4\n");
  cr_assert_eq(leftover_check(in_dir("p.anepkg.tmp-parse0")), LEFTOVER_OTHER_HOST, "well formed, another host's");
}

Test(leftovers, beside_a_path_only_its_own, .init = scratch, .fini = unscratch) {
  Fields gone = gone_fields();
  static const char *const names[] = {"x.anepkg.tmp-aaaaaa", "x.anepkg.verify-bbbbbb", "xy.anepkg.tmp-cccccc",
                                      "y.anepkg.tmp-dddddd"};
  for (size_t i = 0; i < 4; i++) {
    cr_assert(mkdir(in_dir(names[i]), 0755) == 0);
    write_marker(in_dir(names[i]), &gone);
  }
  /* A signal cleanup that was killed in turn: the temporary moved aside. */
  cr_assert(mkdir(in_dir("x.anepkg.tmp-eeeeee-removing"), 0755) == 0);
  write_marker(in_dir("x.anepkg.tmp-eeeeee"), &gone);
  char with_slash[300];
  snprintf(with_slash, sizeof with_slash, "%s/", in_dir("x.anepkg"));
  cr_assert_eq(leftovers_clean_beside(with_slash, NULL), 3);
  cr_assert_not(exists(in_dir("x.anepkg.tmp-aaaaaa")));
  cr_assert_not(exists(in_dir("x.anepkg.verify-bbbbbb")));
  cr_assert_not(exists(in_dir("x.anepkg.tmp-eeeeee-removing")));
  cr_assert(exists(in_dir("xy.anepkg.tmp-cccccc")));
  cr_assert(exists(in_dir("y.anepkg.tmp-dddddd")));
  cr_assert_eq(count_entries(), 4);
}

/* The signal thread's part, in a child (it freezes the registry for good). */
Test(temporaries, remove_all_removes_what_is_registered, .init = scratch, .fini = unscratch) {
  pid_t p = fork();
  cr_assert(p >= 0);
  if (p == 0) {
    char *d1 = xstrdup(in_dir("x.anepkg.tmp-XXXXXX")), *f1 = xstrdup(in_dir("o.npy.tmp.XXXXXX"));
    bool ok = temp_make_dir(d1);
    int fd = temp_make_file(f1);
    write_text(in_dir("fixed.tmp"), "journal");
    temp_track(in_dir("fixed.tmp"));
    write_text(in_dir("kept"), "not a temporary");
    temp_remove_all_and_freeze();
    _exit(ok && fd >= 0 ? 0 : 1);
  }
  int status;
  waitpid(p, &status, 0);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  cr_assert_eq(count_entries(), 1, "only 'kept' is left");
  cr_assert(exists(in_dir("kept")));
}

/* A directory of a fixed name (the ane backend's $TMPDIR/<hexStringIdentifier>/):
 * made or taken as it is, with no marker, and removed by its maker. */
Test(temporaries, named_dir_made_or_taken_without_a_marker, .init = scratch, .fini = unscratch) {
  char *named = xstrdup(in_dir("0123abcd"));
  cr_assert_not(temp_is_tracked(named));
  cr_assert(temp_make_named_dir(named));
  cr_assert(temp_is_tracked(named), "registered: a signal removes it");
  struct stat st;
  cr_assert(lstat(named, &st) == 0 && S_ISDIR(st.st_mode));
  cr_assert_eq(st.st_mode & 0777, 0700);
  cr_assert(!exists(in_dir("0123abcd.owner")), "no marker beside a named directory");
  write_text(in_dir("0123abcd/model.mil"), "program");
  cr_assert(temp_make_named_dir(named), "an existing directory is taken as it is");
  cr_assert(exists(in_dir("0123abcd/model.mil")), "and its files are kept");
  temp_remove(named);
  cr_assert(!exists(named));
  cr_assert(temp_is_tracked(named), "the second registration");
  temp_remove(named); /* the second registration: nothing left to remove */
  cr_assert_not(temp_is_tracked(named));
  cr_assert_eq(count_entries(), 0);
  free(named);
}

Test(temporaries, named_dir_refuses_what_is_not_a_directory, .init = scratch, .fini = unscratch) {
  write_text(in_dir("file"), "not a directory");
  cr_assert(symlink(dir, in_dir("link")) == 0);
  errno = 0;
  cr_assert(!temp_make_named_dir(in_dir("file")));
  cr_assert_eq(errno, EEXIST);
  errno = 0;
  cr_assert(!temp_make_named_dir(in_dir("link")), "a symbolic link to a directory is not taken");
  cr_assert_eq(errno, EEXIST);
  errno = 0;
  cr_assert(!temp_make_named_dir(in_dir("missing/below")));
  cr_assert_eq(errno, ENOENT);
  cr_assert(exists(in_dir("file")) && exists(in_dir("link")));
}

/* What a signal removes: a named directory, its contents, nothing beside it. */
Test(temporaries, remove_all_removes_a_named_dir, .init = scratch, .fini = unscratch) {
  pid_t p = fork();
  cr_assert(p >= 0);
  if (p == 0) {
    bool ok = temp_make_named_dir(in_dir("feedface"));
    write_text(in_dir("feedface/weight.bin"), "weights");
    write_text(in_dir("kept"), "not a temporary");
    temp_remove_all_and_freeze();
    _exit(ok ? 0 : 1);
  }
  int status;
  waitpid(p, &status, 0);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  cr_assert_eq(count_entries(), 1, "only 'kept' is left");
  cr_assert(exists(in_dir("kept")));
}
