// Pass manager: registry, pipeline strings (parse / canonical print / round trip,
// errors), typed options, instrumentation (verify-each, print-ir, dump-dir, bisect,
// disable-pass, statistics, timing, crash reproducer) and the order of the hooks.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "ir/Builder.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/Checkpoint.h"
#include "passes/Fold.h"
#include "passes/Grad.h"
#include "passes/Instrumentation.h"
#include "passes/Order.h"
#include "passes/PassManager.h"
#include "passes/RunPipeline.h"

using namespace tessel;
using namespace tessel::passes;

namespace {

/// f(x, beta) = sum(exp(beta * x)); one scalar output.
ir::Program smallProgram() {
  ir::Program p;
  p.name = "small";
  ir::Builder b(p);
  ir::ValueId x = p.addInput("x", ir::Type({3}));
  ir::ValueId beta = p.addInput("beta", ir::Type({}));
  ir::ValueId bb = b.broadcastScalar(beta, {3});
  ir::ValueId e = b.unary(ir::OpKind::Exp, b.mul(x, bb));
  ir::ValueId l = b.reduceSum(e, {0});
  p.setName(l, "l");
  p.addOutput(l);
  return p;
}

std::string errorOf(const std::string &pipeline) {
  try {
    Pipeline::parse(pipeline);
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

std::string readAll(const std::filesystem::path &p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

} // namespace

TEST_CASE("pm: registry has the passes with options and one-line help") {
  const PassInfo *g = lookupPass("grad");
  REQUIRE(g != nullptr);
  CHECK(g->findOption("wrt") == 0);
  CHECK(g->findOption("vjp") == 1);
  CHECK(g->findOption("keep-outputs") == 2);
  const PassInfo *c = lookupPass("checkpoint");
  REQUIRE(c != nullptr);
  CHECK(c->options[c->findOption("policy")].defaultValue == "recompute");
  CHECK(lookupPass("nonexistent") == nullptr);
  for (const PassInfo &p : passRegistry()) {
    CAPTURE(p.name);
    CHECK(!p.summary.empty());
    CHECK(p.summary.find('\n') == std::string::npos);
    CHECK(p.run != nullptr);
    for (const PassOptionInfo &o : p.options) {
      CAPTURE(o.name);
      CHECK(!o.help.empty());
      // Every default is itself a valid, canonical value.
      PassInvocation inv(p);
      inv.set(o.name, o.defaultValue);
      CHECK(inv.get(o.name) == o.defaultValue);
    }
  }
  std::string list = describePasses();
  for (const PassInfo &p : passRegistry()) CHECK(list.find("  " + p.name + " ") != std::string::npos);
  CHECK(list.find("policy=store|recompute|save-svd  (default: recompute)") != std::string::npos);
}

TEST_CASE("pm: pipeline strings print canonically and round trip") {
  Pipeline p = Pipeline::parse("grad{wrt=beta},checkpoint{policy=save-svd}");
  REQUIRE(p.passes.size() == 2);
  CHECK(p.str() == "grad{wrt=beta,vjp=false,keep-outputs=true,svd-blocks=true,bond-gauge=false,remat=recompute,svd-topk-guards=false,aux=},"
                   "checkpoint{policy=save-svd,regions=auto}");
  CHECK(p.passes[0].options<GradOptions>().wrt == std::vector<std::string>{"beta"});
  CHECK(p.passes[1].get("policy") == "save-svd");

  // Spacing, list items and integers are canonicalised; booleans are true or false only,
  // as --list-passes says.
  Pipeline q = Pipeline::parse(
      " grad { wrt = a ; b , vjp = true , keep-outputs=false } , checkpoint{regions=007} ");
  for (const char *b : {"1", "0", "yes", "no", "on", "off", "True"})
    CHECK_THROWS_WITH_AS(Pipeline::parse(std::string("grad{vjp=") + b + "}"),
                         doctest::Contains("(allowed: true, false)"), Error);
  CHECK(q.str() == "grad{wrt=a;b,vjp=true,keep-outputs=false,svd-blocks=true,bond-gauge=false,remat=recompute,svd-topk-guards=false,aux=},"
                   "checkpoint{policy=recompute,regions=7}");
  CHECK(q.passes[0].options<GradOptions>().wrt == std::vector<std::string>{"a", "b"});
  CHECK(q.passes[0].options<GradOptions>().vjp);
  CHECK_FALSE(q.passes[0].options<GradOptions>().keepOutputs);
  CHECK(q.passes[1].options<CheckpointOptions>().regions == 7);

  for (const char *s : {"", "grad", "grad{}", "checkpoint,checkpoint{policy=store}",
                        "grad{wrt=a;b;c,vjp=true},checkpoint{policy=recompute,regions=3},grad",
                        "checkpoint{regions=auto}"}) {
    CAPTURE(s);
    Pipeline a = Pipeline::parse(s);
    Pipeline b = Pipeline::parse(a.str());
    CHECK(a == b);
    CHECK(b.str() == a.str());
  }
  CHECK(Pipeline::parse("").empty());
  CHECK(Pipeline::parse("grad") != Pipeline::parse("grad{vjp=true}"));
  CHECK(Pipeline::parse("grad{}") == Pipeline::parse("grad"));
}

TEST_CASE("pm: named pipelines stand for their passes; no name is both a pass and a pipeline") {
  REQUIRE(pipelineRegistry().size() == 3);
  for (const NamedPipeline &np : pipelineRegistry()) {
    CAPTURE(np.name);
    CHECK(lookupPass(np.name) == nullptr);
    CHECK(lookupPipeline(np.name) == &np);
    CHECK(!np.summary.empty());
    // The name parses to exactly the passes of its text, alone and inside a pipeline.
    const Pipeline expanded = Pipeline::parse(np.text);
    CHECK(Pipeline::parse(np.name) == expanded);
    const Pipeline inside = Pipeline::parse("dce," + np.name + ",cse");
    REQUIRE(inside.passes.size() == expanded.passes.size() + 2);
    CHECK(inside.passes.front().name() == "dce");
    CHECK(inside.passes.back().name() == "cse");
    for (size_t i = 0; i < expanded.passes.size(); ++i) CHECK(inside.passes[i + 1] == expanded.passes[i]);
  }
  // run-default is what tessel run / prepare apply when --passes is not given.
  CHECK(Pipeline::parse("run-default") == Pipeline::parse(kRunPipeline));
  CHECK(Pipeline::parse("run-default").str() == "fold{max-broadcast-constant=256},cse,dce");
  CHECK(Pipeline::parse("trg").str() ==
        "truncate-svd{max-k-percent=50,min-size=32},svd-transpose-fold,svd-topk-guards,"
        "order{strategy=pairwise},pad-sink,cse,dce");
  CHECK_THROWS_WITH(Pipeline::parse("run-default{x=1}"),
                    doctest::Contains("the named pipeline 'run-default' takes no options"));
  CHECK(describePasses().find("  trg-full-svd  what `tessel trg --svd full`") != std::string::npos);
}

TEST_CASE("pm: fixpoint(...) runs its passes in rounds until none changes the program") {
  // Round 1: cse finds nothing (exp of two different values), fold turns both into exp(a);
  // round 2: cse merges them; round 3 changes nothing. A single cse,fold leaves two exps.
  const char *text = R"(program @fx(%x: f64[4]) {
  %one = constant {value = dense<1> : f64[]} : f64[]
  %zero = constant {value = dense<0> : f64[]} : f64[]
  %o = broadcast_in_dim %one {shape = [4], dims = []} : f64[4]
  %z = broadcast_in_dim %zero {shape = [4], dims = []} : f64[4]
  %a = sin %x : f64[4]
  %d = mul %a, %o : f64[4]
  %e = add %a, %z : f64[4]
  %p = exp %d : f64[4]
  %q = exp %e : f64[4]
  %r = add %p, %q : f64[4]
  return %r
}
)";
  auto countExp = [](const ir::Program &p) {
    return std::count_if(p.ops.begin(), p.ops.end(), [](const ir::Op &op) { return op.kind == ir::OpKind::Exp; });
  };
  const Pipeline pl = Pipeline::parse("fixpoint(cse,fold),dce");
  REQUIRE(pl.passes.size() == 3);
  REQUIRE(pl.fixpoints.size() == 1);
  CHECK(pl.fixpoints[0].begin == 0);
  CHECK(pl.fixpoints[0].end == 2);
  CHECK(pl.str() == "fixpoint(cse,fold{max-broadcast-constant=256}),dce");
  CHECK(Pipeline::parse(pl.str()) == pl);
  CHECK(Pipeline::parse("cse,fold,dce") != pl);
  CHECK(Pipeline::parse(" fixpoint ( cse , fold ) , dce ") == pl);
  CHECK(Pipeline::parse("fixpoint(run-default)").str() == "fixpoint(fold{max-broadcast-constant=256},cse,dce)");

  ir::Program once = ir::parseProgram(text);
  PassManager(Pipeline::parse("cse,fold,dce")).run(once);
  CHECK(countExp(once) == 2);

  ir::Program p = ir::parseProgram(text);
  const PassRunReport rep = PassManager(pl).run(p);
  CHECK(countExp(p) == 1);
  // Rounds 1-3 of cse and fold, then dce once.
  REQUIRE(rep.passes.size() == 7);
  const int rounds[] = {1, 1, 2, 2, 3, 3, 0};
  const bool changed[] = {false, true, true, false, false, false, false};
  for (size_t i = 0; i < 7; ++i) {
    CAPTURE(i);
    CHECK(rep.passes[i].round == rounds[i]);
    CHECK(rep.passes[i].changed == changed[i]);
    CHECK(rep.passes[i].index == (i < 6 ? static_cast<int>(i % 2) + 1 : 3));
  }
  CHECK(rep.timingText().find("cse (1, round 2)") != std::string::npos);

  // without() keeps the groups of what remains.
  CHECK(pl.without("fold").str() == "fixpoint(cse),dce");
  CHECK(Pipeline::parse("fixpoint(fold),dce").without("fold").str() == "dce");

  CHECK_THROWS_WITH(Pipeline::parse("fixpoint(cse,fixpoint(dce))"), doctest::Contains("fixpoint groups do not nest"));
  CHECK_THROWS_WITH(Pipeline::parse("fixpoint(cse"), doctest::Contains("expected ')' to close the fixpoint("));
  CHECK_THROWS_WITH(Pipeline::parse("fixpoint()"), doctest::Contains("expected a pass name in fixpoint(...)"));
  // A group built by hand with no passes is no group: printed and run as its passes alone.
  Pipeline hand;
  hand.passes.push_back(PassInvocation(*lookupPass("cse")));
  hand.fixpoints.push_back({0, 0});
  CHECK(hand.str() == "cse");
  ir::Program small = smallProgram();
  CHECK(PassManager(hand).run(small).passes.size() == 1);
  // The window of a long pipeline's error never cuts a UTF-8 character, and the caret
  // counts characters.
  std::string utf = "fold{max-broadcast-constant=";
  for (int i = 0; i < 80; ++i) utf += "\xc3\xa9"; // é
  utf += "a{";                                       // a syntax error 161 bytes later
  try {
    Pipeline::parse(utf);
    FAIL("no error");
  } catch (const Error &e) {
    const std::string msg = e.what();
    for (size_t i = 0; i < msg.size();) { // well-formed UTF-8: every lead byte has its continuations
      const auto c = static_cast<unsigned char>(msg[i]);
      const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
      REQUIRE(n > 0);
      for (size_t k = 1; k < n; ++k) REQUIRE((static_cast<unsigned char>(msg[i + k]) & 0xC0) == 0x80);
      i += n;
    }
    // The window starts inside the run of é (60 bytes back from the column: 29.5 of
    // them, moved to 30) and the caret stands under the '{': 3 + 30 + 1 characters in.
    CHECK(msg.find("unexpected '{' in an option value at column 190") != std::string::npos);
    CHECK(msg.find("\n  " + std::string(34, ' ') + "^") != std::string::npos);
  }
  // A pass that adds to the program every run never reaches a fixed point.
  for (const char *grows : {"grad", "jvp", "hessian", "checkpoint", "split-vjp"}) {
    CAPTURE(grows);
    CHECK(!lookupPass(grows)->reachesFixpoint);
    CHECK_THROWS_WITH(Pipeline::parse(std::string("fixpoint(cse,") + grows + ")"),
                      doctest::Contains(doctest::String(("fixpoint(...) cannot hold '" + std::string(grows) + "'").c_str())));
  }
  CHECK(lookupPass("cse")->reachesFixpoint);
  // The error of a long pipeline quotes a window of it around the column: a few short lines.
  std::string longText = "fixpoint(cse";
  for (int i = 0; i < 3000; ++i) longText += ",cse";
  try {
    Pipeline::parse(longText);
    FAIL("no error");
  } catch (const Error &e) {
    const std::string msg = e.what();
    CHECK(msg.find("expected ')' to close the fixpoint( at column 12013") != std::string::npos);
    CHECK(msg.size() < 400);
    CHECK(msg.find("\n  ...,cse,cse") != std::string::npos);
  }
}

TEST_CASE("pm: bad pipeline strings name the pass and option and list the allowed ones") {
  std::string e = errorOf("grad,csee");
  CHECK(e.find("unknown pass 'csee'") != std::string::npos);
  CHECK(e.find("known passes: grad, jvp, hessian, checkpoint") != std::string::npos);

  e = errorOf("checkpoint{strategy=x}");
  CHECK(e.find("pass 'checkpoint' has no option 'strategy' (options: policy, regions)") !=
        std::string::npos);

  e = errorOf("checkpoint{policy=fast}");
  CHECK(e.find("pass 'checkpoint', option 'policy': invalid value 'fast' "
               "(allowed: store, recompute, save-svd)") != std::string::npos);

  e = errorOf("grad{vjp=maybe}");
  CHECK(e.find("option 'vjp': invalid value 'maybe' (allowed: true, false)") !=
        std::string::npos);

  e = errorOf("checkpoint{regions=0}");
  CHECK(e.find("expected 'auto' or an integer >= 1") != std::string::npos);

  e = errorOf("grad{wrt=a;;b}");
  CHECK(e.find("empty item") != std::string::npos);

  e = errorOf("grad{wrt=beta");
  CHECK(e.find("expected '}'") != std::string::npos);
  CHECK(e.find("column 14") != std::string::npos);
  CHECK(e.find("\n  grad{wrt=beta\n               ^") != std::string::npos);

  CHECK(errorOf("grad,").find("expected a pass name after ','") != std::string::npos);
  CHECK(errorOf("grad checkpoint").find("expected ',' between passes") != std::string::npos);
  CHECK(errorOf("grad{vjp}").find("expected '=' after option 'vjp'") != std::string::npos);
  CHECK(errorOf("grad{vjp=true,vjp=false}").find("option 'vjp' given twice") !=
        std::string::npos);
  CHECK(errorOf("{").find("expected a pass name") != std::string::npos);
}

TEST_CASE("pm: run records every pass; print-ir, after-change, disable, statistics") {
  ir::Program p = smallProgram();
  std::ostringstream log;
  PassManagerOptions o;
  o.log = &log;
  o.printIrBefore = {"checkpoint"};
  o.printIrAfterChange = true;
  o.statistics = true;
  o.disabledPasses = {};
  PassManager pm(Pipeline::parse("grad{wrt=beta},checkpoint{policy=store},"
                                 "checkpoint{policy=recompute,regions=1}"),
                 o);
  PassRunReport r = pm.run(p);
  REQUIRE(r.passes.size() == 3);
  CHECK(r.passes[0].changed);
  CHECK(r.passes[0].opsBefore == 4);
  CHECK(r.passes[0].opsAfter > 4);
  CHECK_FALSE(r.passes[1].changed); // store never changes the program
  CHECK(r.passes[2].changed);
  CHECK(r.passes[2].stats.counters.at("recomputed-ops") > 0);
  CHECK(r.passes[2].opsAfter == r.passes[2].opsBefore + r.passes[2].stats.counters.at("recomputed-ops"));
  std::string s = log.str();
  CHECK(s.find("// -----// IR Dump At Start //----- //\nprogram @small(") != std::string::npos);
  CHECK(s.find("// -----// IR Dump After grad (1) //----- //") != std::string::npos);
  CHECK(s.find("// -----// IR Dump Before checkpoint (2) //----- //") != std::string::npos);
  CHECK(s.find("// -----// IR Dump After checkpoint (2) omitted: no change //----- //") !=
        std::string::npos);
  CHECK(s.find("// -----// IR Dump After checkpoint (3) //----- //") != std::string::npos);
  CHECK(s.find("Pass statistics report") != std::string::npos);
  CHECK(s.find("(2) checkpoint{policy=store,regions=auto}: ops ") != std::string::npos);
  // The final program still verifies and has grad_beta.
  CHECK(p.outputName(1) == "grad_beta");

  // Disabling a pass skips it everywhere it appears.
  ir::Program q = smallProgram();
  PassManagerOptions o2;
  std::ostringstream log2;
  o2.log = &log2;
  o2.disabledPasses = {"checkpoint"};
  PassRunReport r2 = PassManager(Pipeline::parse("grad,checkpoint,checkpoint"), o2).run(q);
  CHECK(r2.passes[0].status == PassRecord::Status::Ran);
  CHECK(r2.passes[1].status == PassRecord::Status::Disabled);
  CHECK(r2.passes[2].status == PassRecord::Status::Disabled);
  CHECK(log2.str().empty());

  CHECK_THROWS_WITH_AS(PassManager(Pipeline{}, [] {
                         PassManagerOptions x;
                         x.disabledPasses = {"nope"};
                         return x;
                       }()),
                       doctest::Contains("--disable-pass: unknown pass 'nope'"), Error);
  CHECK_THROWS_AS(PassManager(Pipeline{}, [] {
                    PassManagerOptions x;
                    x.printIrAfter = {"grad", "cse2"};
                    return x;
                  }()),
                  Error);
}

TEST_CASE("pm: bisect limit runs only the first N executions and logs each one") {
  ir::Program p = smallProgram();
  ir::Program orig = p;
  std::ostringstream log;
  PassManagerOptions o;
  o.log = &log;
  o.bisectLimit = 1;
  PassRunReport r =
      PassManager(Pipeline::parse("grad{wrt=beta},checkpoint{regions=1}"), o).run(p);
  CHECK(r.passes[0].status == PassRecord::Status::Ran);
  CHECK(r.passes[1].status == PassRecord::Status::Bisected);
  CHECK(log.str() ==
        "BISECT: running pass (1) grad{wrt=beta,vjp=false,keep-outputs=true,svd-blocks=true,bond-gauge=false,remat=recompute,svd-topk-guards=false,aux=} on program @small\n"
        "BISECT: NOT running pass (2) checkpoint{policy=recompute,regions=1} on program @small\n");
  // Limit 0 runs nothing.
  ir::Program q = orig;
  std::ostringstream log0;
  o.log = &log0;
  o.bisectLimit = 0;
  PassManager(Pipeline::parse("grad"), o).run(q);
  CHECK(ir::printProgram(q) == ir::printProgram(orig));
  CHECK(log0.str().find("BISECT: NOT running pass (1) grad") == 0);
  o.bisectLimit = -2;
  CHECK_THROWS_AS(PassManager(Pipeline{}, o), Error);
}

TEST_CASE("pm: a pipeline run as required passes ignores --disable-pass and the bisect limit, "
          "and shares the bisect count and the dump numbering with the manager's own") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / "tessel_pm_required_test";
  fs::remove_all(dir);
  ir::Program p = smallProgram();
  ir::Program expected = grad(p, [] { GradOptions o; o.wrt = {"beta"}; return o; }());
  std::ostringstream log;
  PassManagerOptions o;
  o.log = &log;
  o.disabledPasses = {"grad"};
  o.bisectLimit = 1;
  o.dumpDir = dir.string();
  o.dumpDirPerProgram = true;
  PassManager pm(Pipeline::parse("cse,dce"), o);
  PassRunReport r = pm.run(p, Pipeline::parse("grad{wrt=beta}"), PassRequirement::Required);
  REQUIRE(r.passes.size() == 1);
  CHECK(r.passes[0].status == PassRecord::Status::Ran);
  CHECK(r.passes[0].required);
  CHECK(ir::printProgram(p) == ir::printProgram(expected));
  // The manager's own pipeline: optional passes, counted from 1.
  pm.run(p);
  // Optional again when not asked: disabled.
  ir::Program q = smallProgram();
  PassRunReport r3 = pm.run(q, Pipeline::parse("grad{wrt=beta}"));
  CHECK(r3.passes[0].status == PassRecord::Status::Disabled);
  CHECK(log.str() ==
        "BISECT: running required pass grad{wrt=beta,vjp=false,keep-outputs=true,svd-blocks=true,bond-gauge=false,remat=recompute,svd-topk-guards=false,aux=} "
        "on program @small (not counted)\n"
        "BISECT: running pass (1) cse on program @small\n"
        "BISECT: NOT running pass (2) dce on program @small\n");
  CHECK(fs::exists(dir / "01-small" / "01-grad.tir"));
  CHECK(fs::exists(dir / "02-small" / "01-cse.tir"));
  CHECK(!fs::exists(dir / "02-small" / "02-dce.tir")); // skipped by the bisect limit
  CHECK(fs::exists(dir / "03-small" / "00-input.tir"));
  fs::remove_all(dir);
}

