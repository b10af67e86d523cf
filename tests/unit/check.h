/*
 * check.h -- the few assertion macros the host-only unit tests use. A failed
 * check prints file:line, the expression and the values, counts the failure
 * and carries on, so one run reports every broken case; main returns
 * CHECK_EXIT() so the test fails if any check failed.
 */
#ifndef PURLIN_TESTS_UNIT_CHECK_H_
#define PURLIN_TESTS_UNIT_CHECK_H_

#include <stdio.h>
#include <string.h>

static int checkFailures;
static int checkCount;

#define CHECK(cond)                                                      \
  do {                                                                   \
    ++checkCount;                                                        \
    if (!(cond)) {                                                       \
      ++checkFailures;                                                   \
      fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
    }                                                                    \
  } while (0)

#define CHECK_EQ_INT(a, b)                                                        \
  do {                                                                            \
    long long checkA_ = (long long)(a), checkB_ = (long long)(b);                 \
    ++checkCount;                                                                 \
    if (checkA_ != checkB_) {                                                     \
      ++checkFailures;                                                            \
      fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__, #a, #b, \
              checkA_, checkB_);                                                  \
    }                                                                             \
  } while (0)

/* Checks that `haystack` contains `needle`. */
#define CHECK_CONTAINS(haystack, needle)                                            \
  do {                                                                              \
    const char* checkH_ = (haystack);                                               \
    ++checkCount;                                                                   \
    if (checkH_ == NULL || strstr(checkH_, (needle)) == NULL) {                     \
      ++checkFailures;                                                              \
      fprintf(stderr, "%s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, __LINE__, \
              checkH_ ? checkH_ : "(null)", (needle));                              \
    }                                                                               \
  } while (0)

#define CHECK_EXIT()                                                              \
  (printf("%d checks, %d failed\n", checkCount, checkFailures), checkFailures ? 1 : 0)

#endif /* PURLIN_TESTS_UNIT_CHECK_H_ */
