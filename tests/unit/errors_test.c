/*
 * errors_test.c -- result codes keep their numeric values, and every code has
 * a distinct name and a non-empty message; unknown codes are answered, not
 * crashed on.
 */
#include <string.h>

#include "runtime/purlin.h"
#include "tests/unit/check.h"

int main(void) {
  /* The values are ABI: a change breaks compiled callers. */
  CHECK_EQ_INT(purlinSuccess, 0);
  CHECK_EQ_INT(purlinUnhandledCudaError, 1);
  CHECK_EQ_INT(purlinSystemError, 2);
  CHECK_EQ_INT(purlinInternalError, 3);
  CHECK_EQ_INT(purlinInvalidArgument, 4);
  CHECK_EQ_INT(purlinInvalidUsage, 5);
  CHECK_EQ_INT(purlinRemoteError, 6);
  CHECK_EQ_INT(purlinInProgress, 7);
  CHECK_EQ_INT(purlinNoDevice, 8);
  CHECK_EQ_INT(purlinOutOfMemory, 9);
  CHECK_EQ_INT(purlinTimeout, 10);
  CHECK_EQ_INT(purlinAborted, 11);
  CHECK_EQ_INT(purlinNumResults, 12);

  static const struct {
    purlinResult_t code;
    const char* name;
  } expected[] = {
#define EXPECT_(name, value, message) {name, #name},
      PURLIN_RESULT_MAP(EXPECT_)
#undef EXPECT_
  };
  CHECK_EQ_INT(sizeof expected / sizeof expected[0], purlinNumResults);
  for (int i = 0; i < purlinNumResults; ++i) {
    const char* name = purlinGetErrorName((purlinResult_t)i);
    const char* msg = purlinGetErrorString((purlinResult_t)i);
    CHECK_EQ_INT(expected[i].code, i);
    CHECK(strcmp(name, expected[i].name) == 0);
    CHECK(msg != NULL && strlen(msg) > 3);
    CHECK(strcmp(msg, "unknown result code") != 0);
    for (int j = 0; j < i; ++j) {
      CHECK(strcmp(name, purlinGetErrorName((purlinResult_t)j)) != 0);
      CHECK(strcmp(msg, purlinGetErrorString((purlinResult_t)j)) != 0);
    }
  }
  CHECK(strcmp(purlinGetErrorString(purlinSuccess), "no error") == 0);
  CHECK(strcmp(purlinGetErrorString((purlinResult_t)purlinNumResults), "unknown result code") == 0);
  CHECK(strcmp(purlinGetErrorString((purlinResult_t)-1), "unknown result code") == 0);
  CHECK(strcmp(purlinGetErrorName((purlinResult_t)1000), "purlinUnknownResult") == 0);

  int version = -1;
  CHECK_EQ_INT(purlinGetVersion(&version), purlinSuccess);
  CHECK_EQ_INT(version, PURLIN_VERSION_CODE);
  CHECK_EQ_INT(purlinGetVersion(NULL), purlinInvalidArgument);
  CHECK_CONTAINS(purlinGetLastError(NULL), "version is NULL");
  CHECK_CONTAINS(purlinGetLastError(NULL), "purlinInvalidArgument");
  CHECK_CONTAINS(purlinGetLastError(NULL), "runtime/config.c:");
  /* A successful call clears the thread's last error. */
  CHECK_EQ_INT(purlinGetVersion(&version), purlinSuccess);
  CHECK(strcmp(purlinGetLastError(NULL), "") == 0);
  return CHECK_EXIT();
}