TEST_CASE("pm: dump-dir writes one parseable file per stage, numbered") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / "tessel_pm_dump_test";
  fs::remove_all(dir);
  ir::Program p = smallProgram();
  PassManagerOptions o;
  o.dumpDir = dir.string();
  o.disabledPasses = {"checkpoint"};
  std::ostringstream log;
  o.log = &log;
  PassManager(Pipeline::parse("grad{wrt=beta},checkpoint,checkpoint{policy=store}"), o).run(p);
  CHECK(fs::exists(dir / "00-input.tir"));
  CHECK(fs::exists(dir / "01-grad.tir"));
  CHECK_FALSE(fs::exists(dir / "02-checkpoint.tir")); // disabled: not run, no file
  CHECK_FALSE(fs::exists(dir / "03-checkpoint.tir"));
  o.disabledPasses = {};
  ir::Program p2 = smallProgram();
  PassManager(Pipeline::parse("grad{wrt=beta},checkpoint{regions=1},checkpoint{policy=store}"), o)
      .run(p2);
  CHECK(fs::exists(dir / "02-checkpoint.tir"));
  CHECK(fs::exists(dir / "03-checkpoint.tir"));
  p = p2;
  ir::Program in = ir::parseProgram(readAll(dir / "00-input.tir"));
  CHECK(ir::printProgram(in) == ir::printProgram(smallProgram()));
  std::string last = readAll(dir / "03-checkpoint.tir");
  CHECK(last.find("// tessel pass dump: after pass 3 of 3: checkpoint{policy=store") == 0);
  CHECK(ir::printProgram(ir::parseProgram(last)) == ir::printProgram(p));
  fs::remove_all(dir);
}

