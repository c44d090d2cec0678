//===- passes/PassManager.cpp - Pipelines and the instrumented pass driver ------===//
#include "passes/PassManager.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "ir/Diagnostics.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

namespace tessel::passes {

namespace {

std::string joinStrings(const std::vector<std::string> &v, const char *sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += sep;
    s += v[i];
  }
  return s;
}

bool isBlank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string trim(llvm::StringRef s) { return s.trim(" \t\r\n").str(); }

} // namespace

//===----------------------------------------------------------------------===//
// Registry helpers
//===----------------------------------------------------------------------===//

std::string PassOptionInfo::valueSyntax() const {
  switch (kind) {
  case Kind::Bool: return "true|false";
  case Kind::Int:
    return minInt == INT64_MIN ? "<integer>" : "<integer >= " + std::to_string(minInt) + ">";
  case Kind::Enum: return joinStrings(allowed, "|");
  case Kind::List: return "<name>[;<name>...]";
  case Kind::String: return allowed.empty() ? "<string>" : joinStrings(allowed, "|");
  }
  return "";
}

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
  return joinStrings(names, ", ");
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
  }
  return os.str();
}

//===----------------------------------------------------------------------===//
// PassInvocation
//===----------------------------------------------------------------------===//

PassInvocation::PassInvocation(const PassInfo &info) : info_(&info) {
  for (const PassOptionInfo &o : info.options) values_.push_back(o.defaultValue);
}

namespace {

std::string optionNames(const PassInfo &info) {
  if (info.options.empty()) return "the pass has no options";
  std::vector<std::string> n;
  for (const PassOptionInfo &o : info.options) n.push_back(o.name);
  return "options: " + joinStrings(n, ", ");
}

/// Canonical spelling of `value` for option `o`; throws std::invalid_argument with
/// the reason.
std::string canonicalValue(const PassOptionInfo &o, const std::string &value) {
  using K = PassOptionInfo::Kind;
  switch (o.kind) {
  case K::Bool:
    if (value == "true" || value == "1" || value == "on" || value == "yes") return "true";
    if (value == "false" || value == "0" || value == "off" || value == "no") return "false";
    throw std::invalid_argument("allowed: true, false");
  case K::Int: {
    int64_t x = 0;
    llvm::StringRef s(value);
    if (s.empty() || s.getAsInteger(10, x))
      throw std::invalid_argument("expected an integer");
    if (x < o.minInt)
      throw std::invalid_argument("expected an integer >= " + std::to_string(o.minInt));
    return std::to_string(x);
  }
  case K::Enum:
    for (const std::string &a : o.allowed)
      if (a == value) return value;
    throw std::invalid_argument("allowed: " + joinStrings(o.allowed, ", "));
  case K::List: {
    if (trim(value).empty()) return "";
    llvm::SmallVector<llvm::StringRef, 4> parts;
    llvm::StringRef(value).split(parts, ';');
    std::vector<std::string> items;
    for (llvm::StringRef part : parts) {
      items.push_back(trim(part));
      if (items.back().empty()) throw std::invalid_argument("empty item in ';'-separated list");
    }
    return joinStrings(items, ";");
  }
  case K::String:
    if (o.canonicalize) return o.canonicalize(value);
    return value;
  }
  return value;
}

} // namespace

void PassInvocation::set(llvm::StringRef option, llvm::StringRef value) {
  int i = info_->findOption(option);
  if (i < 0)
    throw Error("pass '" + info_->name + "' has no option '" + option.str() + "' (" +
                optionNames(*info_) + ")");
  const PassOptionInfo &o = info_->options[i];
  try {
    values_[i] = canonicalValue(o, trim(value));
  } catch (const std::invalid_argument &e) {
    throw Error("pass '" + info_->name + "', option '" + o.name + "': invalid value '" +
                value.str() + "' (" + e.what() + ")");
  }
}

const std::string &PassInvocation::get(llvm::StringRef option) const {
  int i = info_->findOption(option);
  if (i < 0)
    throw Error("internal: pass '" + info_->name + "' reads undeclared option '" +
                option.str() + "'");
  return values_[i];
}

