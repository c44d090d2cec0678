// Every input the fuzzers (fuzz/) ever broke is kept in fuzz/regressions/{text,json}/
// and must now satisfy the readers' contract (fuzz/FuzzCommon.h): a verified program
// that round-trips through text and JSON, or a tessel::Error. The fuzz targets replay
// these files first on every run; this test replays them in every build (no clang
// needed), so a regression is caught by the plain unit tests too.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <doctest/doctest.h>

#include "fuzz/FuzzCommon.h"

namespace fs = std::filesystem;

namespace {
std::vector<fs::path> filesIn(const fs::path &dir) {
  std::vector<fs::path> out;
  if (fs::is_directory(dir))
    for (const auto &e : fs::directory_iterator(dir))
      if (e.is_regular_file() && e.path().filename().string()[0] != '.') out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}
std::string slurp(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
} // namespace

TEST_CASE("reliability: every input the fuzzers broke now reads or fails cleanly") {
  fs::path root = fs::path(TESSEL_SOURCE_DIR) / "fuzz" / "regressions";
  size_t n = 0;
  for (const fs::path &f : filesIn(root / "text")) {
    CAPTURE(f.string());
    CHECK(tessel::fuzz::checkText(slurp(f)) == "");
    ++n;
  }
  for (const fs::path &f : filesIn(root / "json")) {
    CAPTURE(f.string());
    CHECK(tessel::fuzz::checkJson(slurp(f)) == "");
    ++n;
  }
  MESSAGE(n << " fuzz regression inputs replayed");
}

TEST_CASE("reliability: the fuzz oracle accepts golden programs and rejects nothing valid") {
  // The oracle itself must not flag correct behaviour: a golden program round-trips,
  // garbage is a tessel::Error.
  fs::path golden = fs::path(TESSEL_SOURCE_DIR) / "tests" / "lit" / "ir" / "every-op.tir";
  std::string text = slurp(golden);
  REQUIRE(!text.empty());
  CHECK(tessel::fuzz::checkText(text) == "");
  CHECK(tessel::fuzz::checkJson(tessel::ir::programToJson(tessel::ir::parseProgram(text))) == "");
  CHECK(tessel::fuzz::checkText("program @f(%x: f64[2]) {") == "");
  CHECK(tessel::fuzz::checkJson("{\"version\": 1") == "");
}