TEST_CASE("pm: a throwing pass writes a crash reproducer and names it") {
  namespace fs = std::filesystem;
  fs::path file = fs::temp_directory_path() / "tessel_pm_repro_test.tir";
  fs::remove(file);
  ir::Program p = smallProgram();
  PassManagerOptions o;
  o.crashReproducer = file.string();
  std::ostringstream log;
  o.log = &log;
  // checkpoint on a program without gradients is a user error.
  PassManager pm(Pipeline::parse("checkpoint{policy=save-svd}"), o);
  std::string msg;
  try {
    pm.run(p);
  } catch (const Error &e) {
    msg = e.what();
  }
  CHECK(msg.find("no grad(...) signature") != std::string::npos);
  CHECK(msg.find("note: while running pass 'checkpoint' (1 of 1)") != std::string::npos);
  CHECK(msg.find("crash reproducer (the program before the pass) written to '" + file.string() +
                 "'") != std::string::npos);
  REQUIRE(fs::exists(file));
  std::string text = readAll(file);
  CHECK(text.find("// pipeline: checkpoint{policy=save-svd,regions=auto}\n") != std::string::npos);
  CHECK(text.find("--passes='checkpoint{policy=save-svd,regions=auto}'") != std::string::npos);
  // The reproducer parses back to the pass's input.
  CHECK(ir::printProgram(ir::parseProgram(text)) == ir::printProgram(smallProgram()));
  fs::remove(file);

  // Without a reproducer the pass's error is rethrown with the note only.
  ir::Program q = smallProgram();
  PassManagerOptions o2;
  o2.log = &log;
  CHECK_THROWS_WITH_AS(PassManager(Pipeline::parse("checkpoint"), o2).run(q),
                       doctest::Contains("note: while running pass 'checkpoint'"), Error);
}

