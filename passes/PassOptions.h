//===- passes/PassOptions.h - Pass options declared once, bound to a struct -----===//
//
// Each pass takes its options as a plain struct (GradOptions, CheckpointOptions, ...),
// whose default member initialisers are the defaults. The registry declares every
// option once, binding its name, help and syntax to a member of that struct:
//
//   void declareOptions(PassOptionBinder<FoldOptions> &b) {
//     b.integer("max-broadcast-constant", &FoldOptions::maxBroadcastConstant, 0,
//               "largest constant (elements) a broadcast of a scalar constant folds into");
//   }
//
// From that declaration come the parser of `name=value` into the member, the canonical
// text of the member (Pipeline::str()), the default (the canonical text of the member
// of a default-constructed struct) and the `--list-passes` entry.
//
// Option kinds and their canonical text:
//   flag      true | false          (nothing else: --list-passes says so)
//   integer   decimal, >= a minimum
//   choice    one of a fixed list of names, printed in declaration order
//   list      names separated by ';' (blanks around items dropped; "" = empty list)
//   count     `auto` (stored as 0) or an integer >= 1
//
//===----------------------------------------------------------------------===//
#pragma once

#include <any>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "llvm/ADT/StringExtras.h"

namespace tessel::passes {

/// Declaration of one pass option, with the parser and printer of its struct member.
struct PassOptionInfo {
  enum class Kind { Bool, Int, Enum, List, String };
  std::string name;
  Kind kind = Kind::String;
  std::string defaultValue; ///< canonical spelling
  std::string help;         ///< one line
  /// Enum: the allowed values. Int: empty. String: values listed in the help only.
  std::vector<std::string> allowed;
  /// Int: smallest allowed value.
  int64_t minInt = INT64_MIN;
  /// Stores the value given as `text` (blanks already trimmed) into the member of the
  /// options struct held by `options`; throws std::invalid_argument with the reason
  /// (e.g. "allowed: true, false").
  std::function<void(std::any &options, const std::string &text)> parse;
  /// Canonical text of the member of the options struct held by `options`.
  std::function<std::string(const std::any &options)> print;

  /// Human description of the accepted values, e.g. "chain|pairwise|auto", "true|false".
  std::string valueSyntax() const;
};

/// Text <-> value of each option kind, for the binder below (the canonical text is
/// what the printers return). The parsers throw std::invalid_argument with the reason.
namespace detail {
bool parseFlag(const std::string &text);
std::string printFlag(bool value);
int64_t parseInteger(const std::string &text, int64_t minValue);
std::vector<std::string> parseList(const std::string &text);
std::string printList(const std::vector<std::string> &items);
int64_t parseCount(const std::string &text); ///< "auto" -> 0
std::string printCount(int64_t value);       ///< 0 -> "auto"
} // namespace detail

/// Collects the option declarations of the options struct `Options`, in the order
/// they are declared (which is the order of the canonical text and of --list-passes).
template <class Options> class PassOptionBinder {
public:
  /// true | false.
  void flag(std::string name, bool Options::*member, std::string help) {
    add(std::move(name), PassOptionInfo::Kind::Bool, std::move(help), member,
        detail::parseFlag, detail::printFlag);
  }

  /// A decimal integer >= minValue.
  void integer(std::string name, int64_t Options::*member, int64_t minValue, std::string help) {
    PassOptionInfo &o = add(
        std::move(name), PassOptionInfo::Kind::Int, std::move(help), member,
        [minValue](const std::string &t) { return detail::parseInteger(t, minValue); },
        [](int64_t v) { return std::to_string(v); });
    o.minInt = minValue;
  }

  /// One of `values`, spelled as `nameOf` spells them; listed in the order given.
  template <class Enum>
  void choice(std::string name, Enum Options::*member, std::vector<Enum> values,
              const char *(*nameOf)(Enum), std::string help) {
    std::vector<std::string> names;
    for (Enum v : values) names.push_back(nameOf(v));
    auto parse = [values, names](const std::string &t) {
      for (size_t i = 0; i < names.size(); ++i)
        if (names[i] == t) return values[i];
      throw std::invalid_argument("allowed: " + llvm::join(names, ", "));
    };
    PassOptionInfo &o = add(std::move(name), PassOptionInfo::Kind::Enum, std::move(help),
                            member, parse, [nameOf](Enum v) { return std::string(nameOf(v)); });
    o.allowed = std::move(names);
  }

  /// Names separated by ';'.
  void list(std::string name, std::vector<std::string> Options::*member, std::string help) {
    add(std::move(name), PassOptionInfo::Kind::List, std::move(help), member,
        detail::parseList, detail::printList);
  }

  /// `auto` (the member holds 0) or an integer >= 1.
  void count(std::string name, int64_t Options::*member, std::string help) {
    PassOptionInfo &o = add(std::move(name), PassOptionInfo::Kind::String, std::move(help),
                            member, detail::parseCount, detail::printCount);
    o.allowed = {"auto", "<integer >= 1>"};
  }

  /// The declarations, defaults filled in from a default-constructed Options.
  std::vector<PassOptionInfo> take() {
    const std::any defaults = Options{};
    for (PassOptionInfo &o : options_) o.defaultValue = o.print(defaults);
    return std::move(options_);
  }

private:
  template <class T, class Parse, class Print>
  PassOptionInfo &add(std::string name, PassOptionInfo::Kind kind, std::string help,
                      T Options::*member, Parse parse, Print print) {
    PassOptionInfo o;
    o.name = std::move(name);
    o.kind = kind;
    o.help = std::move(help);
    o.parse = [member, parse](std::any &options, const std::string &text) {
      std::any_cast<Options &>(options).*member = parse(text);
    };
    o.print = [member, print](const std::any &options) {
      return print(std::any_cast<const Options &>(options).*member);
    };
    options_.push_back(std::move(o));
    return options_.back();
  }

  std::vector<PassOptionInfo> options_;
};

} // namespace tessel::passes
