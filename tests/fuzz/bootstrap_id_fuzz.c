/*
 * bootstrap_id_fuzz.c -- purlinBootstrapIdCheck on arbitrary 128-byte ids
 * (half of them a valid id with a few bytes changed) and
 * purlinBootstrapIdFromKey on arbitrary keys: an id is accepted exactly
 * when its format word, name length and magic are valid; a refused one is
 * refused with a message and cannot open a session; every derived id is
 * accepted, deterministic, and its name is printable and as long as it
 * says.
 */
#include <stdint.h>
#include <string.h>

#include "runtime/bootstrap.h"
#include "runtime/errors.h"
#include "tests/fuzz/fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  purlinBootstrapId_t id;
  if (size > 0 && data[0] % 2) {
    purlinBootstrapIdFromKey("fuzz", &id);
    for (size_t i = 1; i + 1 < size; i += 2) ((unsigned char*)&id)[data[i] % sizeof id] = data[i + 1];
  } else {
    memset(&id, 0, sizeof id);
    memcpy(&id, data, size < sizeof id ? size : sizeof id);
  }
  const int valid = id.format == PURLIN_BOOTSTRAP_ID_FORMAT && id.nameBytes >= 1 &&
                    id.nameBytes <= PURLIN_BOOTSTRAP_NAME_MAX && id.magic != 0;
  purlinClearThreadError();
  purlinResult_t r = purlinBootstrapIdCheck(&id);
  FUZZ_ASSERT(r == (valid ? purlinSuccess : purlinInvalidArgument));
  FUZZ_ASSERT(valid == (purlinThreadLastError()[0] == '\0'));
  /* One rank opens no socket, so any id the check accepts opens. */
  purlinBootstrap_t* b = (purlinBootstrap_t*)&id;
  FUZZ_ASSERT(purlinBootstrapOpen(&b, &id, 0, 1, 100) == r);
  FUZZ_ASSERT((b != NULL) == valid);
  purlinBootstrapClose(b);

  /* The input as a key, up to its first NUL. */
  char key[512];
  size_t n = size < sizeof key - 1 ? size : sizeof key - 1;
  memcpy(key, data, n);
  key[n] = '\0';
  purlinBootstrapId_t a, c;
  memset(&a, 0x5A, sizeof a);
  memset(&c, 0xA5, sizeof c);
  purlinBootstrapIdFromKey(key, &a);
  purlinBootstrapIdFromKey(key, &c);
  FUZZ_ASSERT(memcmp(&a, &c, sizeof a) == 0);
  FUZZ_ASSERT(purlinBootstrapIdCheck(&a) == purlinSuccess);
  const char* end = memchr(a.name, '\0', sizeof a.name);
  FUZZ_ASSERT(end != NULL && (size_t)(end - a.name) == a.nameBytes);
  for (uint32_t i = 0; i < a.nameBytes; ++i) FUZZ_ASSERT(a.name[i] > ' ' && a.name[i] < 127);
  return 0;
}
