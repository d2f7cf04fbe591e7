/*
 * SIGINT and SIGTERM for every tool that writes: one thread does the cleanup
 * (ordinary code, not a signal handler): it removes the temporaries
 * registered at that moment and ends the process by the same signal, so
 * that the shell sees 130 or 143 as if nothing had been caught.
 *
 * The signals are blocked in the thread that installs this and in every
 * thread it makes later, but a library may have made threads before main
 * (OpenBLAS starts its pool in a constructor), and one of those may be the
 * thread the kernel picks. So the signal has a handler too, which only
 * writes the signal's number into a pipe that the cleanup thread reads.
 */
#define _GNU_SOURCE
#include "orion/temporaries.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

static int signal_pipe[2] = {-1, -1}; /* written once, before the handler is installed */

static void on_signal(int sig) {
  unsigned char s = (unsigned char)sig;
  (void)!write(signal_pipe[1], &s, 1); /* async-signal-safe; the pipe never fills before the process ends */
}

static void *await_interrupt(void *ctx) {
  const sigset_t *caught = ctx;
  /* This thread takes the signals when no other can: every thread made
   * after the caller blocked them has them blocked. */
  pthread_sigmask(SIG_UNBLOCK, caught, NULL);
  unsigned char s;
  for (;;) {
    ssize_t n = read(signal_pipe[0], &s, 1);
    if (n == 1) break;
    if (n == 0) return NULL;
  }
  int sig = s;
  /* The registry stays locked: a writer cannot make another temporary now. */
  temp_remove_all_and_freeze();
  signal(sig, SIG_DFL);
  raise(sig);
  _exit(128 + sig); /* not reached */
}

void temp_cleanup_on_signals(void) {
  static const int signals[] = {SIGINT, SIGTERM};
  static sigset_t caught; /* the cleanup thread reads it until the process ends */
  sigemptyset(&caught);
  bool any = false;
  for (size_t i = 0; i < sizeof signals / sizeof *signals; i++) {
    struct sigaction now;
    /* SIGINT in a shell's background job is ignored from the start: keep it so. */
    if (sigaction(signals[i], NULL, &now) == 0 && now.sa_handler == SIG_IGN) continue;
    sigaddset(&caught, signals[i]);
    any = true;
  }
  if (!any || signal_pipe[0] >= 0 || pipe2(signal_pipe, O_CLOEXEC) != 0) return;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigfillset(&sa.sa_mask);
  pthread_t t;
  if (pthread_sigmask(SIG_BLOCK, &caught, NULL) != 0) return;
  for (size_t i = 0; i < sizeof signals / sizeof *signals; i++)
    if (sigismember(&caught, signals[i])) sigaction(signals[i], &sa, NULL);
  if (pthread_create(&t, NULL, await_interrupt, &caught) != 0) {
    for (size_t i = 0; i < sizeof signals / sizeof *signals; i++)
      if (sigismember(&caught, signals[i])) signal(signals[i], SIG_DFL);
    pthread_sigmask(SIG_UNBLOCK, &caught, NULL); /* then a signal kills as it always did */
    return;
  }
  pthread_detach(t);
}
