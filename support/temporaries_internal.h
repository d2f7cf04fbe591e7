/*
 * What support/temporaries.c and support/leftovers.c share: the marker's
 * format and where a process's start time and the boot id are read.
 */
#ifndef ORION_TEMPORARIES_INTERNAL_H
#define ORION_TEMPORARIES_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

/* "orion-temporary 1 pid=P start=S boot=B host=H made=M time=T": S the
 * maker's start in clock ticks since boot, H the host's name (uname), M when
 * the marker was made (CLOCK_BOOTTIME, nanoseconds), T the same in seconds
 * since the epoch (for people). */
#define MARKER_MAGIC "orion-temporary 1"
#define MARKER_MAX 256u
#define BOOT_ID_MAX 64u
#define HOST_MAX 72u

typedef struct Marker {
  long pid;
  unsigned long long start_ticks, made_ns;
  long long wall_time;
  char boot[BOOT_ID_MAX];
  char host[HOST_MAX];
} Marker;

/* Parses one marker line (with its newline, nothing after). */
bool marker_parse(const char *text, uint32_t len, Marker *m);

/* A process's start (clock ticks since boot) and state letter ('R', 'Z', ...)
 * from /proc/PID/stat (pid 0: the calling process). False when there is no
 * such process or no /proc. */
bool process_start(long pid, unsigned long long *ticks, char *state);
/* The boot id (/proc/sys/kernel/random/boot_id), false without one. */
bool boot_id(char *buf, uint32_t size);
/* The host's name as a marker word (anything but letters, digits, '.', '-'
 * and '_' becomes '_'), or "unknown". */
void host_name(char *buf, uint32_t size);

#endif
