//===- passes/PassManager.cpp - Registry look-ups, pipelines, the pass driver ---===//
#include "passes/PassManager.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "ir/Diagnostics.h"
#include "ir/TextUtil.h"
#include "llvm/ADT/StringExtras.h"
#include "passes/Instrumentation.h"

namespace tessel::passes {

namespace {

bool isBlank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string trim(llvm::StringRef s) { return s.trim(" \t\r\n").str(); }

} // namespace

//===----------------------------------------------------------------------===//
// Registry helpers
//===----------------------------------------------------------------------===//

int PassInfo::findOption(llvm::StringRef n) const {
  for (size_t i = 0; i < options.size(); ++i)
    if (options[i].name == n) return static_cast<int>(i);
  return -1;
}

const PassInfo *lookupPass(llvm::StringRef name) {
  for (const PassInfo &p : passRegistry())
    if (p.name == name) return &p;
  return nullptr;
}

std::string knownPassNames() {
  std::vector<std::string> names;
  for (const PassInfo &p : passRegistry()) names.push_back(p.name);
  return llvm::join(names, ", ");
}

std::string describePasses() {
  std::ostringstream os;
  os << "Available passes (--passes='name{option=value,...},name,...'; list values are\n"
        "separated by ';'):\n";
  size_t width = 0;
  for (const PassInfo &p : passRegistry()) width = std::max(width, p.name.size());
  for (const PassInfo &p : passRegistry()) {
    os << "  " << p.name << std::string(width - p.name.size() + 2, ' ') << p.summary << "\n";
    for (const PassOptionInfo &o : p.options) {
      os << "      " << o.name << "=" << o.valueSyntax() << "  (default: "
         << (o.defaultValue.empty() ? "\"\"" : o.defaultValue) << ")\n";
      os << "          " << o.help << "\n";
    }
    for (const PassInfo::RunsAfter &r : p.runsAfter)
      os << "      runs after " << r.pass << " in one pipeline: " << r.why << "\n";
  }
  os << "Named pipelines (a name stands for its passes: --passes='trg', 'run-default,order'):\n";
  width = 0;
  for (const NamedPipeline &p : pipelineRegistry()) width = std::max(width, p.name.size());
  for (const NamedPipeline &p : pipelineRegistry())
    os << "  " << p.name << std::string(width - p.name.size() + 2, ' ') << p.summary << "\n      = "
       << p.text << "\n";
  std::vector<std::string> growing;
  for (const PassInfo &p : passRegistry())
    if (!p.reachesFixpoint) growing.push_back(p.name);
  os << "fixpoint(a,b,...) runs its passes in rounds until a round changes nothing (at most "
     << kMaxFixpointRounds << "; not " << llvm::join(growing, ", ")
     << ", which add to the program every run): --passes='fixpoint(fold,cse),dce'\n";
  return os.str();
}

//===----------------------------------------------------------------------===//
// PassInvocation
//===----------------------------------------------------------------------===//

PassInvocation::PassInvocation(const PassInfo &info)
    : info_(&info), options_(info.defaultOptions) {}

namespace {

std::string optionNames(const PassInfo &info) {
  if (info.options.empty()) return "the pass has no options";
  std::vector<std::string> n;
  for (const PassOptionInfo &o : info.options) n.push_back(o.name);
  return "options: " + llvm::join(n, ", ");
}

} // namespace

void PassInvocation::set(llvm::StringRef option, llvm::StringRef value) {
  int i = info_->findOption(option);
  if (i < 0)
    throw Error("pass '" + info_->name + "' has no option '" + option.str() + "' (" +
                optionNames(*info_) + ")");
  const PassOptionInfo &o = info_->options[i];
  try {
    o.parse(options_, trim(value));
  } catch (const std::invalid_argument &e) {
    throw Error("pass '" + info_->name + "', option '" + o.name + "': invalid value '" +
                value.str() + "' (" + e.what() + ")");
  }
}

std::string PassInvocation::get(llvm::StringRef option) const {
  int i = info_->findOption(option);
  if (i < 0)
    throw Error("internal: pass '" + info_->name + "' reads undeclared option '" +
                option.str() + "'");
  return info_->options[i].print(options_);
}

void PassInvocation::throwWrongOptionsType() const {
  throw Error("internal: pass '" + info_->name +
              "' reads its options as a type other than the one it declared");
}

std::string PassInvocation::str() const {
  if (info_->options.empty()) return info_->name;
  std::string s = info_->name + "{";
  for (size_t i = 0; i < info_->options.size(); ++i) {
    if (i) s += ",";
    s += info_->options[i].name + "=" + info_->options[i].print(options_);
  }
  return s + "}";
}

bool PassInvocation::operator==(const PassInvocation &o) const {
  return info_ == o.info_ && str() == o.str();
}

//===----------------------------------------------------------------------===//
// Pipeline parsing
//===----------------------------------------------------------------------===//

namespace {

class PipelineParser {
public:
  PipelineParser(llvm::StringRef text, llvm::StringRef what) : s_(text), what_(what.str()) {}