TEST_CASE("pm: verify-each checks the input and names the pass") {
  ir::Program p = smallProgram();
  p.outputs.push_back(12345); // undefined output: the input does not verify
  PassManagerOptions o;
  std::ostringstream log;
  o.log = &log;
  CHECK_THROWS_WITH_AS(PassManager(Pipeline::parse("grad"), o).run(p),
                       doctest::Contains("the input program does not verify"), Error);
}

TEST_CASE("pm: timing reports in text and JSON") {
  ir::Program p = smallProgram();
  PassManagerOptions o;
  std::ostringstream log;
  o.log = &log;
  o.timePasses = true;
  PassRunReport r = PassManager(Pipeline::parse("grad,checkpoint{regions=1}"), o).run(p);
  std::string s = log.str();
  CHECK(s.find("... Pass execution timing report (@" + p.name + ") ...") != std::string::npos);
  CHECK(s.find("  grad (1)\n") != std::string::npos);
  CHECK(s.find("  checkpoint (2)\n") != std::string::npos);
  CHECK(s.find("  verifier\n") != std::string::npos);
  CHECK(r.totalSeconds >= r.passes[0].seconds + r.passes[1].seconds);
  std::string j = r.timingJson();
  CHECK(j.find("\"name\": \"grad\"") != std::string::npos);
  CHECK(j.find("\"pass\": \"checkpoint{policy=recompute,regions=1}\"") != std::string::npos);
  CHECK(j.find("\"status\": \"ran\"") != std::string::npos);
}

