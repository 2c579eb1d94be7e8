// Standalone driver for the native library's self-test, for machines (or emulators) without Python/JAX:
//   hemx-selftest LIB [ISA]
// loads LIB, prints the instruction set it picked and the self-test's line, and exits 0 when the self-test passed
// (and, with ISA given, when the library picked exactly that one; ISA "none" just reports).
#include <dlfcn.h>

#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s LIB [EXPECTED_ISA]\n", argv[0]);
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "dlopen failed: %s\n", dlerror());
    return 3;
  }
  auto isa = (const char* (*)())dlsym(lib, "hemx_native_isa");
  auto built = (const char* (*)())dlsym(lib, "hemx_native_built_isas");
  auto selftest = (int (*)(char*, size_t))dlsym(lib, "hemx_native_selftest");
  if (!isa || !built || !selftest) {
    std::fprintf(stderr, "missing entry points in %s\n", argv[1]);
    return 3;
  }
  char line[512];
  const int passed = selftest(line, sizeof line);
  std::printf("isa: %s\nbuilt: %s\nselftest: %s\n", isa(), built(), line);
  if (passed <= 0) return 1;
  if (argc > 2 && std::strcmp(argv[2], "none") != 0 && std::strcmp(argv[2], isa()) != 0) {
    std::fprintf(stderr, "expected instruction set %s, the library picked %s\n", argv[2], isa());
    return 4;
  }
  return 0;
}
