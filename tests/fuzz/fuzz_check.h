/*
 * fuzz_check.h -- a failed invariant in a fuzz target aborts with the
 * reason, which both libFuzzer and the plain driver report as a crash.
 */
#ifndef PURLIN_TESTS_FUZZ_FUZZ_CHECK_H_
#define PURLIN_TESTS_FUZZ_FUZZ_CHECK_H_

#include <stdio.h>
#include <stdlib.h>

#define FUZZ_ASSERT(cond)                                                       \
  do {                                                                          \
    if (!(cond)) {                                                              \
      fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      abort();                                                                  \
    }                                                                           \
  } while (0)

#endif /* PURLIN_TESTS_FUZZ_FUZZ_CHECK_H_ */
