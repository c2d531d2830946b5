// libFuzzer driver shared by every target: fuzz/CMakeLists.txt builds it once per header in
// fuzz/targets/, defining QEVICT_FUZZ_TARGET_HEADER and QEVICT_FUZZ_TARGET_NAME.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_target.h"
#include QEVICT_FUZZ_TARGET_HEADER

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const qevict::fuzz::FuzzFunction entry =
      qevict::fuzz::FuzzTargets().at(QEVICT_FUZZ_TARGET_NAME);
  return entry(data, size);
}