namespace {

/// Test-only passes (not in the registry): one that breaks the IR, one that throws an
/// internal error.
const PassInfo &breakingPass() {
  static const PassInfo info{
      "test-break-ir", "makes an output refer to a value of the wrong type", {},
      [](ir::Program &p, const PassInvocation &, PassStatistics &) {
        // Declare a wrong result type for the last op.
        p.values[p.ops.back().results[0]].type = ir::Type({7, 7});
        return true;
      }};
  return info;
}

const PassInfo &throwingPass() {
  static const PassInfo info{"test-throw", "throws std::logic_error", {},
                             [](ir::Program &, const PassInvocation &, PassStatistics &) -> bool {
                               throw std::logic_error("broken invariant");
                             }};
  return info;
}

} // namespace

TEST_CASE("pm: verify-each names the pass that broke the program; off lets it through") {
  namespace fs = std::filesystem;
  Pipeline pl = Pipeline::parse("grad{wrt=beta}");
  pl.passes.push_back(PassInvocation(breakingPass()));
  pl.passes.push_back(PassInvocation(*lookupPass("dce")));
  std::ostringstream log;
  PassManagerOptions o;
  o.log = &log;
  fs::path file = fs::temp_directory_path() / "tessel_pm_verify_repro.tir";
  fs::remove(file);
  o.crashReproducer = file.string();
  ir::Program p = smallProgram();
  std::string msg;
  try {
    PassManager(pl, o).run(p);
  } catch (const VerifyError &e) {
    msg = e.what();
  }
  CHECK(msg.find("error: verifier failed after pass 'test-break-ir' (2 of 3): test-break-ir") !=
        std::string::npos);
  CHECK(msg.find("crash reproducer") != std::string::npos);
  REQUIRE(fs::exists(file));
  // The reproducer holds the (valid) input of the breaking pass: it parses.
  CHECK_NOTHROW(ir::parseProgram(readAll(file)));
  fs::remove(file);

  PassManagerOptions off;
  off.log = &log;
  off.verifyEach = false;
  ir::Program q = smallProgram();
  PassRunReport r = PassManager(pl, off).run(q);
  CHECK(r.passes.size() == 3);
  CHECK(r.passes[1].verifySeconds == 0);
}