  Pipeline parse() {
    Pipeline pl;
    skipBlanks();
    if (pos_ == s_.size()) return pl;
    std::vector<size_t> starts;
    parseList(pl, starts, false);
    checkOrder(pl, starts);
    return pl;
  }

  /// Elements separated by ',' up to the end (or, inside a fixpoint group, a ')').
  void parseList(Pipeline &pl, std::vector<size_t> &starts, bool inGroup) {
    while (true) {
      const size_t at = pos_;
      if (atFixpoint()) {
        if (inGroup) fail("fixpoint groups do not nest");
        pos_ = s_.find('(', pos_) + 1;
        skipBlanks();
        if (pos_ < s_.size() && s_[pos_] == ')') fail("expected a pass name in fixpoint(...)");
        const size_t begin = pl.passes.size();
        parseList(pl, starts, true);
        for (size_t i = begin; i < pl.passes.size(); ++i)
          if (!pl.passes[i].info().reachesFixpoint)
            fail("fixpoint(...) cannot hold '" + pl.passes[i].name() + "': it adds to the program every time "
                 "it runs (a derivative, a split), so the group would never stop changing",
                 starts[i]);
        ++pos_; // parseList returns inside a group only at its closing parenthesis
        pl.fixpoints.push_back({begin, pl.passes.size()});
      } else {
        Pipeline el = parseElement();
        if (inGroup && !el.fixpoints.empty()) fail("fixpoint groups do not nest", at);
        for (const Pipeline::Fixpoint &f : el.fixpoints)
          pl.fixpoints.push_back({f.begin + pl.passes.size(), f.end + pl.passes.size()});
        for (PassInvocation &inv : el.passes) {
          starts.push_back(at);
          pl.passes.push_back(std::move(inv));
        }
      }
      skipBlanks();
      if (pos_ == s_.size()) {
        if (inGroup) fail("expected ')' to close the fixpoint(");
        return;
      }
      if (inGroup && s_[pos_] == ')') return;
      if (s_[pos_] != ',') fail(inGroup ? "expected ',' or ')' between passes" : "expected ',' between passes");
      ++pos_;
      skipBlanks();
      if (pos_ == s_.size()) fail("expected a pass name after ','");
    }
  }

  /// `fixpoint` followed by '(' at pos_.
  bool atFixpoint() const {
    const llvm::StringRef kw = "fixpoint";
    if (!s_.substr(pos_).startswith(kw)) return false;
    size_t q = pos_ + kw.size();
    while (q < s_.size() && isBlank(s_[q])) ++q;
    return q < s_.size() && s_[q] == '(';
  }

