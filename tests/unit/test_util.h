/*
 * test_util.h -- small helpers the host and GPU tests share: open file
 * descriptors (leak checks) and a monotonic clock.
 */
#ifndef PURLIN_TESTS_UNIT_TEST_UTIL_H_
#define PURLIN_TESTS_UNIT_TEST_UTIL_H_

#include <dirent.h>
#include <time.h>

/* Entries of /proc/self/fd, not counting the directory stream itself; -1
 * when /proc is not there. */
static inline int testOpenFds(void) {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (d == NULL) return -1;
  for (struct dirent* e; (e = readdir(d)) != NULL;)
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n - 1;
}

static inline double testNowMs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

#endif /* PURLIN_TESTS_UNIT_TEST_UTIL_H_ */
