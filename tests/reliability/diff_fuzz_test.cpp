// The differential fuzzer (fuzz/README.md) in the unit tests: every case it ever
// failed (fuzz/regressions/diff/) passes now, unless marked known-failure; a short run
// over fixed seeds finds nothing; its random programs cover every op kind and its
// random pipelines every pass and every choice of every option. The long run
// (tessel_difffuzz --seconds 60) belongs to scripts/fuzz.sh.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <doctest/doctest.h>

#include "fuzz/diff/CaseFile.h"
#include "fuzz/diff/DiffFuzz.h"
#include "ir/Printer.h"
#include "passes/PassManager.h"

namespace fs = std::filesystem;
using namespace tessel;
using namespace tessel::difffuzz;

namespace {

std::string slurp(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string describe(const CheckResult &r) {
  std::string s;
  for (const Failure &f : r.failures) s += f.oracle + ": " + f.message + "\n";
  return s;
}

} // namespace

TEST_CASE("reliability: every case the differential fuzzer failed passes now") {
  fs::path dir = fs::path(TESSEL_SOURCE_DIR) / "fuzz" / "regressions" / "diff";
  std::vector<fs::path> files;
  for (const auto &e : fs::directory_iterator(dir))
    if (e.path().extension() == ".tir") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  REQUIRE(!files.empty());
  Checker checker;
  for (const fs::path &f : files) {
    CAPTURE(f.string());
    CaseFile cf = parseCaseFile(slurp(f), f.string());
    CheckResult r = checker.check(cf.c);
    if (!cf.knownFailure.empty()) {
      // Reported, not failed: the team knows (fuzz/README.md lists these).
      MESSAGE("known failure " << f.filename().string() << " (" << cf.knownFailure << "): "
                               << (r.failures.empty() ? "passes now: drop the mark\n" : describe(r)));
      continue;
    }
    CHECK_MESSAGE(r.failures.empty(), describe(r));
  }
  MESSAGE(files.size() << " differential fuzzing cases replayed");
}

TEST_CASE("reliability: a case file reads back to the same case") {
  Case c = generateCase(17, 12);
  CaseFile f{c, kEngineVsReference, "a message", "a cause", ""};
  std::string text = formatCaseFile(f);
  CaseFile g = parseCaseFile(text, "case.tir");
  CHECK(g.c.seed == c.seed);
  CHECK(g.c.pipeline == c.pipeline);
  CHECK(g.c.fd == c.fd);
  CHECK(g.oracle == kEngineVsReference);
  CHECK(g.cause == "a cause");
  CHECK(ir::printProgram(g.c.program) == ir::printProgram(c.program));
  REQUIRE(g.c.inputs.size() == c.inputs.size());
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    CHECK(g.c.inputs[i].type == c.inputs[i].type);
    CHECK(g.c.inputs[i].data == c.inputs[i].data);
  }
  CHECK(formatCaseFile(g) == text);
  CHECK_THROWS_AS(parseCaseFile("program @f() {\n}\n", "empty.tir"), Error);
}

TEST_CASE("reliability: a short differential fuzzing run finds nothing and covers the compiler") {
  // Seeds 1..N (the same every run). Coverage: op kinds of the generated programs;
  // passes and option values of the pipelines (enum options: every allowed value).
  const uint64_t kPrograms = 400;
  Checker checker;
  std::set<std::string> ops, passesSeen, optionValues, wanted;
  size_t fdChecked = 0, grads = 0;
  for (const passes::PassInfo &info : passes::passRegistry()) {
    wanted.insert(info.name);
    for (const passes::PassOptionInfo &o : info.options)
      for (const std::string &v : o.allowed)
        if (o.kind == passes::PassOptionInfo::Kind::Enum) wanted.insert(info.name + "." + o.name + "=" + v);
  }
  for (uint64_t seed = 1; seed <= kPrograms; ++seed) {
    Case c = generateCase(seed, 24);
    CHECK(ir::printProgram(generateCase(seed, 24).program) == ir::printProgram(c.program));
    for (const ir::Op &op : c.program.ops) ops.insert(ir::opName(op.kind));
    for (const passes::PassInvocation &inv : passes::Pipeline::parse(c.pipeline).passes) {
      passesSeen.insert(inv.name());
      grads += inv.name() == "grad";
      for (const passes::PassOptionInfo &o : inv.info().options)
        passesSeen.insert(inv.name() + "." + o.name + "=" + inv.get(o.name));
    }
    CheckResult r = checker.check(c);
    INFO("seed " << seed << ", pipeline '" << c.pipeline << "'\n" << ir::printProgram(c.program));
    CHECK_MESSAGE(r.failures.empty(), describe(r));
    fdChecked += r.fdChecked;
  }
  for (ir::OpKind k : ir::allOpKinds()) CHECK_MESSAGE(ops.count(ir::opName(k)), "no program has ", ir::opName(k));
  for (const std::string &w : wanted) CHECK_MESSAGE(passesSeen.count(w), "no pipeline has ", w);
  CHECK(grads > kPrograms / 10);
  CHECK(fdChecked > kPrograms / 20);
  MESSAGE(kPrograms << " programs, " << grads << " grads, " << fdChecked << " finite-difference checks");
}