bool PassInvocation::getBool(llvm::StringRef option) const { return get(option) == "true"; }

int64_t PassInvocation::getInt(llvm::StringRef option) const {
  int64_t x = 0;
  if (llvm::StringRef(get(option)).getAsInteger(10, x))
    throw Error("pass '" + info_->name + "', option '" + option.str() + "' is not an integer");
  return x;
}

std::vector<std::string> PassInvocation::getList(llvm::StringRef option) const {
  std::vector<std::string> out;
  llvm::StringRef s(get(option));
  if (s.empty()) return out;
  llvm::SmallVector<llvm::StringRef, 4> parts;
  s.split(parts, ';');
  for (llvm::StringRef p : parts) out.push_back(p.str());
  return out;
}

std::string PassInvocation::str() const {
  if (info_->options.empty()) return info_->name;
  std::string s = info_->name + "{";
  for (size_t i = 0; i < values_.size(); ++i) {
    if (i) s += ",";
    s += info_->options[i].name + "=" + values_[i];
  }
  return s + "}";
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
    while (true) {
      pl.passes.push_back(parsePass());
      skipBlanks();
      if (pos_ == s_.size()) break;
      if (s_[pos_] != ',') fail("expected ',' between passes");
      ++pos_;
      skipBlanks();
      if (pos_ == s_.size()) fail("expected a pass name after ','");
    }
    return pl;
  }

