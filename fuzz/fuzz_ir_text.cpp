//===- fuzz/fuzz_ir_text.cpp - libFuzzer target: the text reader + verifier ------===//
//
// Input: arbitrary bytes read as a program in the text form. Must give a program that
// round-trips or a tessel::Error; any other outcome aborts (see FuzzCommon.h).
//
//===----------------------------------------------------------------------===//
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "fuzz/FuzzCommon.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string problem =
      tessel::fuzz::checkText(std::string(reinterpret_cast<const char *>(data), size));
  if (!problem.empty()) {
    std::fprintf(stderr, "tessel fuzz (text): %s\n", problem.c_str());
    std::abort();
  }
  return 0;
}