  /// Each pass after the passes it needs before it (PassInfo::runsAfter).
  void checkOrder(const Pipeline &pl, const std::vector<size_t> &starts) const {
    for (size_t i = 0; i < pl.passes.size(); ++i)
      for (const PassInfo::RunsAfter &r : pl.passes[i].info().runsAfter) {
        size_t first = pl.passes.size();
        for (size_t j = 0; j < pl.passes.size() && first == pl.passes.size(); ++j)
          if (pl.passes[j].name() == r.pass) first = j;
        if (first < i || first == pl.passes.size()) continue;
        fail("'" + pl.passes[i].name() + "' must run after '" + r.pass + "' (column " +
                 std::to_string(starts[first] + 1) + "): " + r.why,
             starts[i]);
      }
  }

private:
  [[noreturn]] void fail(const std::string &msg, size_t at = std::string::npos) const {
    if (at == std::string::npos) at = pos_;
    // The quoted pipeline is a window of it around the column: a few lines whatever its size.
    // Its ends are moved to UTF-8 character boundaries, and the caret counts characters.
    constexpr size_t kHalf = 60;
    auto continuation = [&](size_t i) {
      return i < s_.size() && (static_cast<unsigned char>(s_[i]) & 0xC0) == 0x80;
    };
    size_t from = at > kHalf ? at - kHalf : 0, to = std::min(s_.size(), at + kHalf);
    while (from > 0 && continuation(from)) --from;
    while (to < s_.size() && continuation(to)) ++to;
    const std::string lead = from > 0 ? "..." : "", tail = to < s_.size() ? "..." : "";
    size_t column = lead.size();
    for (size_t i = from; i < at && i < s_.size(); ++i) column += continuation(i) ? 0 : 1;
    throw Error("error: " + what_ + ": " + msg + " at column " + std::to_string(at + 1) + "\n  " + lead +
                s_.substr(from, to - from).str() + tail + "\n  " + std::string(column, ' ') + "^");
  }
  [[noreturn]] void failSemantic(const std::string &msg) const {
    throw Error("error: " + what_ + ": " + msg);
  }

  void skipBlanks() {
    while (pos_ < s_.size() && isBlank(s_[pos_])) ++pos_;
  }
  size_t skipBlanksFrom(size_t i) const {
    while (i < s_.size() && isBlank(s_[i])) ++i;
    return i;
  }
  static bool isNameChar(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  }
  std::string parseName(const char *what) {
    skipBlanks();
    size_t start = pos_;
    while (pos_ < s_.size() && isNameChar(s_[pos_])) ++pos_;
    if (start == pos_) fail(std::string("expected ") + what);
    return s_.substr(start, pos_ - start).str();
  }

  /// A pass, or a named pipeline's passes.
  Pipeline parseElement() {
    const size_t at = pos_;
    const std::string name = parseName("a pass name");
    const NamedPipeline *named = lookupPass(name) ? nullptr : lookupPipeline(name);
    if (!named) {
      pos_ = at;
      Pipeline one;
      one.passes.push_back(parsePass());
      return one;
    }
    skipBlanks();
    if (pos_ < s_.size() && s_[pos_] == '{')
      fail("the named pipeline '" + name + "' takes no options (it stands for " + named->text +
           ": write those passes out to set one)");
    return Pipeline::parse(named->text, what_);
  }

  PassInvocation parsePass() {
    size_t at = pos_;
    std::string name = parseName("a pass name");
    const PassInfo *info = lookupPass(name);
    if (!info) {
      std::vector<std::string> pipelines;
      for (const NamedPipeline &p : pipelineRegistry()) pipelines.push_back(p.name);
      fail("unknown pass '" + ir::text::clipForMessage(name) + "' (known passes: " + knownPassNames() +
               "; named pipelines: " + llvm::join(pipelines, ", ") + ")",
           skipBlanksFrom(at));
    }
    PassInvocation inv(*info);
    skipBlanks();
    if (pos_ < s_.size() && s_[pos_] == '{') {
      ++pos_;
      std::vector<std::string> seen;
      skipBlanks();
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        return inv;
      }
      std::string lastValue; // of the option seen last
      while (true) {
        std::string key = parseName("an option name");
        if (info->findOption(key) < 0) {
          std::string msg = "pass '" + name + "' has no option '" + key + "' (" + optionNames(*info) + ")";
          // `grad{wrt=x0,x1}`: a bare name after an option reads as a list item, but ','
          // separates options; a list inside one option value uses ';'.
          skipBlanks();
          bool bare = pos_ >= s_.size() || s_[pos_] == ',' || s_[pos_] == '}';
          if (bare && !seen.empty())
            msg += "; ',' separates options, the items of a list inside one option value are "
                   "separated by ';', as in " + name + "{" + seen.back() + "=" + lastValue + ";" +
                   key + "}";
          failSemantic(msg);
        }
        for (const std::string &k : seen)
          if (k == key) failSemantic("pass '" + name + "': option '" + key + "' given twice");
        seen.push_back(key);
        skipBlanks();
        if (pos_ >= s_.size() || s_[pos_] != '=')
          fail("expected '=' after option '" + key + "' of pass '" + name + "'");
        ++pos_;
        size_t vstart = pos_;
        while (pos_ < s_.size() && s_[pos_] != ',' && s_[pos_] != '}' && s_[pos_] != '{')
          ++pos_;
        if (pos_ < s_.size() && s_[pos_] == '{') fail("unexpected '{' in an option value");
        std::string value = trim(s_.substr(vstart, pos_ - vstart));
        lastValue = value;
        try {
          inv.set(key, value);
        } catch (const Error &e) {
          failSemantic(e.what());
        }
        if (pos_ >= s_.size()) fail("expected '}' to close the options of pass '" + name + "'");
        if (s_[pos_] == '}') {
          ++pos_;
          break;
        }
        ++pos_; // ','
      }
    }
    return inv;
  }