namespace {

/// A test-only function pass that widens the output of every function named @f
/// (f64[2] -> f64[3]: its own ops still verify, its callers' calls no longer do) and
/// changes nothing else.
const PassInfo &widenFPass() {
  static const PassInfo info{
      "test-widen-f", "gives @f's output type f64[3]", {},
      [](ir::Program &p, const PassInvocation &, PassStatistics &) {
        if (p.name != "f") return false;
        ir::Builder b(p);
        p.outputs[0] = b.pad(p.outputs[0], {0}, {1});
        return true;
      }};
  return info;
}

const char *kTwoCallers = R"(program @f(%x: f64[2]) {
  %y = neg %x : f64[2]
  return %y
}

program @g(%x: f64[2]) {
  %y = abs %x : f64[2]
  return %y
}

program @h(%x: f64[2]) {
  %y = call @f(%x) : f64[2]
  return %y
}

entry program @main(%a: f64[2]) {
  %b = call @g(%a) : f64[2]
  return %b
}
)";

} // namespace

TEST_CASE("pm: after a function pass on a module, verify-each checks the functions it "
          "changed and their callers") {
  std::ostringstream log;
  PassManagerOptions o;
  o.log = &log;
  Pipeline pl;
  pl.passes.push_back(PassInvocation(widenFPass()));
  // @f changed (and verifies alone); its caller @h does not verify any more.
  ir::Program p = ir::parseProgram(kTwoCallers, "m.tir");
  std::string msg;
  try {
    PassManager(pl, o).run(p);
  } catch (const VerifyError &e) {
    msg = e.what();
  }
  CHECK(msg.find("verifier failed after pass 'test-widen-f'") != std::string::npos);
  CHECK(msg.find("function @h: ") != std::string::npos);
  CHECK(msg.find("function @f: ") == std::string::npos);

  // The record names the changed functions (index 0 = @f; the entry last).
  ir::Program q = ir::parseProgram(kTwoCallers, "m.tir");
  PassManagerOptions off = o;
  off.verifyEach = false;
  PassRunReport r = PassManager(pl, off).run(q);
  REQUIRE(r.passes.size() == 1);
  CHECK(r.passes[0].changed);
  CHECK(r.passes[0].changedFunctions == std::vector<char>{1, 0, 0, 0});

  // ir::verify of marked functions only: the broken @h is found when marked, not otherwise.
  CHECK_FALSE(ir::verify(q).empty());
  CHECK(ir::verify(q, {1, 1, 0, 1}).empty());
  CHECK(ir::verify(q, {0, 0, 1, 0}).size() == 1);
}

