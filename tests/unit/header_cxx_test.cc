// header_cxx_test.cc -- purlin.h builds as strict C++11 and links against the
// C library through its extern "C" block.
#include "runtime/purlin.h"

#include <cstdio>
#include <cstring>

int main() {
  purlinConfig_t config = PURLIN_CONFIG_INITIALIZER;
  const char* name = purlinGetErrorName(purlinInvalidUsage);
  bool ok = config.size == sizeof(purlinConfig_t) && std::strcmp(name, "purlinInvalidUsage") == 0;
  std::printf("purlin.h as C++11: %s\n", ok ? "ok" : "MISMATCH");
  return ok ? 0 : 1;
}