  llvm::StringRef s_;
  std::string what_;
  size_t pos_ = 0;
};

} // namespace

Pipeline Pipeline::parse(llvm::StringRef text, llvm::StringRef what) {
  return PipelineParser(text, what).parse();
}

std::string Pipeline::str() const {
  std::string s;
  size_t groupEnd = 0; // end of the group being printed (0: none)
  for (size_t i = 0; i < passes.size(); ++i) {
    if (i) s += ",";
    if (const Fixpoint *f = fixpointAt(i)) {
      s += "fixpoint(";
      groupEnd = f->end;
    }
    s += passes[i].str();
    if (groupEnd == i + 1) {
      s += ")";
      groupEnd = 0;
    }
  }
  return s;
}

const Pipeline::Fixpoint *Pipeline::fixpointAt(size_t i) const {
  for (const Fixpoint &f : fixpoints)
    if (f.begin == i && f.end > f.begin) return &f; // an empty group (built by hand) is none
  return nullptr;
}

Pipeline Pipeline::without(llvm::StringRef name) const {
  Pipeline out;
  for (size_t i = 0; i < passes.size();) {
    const Fixpoint *f = fixpointAt(i);
    const size_t end = f ? f->end : i + 1, begin = out.passes.size();
    for (; i < end; ++i)
      if (passes[i].name() != name) out.passes.push_back(passes[i]);
    if (f && out.passes.size() > begin) out.fixpoints.push_back({begin, out.passes.size()});
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Reports
//===----------------------------------------------------------------------===//

namespace {

const char *statusName(PassRecord::Status s) {
  switch (s) {
  case PassRecord::Status::Ran: return "ran";
  case PassRecord::Status::Disabled: return "disabled";
  case PassRecord::Status::Bisected: return "skipped-by-bisect";
  }
  return "?";
}

std::string banner(const std::string &title) {
  const std::string rule =
      "===-------------------------------------------------------------------------===";
  size_t pad = title.size() < rule.size() ? (rule.size() - title.size()) / 2 : 0;
  return rule + "\n" + std::string(pad, ' ') + title + "\n" + rule + "\n";
}

std::string fmtSeconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", s);
  return buf;
}

std::string fmtPercent(double part, double total) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "(%5.1f%%)", total > 0 ? 100.0 * part / total : 0.0);
  return buf;
}

} // namespace

std::string PassRunReport::timingText() const {
  double verify = 0;
  for (const PassRecord &r : passes) verify += r.verifySeconds;
  std::ostringstream os;
  os << banner("... Pass execution timing report (" + ir::text::atName(program) + ") ...");
  os << "  Total Execution Time: " << fmtSeconds(totalSeconds) << " seconds\n\n";
  os << "   ---Wall Time---  --- Name ---\n";
  for (const PassRecord &r : passes) {
    if (r.status != PassRecord::Status::Ran) continue;
    os << "   " << fmtSeconds(r.seconds) << " " << fmtPercent(r.seconds, totalSeconds) << "  "
       << r.name << " (" << r.index << (r.round > 0 ? ", round " + std::to_string(r.round) : "") << ")\n";
  }
  os << "   " << fmtSeconds(verify) << " " << fmtPercent(verify, totalSeconds) << "  verifier\n";
  os << "   " << fmtSeconds(totalSeconds) << " " << fmtPercent(totalSeconds, totalSeconds)
     << "  Total\n";
  return os.str();
}