TEST_CASE("pm: an internal error in a pass becomes a tessel::Error naming the reproducer") {
  namespace fs = std::filesystem;
  Pipeline pl;
  pl.passes.push_back(PassInvocation(throwingPass()));
  std::ostringstream log;
  PassManagerOptions o;
  o.log = &log;
  ir::Program p = smallProgram();
  // Without a reproducer: stays an internal (non-tessel) error, with the note.
  bool internal = false;
  try {
    PassManager(pl, o).run(p);
  } catch (const Error &) {
  } catch (const std::exception &e) {
    internal = std::string(e.what()).find("note: while running pass 'test-throw'") !=
               std::string::npos;
  }
  CHECK(internal);
  fs::path file = fs::temp_directory_path() / "tessel_pm_throw_repro.tir";
  o.crashReproducer = file.string();
  CHECK_THROWS_WITH_AS(PassManager(pl, o).run(p),
                       doctest::Contains("internal error in pass 'test-throw' (1 of 1): "
                                         "broken invariant"),
                       Error);
  CHECK(fs::exists(file));
  fs::remove(file);
}

TEST_CASE("pm: every option of every pass parses into its struct and prints back") {
  using Kind = PassOptionInfo::Kind;
  for (const PassInfo &info : passRegistry()) {
    CAPTURE(info.name);
    const PassInvocation defaults(info);
    PassInvocation inv(info);
    for (const PassOptionInfo &o : info.options) {
      CAPTURE(o.name);
      // A value other than the default, of the option's kind.
      std::string value;
      switch (o.kind) {
      case Kind::Bool: value = o.defaultValue == "true" ? "false" : "true"; break;
      case Kind::Int: value = std::to_string(std::stoll(o.defaultValue) + 1); break;
      case Kind::Enum: value = o.allowed[0] == o.defaultValue ? o.allowed[1] : o.allowed[0]; break;
      case Kind::List: value = "a;b"; break;
      case Kind::String: value = "3"; break;
      }
      REQUIRE(value != o.defaultValue);
      inv.set(o.name, value);
      CHECK(inv.get(o.name) == value);
      CHECK(defaults.get(o.name) == o.defaultValue);
    }
    if (info.options.empty())
      CHECK(inv.str() == info.name);
    else
      CHECK(inv != defaults);
    Pipeline one;
    one.passes.push_back(inv);
    CHECK(Pipeline::parse(one.str()) == one);
    CHECK(Pipeline::parse(one.str()).str() == one.str());
  }
}