private:
  [[noreturn]] void fail(const std::string &msg, size_t at = std::string::npos) const {
    if (at == std::string::npos) at = pos_;
    throw Error("error: " + what_ + ": " + msg + " at column " + std::to_string(at + 1) +
                "\n  " + s_.str() + "\n  " + std::string(at, ' ') + "^");
  }
  [[noreturn]] void failSemantic(const std::string &msg) const {
    throw Error("error: " + what_ + ": " + msg);
  }

  void skipBlanks() {
    while (pos_ < s_.size() && isBlank(s_[pos_])) ++pos_;
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

  PassInvocation parsePass() {
    size_t at = pos_;
    std::string name = parseName("a pass name");
    const PassInfo *info = lookupPass(name);
    if (!info) {
      (void)at;
      failSemantic("unknown pass '" + name + "' (known passes: " + knownPassNames() + ")");
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
      while (true) {
        std::string key = parseName("an option name");
        if (info->findOption(key) < 0)
          failSemantic("pass '" + name + "' has no option '" + key + "' (" +
                       optionNames(*info) + ")");
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
  for (size_t i = 0; i < passes.size(); ++i) {
    if (i) s += ",";
    s += passes[i].str();
  }
  return s;
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
  os << banner("... Pass execution timing report ...");
  os << "  Total Execution Time: " << fmtSeconds(totalSeconds) << " seconds\n\n";
  os << "   ---Wall Time---  --- Name ---\n";
  for (const PassRecord &r : passes) {
    if (r.status != PassRecord::Status::Ran) continue;
    os << "   " << fmtSeconds(r.seconds) << " " << fmtPercent(r.seconds, totalSeconds) << "  "
       << r.name << " (" << r.index << ")\n";
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
  j["total_seconds"] = totalSeconds;
  j["verifier_seconds"] = verify;
  j["passes"] = nlohmann::ordered_json::array();
  for (const PassRecord &r : passes) {
    nlohmann::ordered_json e;
    e["index"] = r.index;
    e["name"] = r.name;
    e["pass"] = r.invocation;
    e["status"] = statusName(r.status);
    e["changed"] = r.changed;
    e["seconds"] = r.seconds;
    e["ops_before"] = r.opsBefore;
    e["ops_after"] = r.opsAfter;
    j["passes"].push_back(std::move(e));
  }
  return j.dump(1) + "\n";
}

std::string PassRunReport::statisticsText() const {
  std::ostringstream os;
  os << banner("... Pass statistics report ...");
  for (const PassRecord &r : passes) {
    os << "(" << r.index << ") " << r.invocation << ": ";
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
      throw Error(std::string("error: ") + flag + ": unknown pass '" + n +
                  "' (known passes: " + knownPassNames() + ")");
}

bool contains(const std::vector<std::string> &v, const std::string &s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::string passLabel(const PassRecord &r, size_t total) {
  return "pass '" + r.name + "' (" + std::to_string(r.index) + " of " + std::to_string(total) +
         ")";
}

/// Comment lines: every line of `text` prefixed with "// ".
std::string commentLines(const std::string &text) {
  std::string out;
  llvm::SmallVector<llvm::StringRef, 8> lines;
  llvm::StringRef(text).rtrim("\n").split(lines, '\n');
  for (llvm::StringRef l : lines) out += "//   " + l.str() + "\n";
  return out;
}

std::string shellQuote(const std::string &s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'')
      q += "'\\''";
    else
      q += c;
  }
  return q + "'";
}

void writeFileOrThrow(const std::string &path, const std::string &text, const char *what) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw Error(std::string("error: ") + what + ": cannot open '" + path + "' for writing");
  out << text;
  if (!out) throw Error(std::string("error: ") + what + ": cannot write '" + path + "'");
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
}

PassRunReport PassManager::run(ir::Program &p) const {
  using Clock = std::chrono::steady_clock;
  auto secondsSince = [](Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  auto t0 = Clock::now();
  std::ostream &log = opts_.log ? *opts_.log : std::cerr;
  const size_t total = pipeline_.passes.size();
  const std::string pipelineText = pipeline_.str();

  ir::PrintOptions logPrint;
  logPrint.elideConstantsAbove = opts_.elideConstantsAbove;
  ir::PrintOptions exactPrint; // dumps and reproducers must parse back
  exactPrint.elideConstantsAbove = 0;

  auto dump = [&](const std::string &header, const ir::Program &prog) {
    log << "// -----// " << header << " //----- //\n" << ir::printProgram(prog, logPrint);
    log.flush();
  };

  if (opts_.verifyEach) {
    std::vector<std::string> errs = ir::verify(p);
    if (!errs.empty())
      throw VerifyError("error: the input program does not verify:\n" + joinStrings(errs, "\n"));
  }

  int width = total >= 100 ? 3 : 2;
  auto dumpName = [&](size_t index, const std::string &name) {
    std::string n = std::to_string(index);
    if (static_cast<int>(n.size()) < width) n = std::string(width - n.size(), '0') + n;
    return opts_.dumpDir + "/" + n + "-" + name + ".tir";
  };
  if (!opts_.dumpDir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(opts_.dumpDir, ec);
    if (ec)
      throw Error("error: --dump-dir: cannot create directory '" + opts_.dumpDir +
                  "': " + ec.message());
    writeFileOrThrow(dumpName(0, "input"),
                     "// tessel pass dump: input of the pipeline\n// pipeline: " + pipelineText +
                         "\n" + ir::printProgram(p, exactPrint),
                     "--dump-dir");
  }
  if (opts_.printIrAfterChange) dump("IR Dump At Start", p);

  PassRunReport report;
  int64_t executions = 0;
  for (size_t i = 0; i < total; ++i) {
    const PassInvocation &inv = pipeline_.passes[i];
    PassRecord rec;
    rec.index = static_cast<int>(i + 1);
    rec.name = inv.name();
    rec.invocation = inv.str();
    rec.opsBefore = rec.opsAfter = p.ops.size();
    std::string tag = inv.name() + " (" + std::to_string(i + 1) + ")";

    if (contains(opts_.disabledPasses, inv.name())) {
      rec.status = PassRecord::Status::Disabled;
      if (opts_.printIrAfterAll || opts_.printIrAfterChange || contains(opts_.printIrAfter, rec.name))
        log << "// -----// " << tag << " skipped: disabled by --disable-pass //----- //\n";
      report.passes.push_back(std::move(rec));
      continue;
    }
    ++executions;
    if (opts_.bisectLimit >= 0) {
      bool runIt = executions <= opts_.bisectLimit;
      log << "BISECT: " << (runIt ? "running" : "NOT running") << " pass (" << executions << ") "
          << rec.invocation << " on program @" << p.name << "\n";
      if (!runIt) {
        rec.status = PassRecord::Status::Bisected;
        report.passes.push_back(std::move(rec));
        continue;
      }
    }

    if (contains(opts_.printIrBefore, rec.name)) dump("IR Dump Before " + tag, p);
    std::string before;
    if (opts_.printIrAfterChange) before = ir::printProgram(p, exactPrint);
    ir::Program saved;
    if (!opts_.crashReproducer.empty()) saved = p;

    auto writeReproducer = [&](const std::string &why) -> std::string {
      std::string text = "// tessel crash reproducer: " + passLabel(rec, total) + " failed:\n" +
                         commentLines(why) + "// pipeline: " + pipelineText +
                         "\n// reproduce: tessel opt " + opts_.crashReproducer +
                         " --passes=" + shellQuote(rec.invocation) + "\n" +
                         ir::printProgram(saved, exactPrint);
      writeFileOrThrow(opts_.crashReproducer, text, "--crash-reproducer");
      return "\nnote: crash reproducer (the program before the pass) written to '" +
             opts_.crashReproducer + "'; reproduce with: tessel opt " + opts_.crashReproducer +
             " --passes=" + shellQuote(rec.invocation);
    };

    auto tp = Clock::now();
    try {
      rec.changed = inv.info().run(p, inv, rec.stats);
    } catch (const std::exception &e) {
      std::string what = e.what();
      while (!what.empty() && what.back() == '\n') what.pop_back();
      // Every diagnostic reads "...error: ..." on its first line (file:line:col: error:
      // for parse errors); add the prefix when the pass's message lacks it.
      const bool userError = dynamic_cast<const Error *>(&e) != nullptr;
      if (userError &&
          llvm::StringRef(what).split('\n').first.find("error:") == llvm::StringRef::npos)
        what = "error: " + what;
      std::string note = "\nnote: while running " + passLabel(rec, total) + ": " + rec.invocation;
      if (!opts_.crashReproducer.empty()) {
        std::string repro = writeReproducer(what);
        if (!userError)
          throw Error("error: internal error in " + passLabel(rec, total) + ": " + what + note +
                      repro);
        throw Error(what + note + repro);
      }
      if (userError) throw Error(what + note);
      throw std::runtime_error(what + note);
    }
    rec.seconds = secondsSince(tp);
    rec.opsAfter = p.ops.size();

    if (opts_.verifyEach) {
      auto tv = Clock::now();
      std::vector<std::string> errs = ir::verify(p);
      rec.verifySeconds = secondsSince(tv);
      if (!errs.empty()) {
        std::string msg = "error: verifier failed after " + passLabel(rec, total) + ": " +
                          rec.invocation + "\n" + joinStrings(errs, "\n");
        if (!opts_.crashReproducer.empty()) msg += writeReproducer(msg);
        throw VerifyError(msg);
      }
    }

    if (opts_.printIrAfterAll || contains(opts_.printIrAfter, rec.name)) {
      dump("IR Dump After " + tag, p);
    } else if (opts_.printIrAfterChange) {
      if (ir::printProgram(p, exactPrint) != before)
        dump("IR Dump After " + tag, p);
      else
        log << "// -----// IR Dump After " << tag << " omitted: no change //----- //\n";
    }
    if (!opts_.dumpDir.empty())
      writeFileOrThrow(dumpName(i + 1, rec.name),
                       "// tessel pass dump: after pass " + std::to_string(i + 1) + " of " +
                           std::to_string(total) + ": " + rec.invocation +
                           "\n// pipeline: " + pipelineText + "\n" +
                           ir::printProgram(p, exactPrint),
                       "--dump-dir");
    report.passes.push_back(std::move(rec));
  }
  report.totalSeconds = secondsSince(t0);
  if (opts_.timePasses && !opts_.timePassesJson) log << report.timingText();
  if (opts_.timePassesJson) log << report.timingJson();
  if (opts_.statistics) log << report.statisticsText();
  log.flush();
  return report;
}

} // namespace tessel::passes