std::string PassRunReport::timingJson() const {
  nlohmann::ordered_json j;
  double verify = 0;
  for (const PassRecord &r : passes) verify += r.verifySeconds;
  j["program"] = program;
  j["total_seconds"] = totalSeconds;
  j["verifier_seconds"] = verify;
  j["passes"] = nlohmann::ordered_json::array();
  for (const PassRecord &r : passes) {
    nlohmann::ordered_json e;
    e["index"] = r.index;
    if (r.round > 0) e["round"] = r.round;
    e["name"] = r.name;
    e["pass"] = r.invocation;
    e["status"] = statusName(r.status);
    e["changed"] = r.changed;
    e["seconds"] = r.seconds;
    e["ops_before"] = r.opsBefore;
    e["ops_after"] = r.opsAfter;
    j["passes"].push_back(std::move(e));
  }
  // A report: a name that is not UTF-8 shows U+FFFD (the IR text form has the bytes).
  return j.dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

std::string PassRunReport::statisticsText() const {
  std::ostringstream os;
  os << banner("... Pass statistics report (" + ir::text::atName(program) + ") ...");
  for (const PassRecord &r : passes) {
    os << "(" << r.index << (r.round > 0 ? ", round " + std::to_string(r.round) : "") << ") " << r.invocation << ": ";
    if (r.status != PassRecord::Status::Ran) {
      os << statusName(r.status) << "\n";
      continue;
    }
    os << "ops " << r.opsBefore << " -> " << r.opsAfter << ", "
       << (r.changed ? "changed" : "unchanged") << "\n";
    size_t w = 0;
    for (const auto &[k, v] : r.stats.counters) w = std::max(w, std::to_string(v).size());
    for (const auto &[k, v] : r.stats.counters) {
      std::string n = std::to_string(v);
      os << "    " << std::string(w - n.size(), ' ') << n << " " << k << "\n";
    }
  }
  return os.str();
}

//===----------------------------------------------------------------------===//
// PassManager
//===----------------------------------------------------------------------===//

namespace {

void checkPassNames(const std::vector<std::string> &names, const char *flag) {
  for (const std::string &n : names)
    if (!lookupPass(n))
      throw Error(std::string("error: ") + flag + ": unknown pass '" + ir::text::clipForMessage(n) +
                  "' (known passes: " + knownPassNames() + ")");
}

} // namespace

PassManager::PassManager(Pipeline pipeline, PassManagerOptions opts)
    : pipeline_(std::move(pipeline)), opts_(std::move(opts)) {
  checkPassNames(opts_.printIrBefore, "--print-ir-before");
  checkPassNames(opts_.printIrAfter, "--print-ir-after");
  checkPassNames(opts_.disabledPasses, "--disable-pass");
  if (opts_.bisectLimit < -1)
    throw Error("error: --bisect-limit: expected -1 (no limit) or N >= 0, got " +
                std::to_string(opts_.bisectLimit));
  if (opts_.bisectLimit >= 0)
    bisect_ = std::make_shared<BisectInstrumentation>(opts_.bisectLimit,
                                                      opts_.log ? *opts_.log : std::cerr);
}

void PassManager::addInstrumentation(std::shared_ptr<PassInstrumentation> instrumentation) {
  extraInstrumentations_.push_back(std::move(instrumentation));
}

namespace {

/// The failure of a pass that threw `e`. A user error's message starts with "error:"
/// on its first line, as every diagnostic does (file:line:col: error: for parse
/// errors); the prefix is added when the pass's message lacks it.
PassFailure failureOf(const std::exception &e, const PassRecord &pass, size_t pipelineSize) {
  PassFailure f;
  f.kind = dynamic_cast<const Error *>(&e) ? PassFailure::Kind::Error
                                           : PassFailure::Kind::Internal;
  f.message = llvm::StringRef(e.what()).rtrim('\n').str();
  // Memory running out is a limit the input reached (a pipeline that keeps growing the
  // program, as jvp,jvp,... does), not a bug: an error of the pass, exit 1.
  if (dynamic_cast<const std::bad_alloc *>(&e)) {
    f.kind = PassFailure::Kind::Error;
    f.message = "error: out of memory (the program had " + std::to_string(pass.opsBefore) +
                " ops before this pass): the pipeline makes it larger than the memory this process "
                "may use";
  }
  if (f.kind == PassFailure::Kind::Error &&
      llvm::StringRef(f.message).split('\n').first.find("error:") == llvm::StringRef::npos)
    f.message = "error: " + f.message;
  f.notes = "\nnote: while running " + passLabel(pass, pipelineSize) + ": " + pass.invocation;
  return f;
}

/// Runs `inv` on `p` and records what it did in `rec`; an exception from the pass
/// becomes a PassFailure.
void runPass(const PassInvocation &inv, size_t pipelineSize, PassRecord &rec, ir::Program &p) {
  Stopwatch watch;
  try {
    if (inv.info().modulePass || p.functions.empty()) {
      rec.changed = inv.info().run(p, inv, rec.stats);
    } else {
      rec.changedFunctions.assign(p.functions.size() + 1, 0);
      for (size_t i = 0; i < p.functions.size(); ++i)
        rec.changedFunctions[i] = inv.info().run(p.functions[i], inv, rec.stats);
      rec.changedFunctions.back() = inv.info().run(p, inv, rec.stats);
      rec.changed = std::find(rec.changedFunctions.begin(), rec.changedFunctions.end(), 1) !=
                    rec.changedFunctions.end();
    }
  } catch (const std::exception &e) {
    throw failureOf(e, rec, pipelineSize);
  }
  rec.seconds = watch.seconds();
  rec.opsAfter = p.ops.size();
}

} // namespace

PassRunReport PassManager::run(ir::Program &p, const Pipeline &pipeline,
                               PassRequirement requirement, InputState input) const {
  Stopwatch watch;
  std::ostream &log = opts_.log ? *opts_.log : std::cerr;
  const int64_t run = ++*runs_;
  PassInstrumentor instrumentor;
  if (opts_.dumpDirPerProgram && !opts_.dumpDir.empty()) {
    if (run == 1) clearEarlierDump(opts_.dumpDir, true); // an earlier job's programs
    PassManagerOptions o = opts_;
    std::string k = std::to_string(run);
    if (k.size() < 2) k = "0" + k;
    o.dumpDir += "/" + k + "-" + p.name;
    *lastDumpDir_ = o.dumpDir;
    instrumentor = standardInstrumentations(o, pipeline, log, input);
  } else {
    instrumentor = standardInstrumentations(opts_, pipeline, log, input);
  }
  if (bisect_) instrumentor.add(bisect_);
  for (const auto &i : extraInstrumentations_) instrumentor.add(i);

  instrumentor.runBeforePipeline(p);
  PassRunReport report;
  report.program = p.name;
  // Runs pass i (in round `round` of its fixpoint group, 0 outside one); whether it
  // changed the program.
  auto runOne = [&](size_t i, int round) {
    const PassInvocation &inv = pipeline.passes[i];
    PassRecord rec;
    rec.index = static_cast<int>(i + 1);
    rec.round = round;
    rec.name = inv.name();
    rec.invocation = inv.str();
    rec.required = requirement == PassRequirement::Required;
    rec.opsBefore = rec.opsAfter = p.ops.size();
    if (!instrumentor.shouldRun(rec, p)) {
      instrumentor.runAfterPassSkipped(rec, p);
    } else {
      try {
        instrumentor.runBeforePass(rec, p);
        runPass(inv, pipeline.passes.size(), rec, p);
        instrumentor.runAfterPass(rec, p);
      } catch (PassFailure &failure) {
        instrumentor.runAfterPassFailed(rec, failure);
        failure.raise();
      }
    }
    const bool changed = rec.status == PassRecord::Status::Ran && rec.changed;
    report.passes.push_back(std::move(rec));
    return changed;
  };
  for (size_t i = 0; i < pipeline.passes.size();) {
    const Pipeline::Fixpoint *f = pipeline.fixpointAt(i);
    if (!f) {
      runOne(i++, 0);
      continue;
    }
    for (int round = 1;; ++round) {
      bool changed = false;
      for (size_t j = f->begin; j < f->end; ++j) changed |= runOne(j, round);
      if (!changed) break;
      if (round == kMaxFixpointRounds) {
        log << "note: fixpoint group at pass " << f->begin + 1 << " of " << pipeline.passes.size()
            << " still changed " << ir::text::atName(p.name) << " in round " << kMaxFixpointRounds
            << "; stopped there\n";
        break;
      }
    }
    i = f->end;
  }
  report.totalSeconds = watch.seconds();
  instrumentor.runAfterPipeline(report);
  log.flush();
  return report;
}

} // namespace tessel::passes
