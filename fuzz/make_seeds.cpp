//===- fuzz/make_seeds.cpp - Seed corpora for the fuzz targets ------------------===//
//
// Usage: tessel_fuzz_seeds OUTDIR FILE...
// Copies every FILE (golden .tir / .json test files) to OUTDIR/text/ or OUTDIR/json/
// (by extension) and, for every .tir file that parses, also writes its JSON form to
// OUTDIR/json/ — the JSON reader's seeds are the golden programs in JSON form.
//
//===----------------------------------------------------------------------===//
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "ir/Diagnostics.h"
#include "ir/Json.h"
#include "ir/Parser.h"

namespace fs = std::filesystem;

static std::string slurp(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

static void spit(const fs::path &p, const std::string &s) {
  std::ofstream out(p, std::ios::binary);
  out << s;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUTDIR FILE...\n", argv[0]);
    return 1;
  }
  fs::path out = argv[1];
  fs::create_directories(out / "text");
  fs::create_directories(out / "json");
  int text = 0, json = 0;
  for (int i = 2; i < argc; ++i) {
    fs::path f = argv[i];
    std::string bytes = slurp(f);
    std::string stem = std::to_string(i) + "-" + f.stem().string();
    if (f.extension() == ".json") {
      spit(out / "json" / (stem + ".json"), bytes);
      ++json;
      continue;
    }
    spit(out / "text" / (stem + ".tir"), bytes);
    ++text;
    try {
      spit(out / "json" / (stem + ".json"), tessel::ir::programToJson(tessel::ir::parseProgram(bytes, f.string())));
      ++json;
    } catch (const tessel::Error &) {
      // An expected-error test file: a text seed only.
    }
  }
  std::printf("seeds: %d text, %d json in %s\n", text, json, out.c_str());
  return 0;
}
