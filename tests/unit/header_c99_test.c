/*
 * header_c99_test.c -- purlin.h builds as strict C99 (-std=c99 -pedantic
 * -Werror, see BUILD) and its initializer and X-macro are usable from C99.
 */
#include "runtime/purlin.h"

#include <stdio.h>

static const char* const names[] = {
#define NAME_(name, value, message) #name,
    PURLIN_RESULT_MAP(NAME_)
#undef NAME_
};

int main(void) {
  purlinConfig_t config = PURLIN_CONFIG_INITIALIZER;
  purlinComm_t comm = NULL;
  int ok = config.size == sizeof(purlinConfig_t) && config.magic == PURLIN_CONFIG_MAGIC &&
           sizeof names / sizeof names[0] == (size_t)purlinNumResults && comm == NULL &&
           PURLIN_VERSION_CODE == 200;
  printf("purlin.h as C99: %s\n", ok ? "ok" : "MISMATCH");
  return ok ? 0 : 1;
}
