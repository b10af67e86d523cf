/*
 * heap_fd_test.c -- purlinHeapFdCheck (issue 15, item 7): a descriptor a
 * peer process sends as its heap must be the same kind of file as this
 * process's own export, or init refuses it before the driver sees it. Here
 * files of known kinds stand in for the export: an anonymous inode (what
 * the driver's export is on Linux), a character device and a pipe.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runtime/errors.h"
#include "runtime/symmetric.h"
#include "tests/unit/check.h"

static void expectRefused(int own, int peer, const char* what) {
  purlinClearThreadError();
  purlinResult_t r = purlinHeapFdCheck(own, peer, 3);
  CHECK_EQ_INT(r, purlinRemoteError);
  if (r != purlinRemoteError) fprintf(stderr, "  case: %s\n", what);
  CHECK_CONTAINS(purlinThreadLastError(), "rank 3");
}

static void expectAccepted(int own, int peer, const char* what) {
  purlinClearThreadError();
  purlinResult_t r = purlinHeapFdCheck(own, peer, 3);
  CHECK_EQ_INT(r, purlinSuccess);
  if (r != purlinSuccess) fprintf(stderr, "  case: %s: %s\n", what, purlinThreadLastError());
}

int main(void) {
  int devNull = open("/dev/null", O_RDWR | O_CLOEXEC);
  int devNull2 = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int devZero = open("/dev/zero", O_RDONLY | O_CLOEXEC);
  int ev1 = eventfd(0, EFD_CLOEXEC), ev2 = eventfd(1, EFD_CLOEXEC);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  int pipes[2] = {-1, -1}, socks[2] = {-1, -1};
  CHECK(pipe(pipes) == 0);
  CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, socks) == 0);
  char path[] = "/tmp/purlin_heap_fd_XXXXXX";
  int file = mkstemp(path);
  CHECK(devNull >= 0 && devNull2 >= 0 && devZero >= 0 && ev1 >= 0 && ev2 >= 0 && ep >= 0 &&
        file >= 0);
  if (file >= 0) unlink(path);

  /* The same kind: two exports of one driver are alike. */
  expectAccepted(ev1, ev2, "two eventfds");
  expectAccepted(devNull, devNull2, "/dev/null twice");
  expectAccepted(pipes[0], pipes[1], "two ends of a pipe");

  /* An anonymous inode of another kind: same inode and file system, told
   * apart by name only. */
  expectRefused(ev1, ep, "epoll for an eventfd");
  /* The frame of the issue: /dev/null in place of an export. */
  expectRefused(ev1, devNull, "/dev/null for an anonymous inode");
  /* Another character device. */
  expectRefused(devNull, devZero, "/dev/zero for /dev/null");
  expectRefused(ev1, file, "a regular file");
  expectRefused(ev1, socks[0], "a socket");
  expectRefused(ev1, pipes[0], "a pipe");
  /* Nothing sent, and a descriptor that is not open. */
  expectRefused(ev1, -1, "no descriptor");
  expectRefused(ev1, 1000000, "a closed descriptor");

  close(devNull);
  close(devNull2);
  close(devZero);
  close(ev1);
  close(ev2);
  close(ep);
  close(pipes[0]);
  close(pipes[1]);
  close(socks[0]);
  close(socks[1]);
  close(file);
  return CHECK_EXIT();
}
