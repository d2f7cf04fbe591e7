/*
 * Deterministic pauses for tests (orion/temporaries.h, test_pause_at): a
 * writer stops at a named point and tells the test it is there, so that a
 * signal lands at that point every time, with no sleep and no deadline.
 */
#include "orion/temporaries.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void test_pause_at(const char *point) {
  const char *at = getenv(TEST_PAUSE_AT_ENV), *fifo = getenv(TEST_PAUSE_FIFO_ENV);
  if (!at || !fifo || !*fifo || strcmp(at, point)) return;
  int fd = open(fifo, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;
  size_t len = strlen(point);
  if (write(fd, point, len) == (ssize_t)len) (void)!write(fd, "\n", 1);
  close(fd);
  fd = open(fifo, O_RDONLY | O_CLOEXEC); /* blocks until the test opens it to write */
  if (fd < 0) return;
  char c;
  while (read(fd, &c, 1) > 0) {
  }
  close(fd);
}