TEST_CASE("pm: options parse into the pass's struct; the defaults are the struct's") {
  const Pipeline grad = Pipeline::parse("grad");
  const GradOptions &g = grad.passes[0].options<GradOptions>();
  const GradOptions byStruct;
  CHECK(g.wrt == byStruct.wrt);
  CHECK(g.vjp == byStruct.vjp);
  CHECK(g.keepOutputs == byStruct.keepOutputs);
  CHECK(g.svdBlocks == byStruct.svdBlocks);

  Pipeline p = Pipeline::parse("checkpoint{policy=store,regions=auto},order{strategy=greedy},"
                               "fold{max-broadcast-constant=12},checkpoint{regions=4}");
  CHECK(p.passes[0].options<CheckpointOptions>().policy == RematPolicy::Store);
  CHECK(p.passes[0].options<CheckpointOptions>().regions == 0); // auto
  CHECK(p.passes[1].options<OrderOptions>().strategy == OrderStrategy::Greedy);
  CHECK(p.passes[2].options<FoldOptions>().maxBroadcastConstant == 12);
  CHECK(p.passes[3].options<CheckpointOptions>().regions == 4);
  CHECK(p.passes[3].options<CheckpointOptions>().numPrimalOutputs == -1); // not an option
  CHECK_THROWS_WITH_AS(p.passes[0].options<GradOptions>(),
                       doctest::Contains("internal: pass 'checkpoint' reads its options as"),
                       Error);
}

namespace {

/// Records every hook call as one line.
class RecordingInstrumentation : public PassInstrumentation {
public:
  std::vector<std::string> events;

  void runBeforePipeline(const ir::Program &p) override {
    events.push_back("before-pipeline @" + p.name);
  }
  bool shouldRun(PassRecord &pass, const ir::Program &) override {
    events.push_back("should-run " + pass.name);
    return true;
  }
  void runAfterPassSkipped(const PassRecord &pass, const ir::Program &) override {
    events.push_back("skipped " + pass.name + (pass.status == PassRecord::Status::Disabled
                                                   ? " (disabled)"
                                                   : " (bisected)"));
  }
  void runBeforePass(const PassRecord &pass, const ir::Program &) override {
    events.push_back("before " + pass.name);
  }
  void runAfterPass(PassRecord &pass, const ir::Program &) override {
    events.push_back("after " + pass.name + (pass.changed ? " changed" : " unchanged"));
  }
  void runAfterPassFailed(const PassRecord &pass, PassFailure &failure) override {
    events.push_back("failed " + pass.name);
    failure.notes += "\nnote: seen by the recording instrumentation";
  }
  void runAfterPipeline(const PassRunReport &report) override {
    events.push_back("after-pipeline " + std::to_string(report.passes.size()));
  }
};

} // namespace

TEST_CASE("pm: an added instrumentation sees every hook in pipeline order") {
  std::ostringstream log;
  PassManagerOptions o;
  o.log = &log;
  o.disabledPasses = {"cse"};
  o.bisectLimit = 2;
  PassManager pm(Pipeline::parse("grad{wrt=beta},cse,checkpoint{policy=store},dce"), o);
  auto rec = std::make_shared<RecordingInstrumentation>();
  pm.addInstrumentation(rec);
  ir::Program p = smallProgram();
  pm.run(p);
  // cse is disabled and dce is the third execution: the standard instrumentations say
  // no before the added one is asked.
  CHECK(rec->events == std::vector<std::string>{
                           "before-pipeline @small", "should-run grad", "before grad",
                           "after grad changed", "skipped cse (disabled)",
                           "should-run checkpoint", "before checkpoint",
                           "after checkpoint unchanged", "skipped dce (bisected)",
                           "after-pipeline 4"});

  // A failing pass: the failed hook runs instead of the after hook, and its note
  // reaches the error.
  Pipeline pl = Pipeline::parse("dce");
  pl.passes.push_back(PassInvocation(throwingPass()));
  PassManagerOptions quiet;
  quiet.log = &log;
  PassManager failing(pl, quiet);
  auto rec2 = std::make_shared<RecordingInstrumentation>();
  failing.addInstrumentation(rec2);
  ir::Program q = smallProgram();
  CHECK_THROWS_WITH_AS(failing.run(q),
                       doctest::Contains("broken invariant\nnote: while running pass "
                                         "'test-throw' (2 of 2): test-throw\nnote: seen by "
                                         "the recording instrumentation"),
                       std::runtime_error);
  CHECK(rec2->events == std::vector<std::string>{"before-pipeline @small", "should-run dce",
                                                 "before dce", "after dce unchanged",
                                                 "should-run test-throw", "before test-throw",
                                                 "failed test-throw"});
}
