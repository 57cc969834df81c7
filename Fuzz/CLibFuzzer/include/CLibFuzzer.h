#ifndef CLIBFUZZER_H
#define CLIBFUZZER_H
#include <stddef.h>
#include <stdint.h>

/// libFuzzer's driver, for a program that keeps its own `main` (libclang_rt.fuzzer_no_main):
/// parses libFuzzer's flags from argc/argv and runs `callback` on every input. Only the fuzzing
/// build of offline-store-fuzz (scripts/fuzz.sh) links the library that defines it.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
