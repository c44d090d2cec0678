//===- ir/Diagnostics.cpp -------------------------------------------------------===//
#include "ir/Diagnostics.h"

#include <algorithm>

namespace tessel {

namespace {

/// Lines longer than this are shown as a window around the caret.
constexpr size_t kMaxEchoBytes = 160;
/// Bytes of a long line shown before the caret (about as many follow it).
constexpr size_t kEchoContext = 60;

bool isUtf8Continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

} // namespace

std::string formatDiagnostic(const SourcePos &pos, const std::string &msg,
                             const std::string &sourceLine) {
  std::string out = pos.known() ? pos.str() + ": error: " + msg
                                : (pos.file.empty() ? "" : pos.file + ": ") + "error: " + msg;
  if (!pos.known())
    return out;
  out += "\n";
  std::string line = sourceLine;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  // The caret's byte index in `line` (it may lie past the end, e.g. at end of file).
  const size_t caret = pos.col > 0 ? pos.col - 1 : 0;
  // A long line (a one-line JSON file, a huge literal) is cut to a window around the
  // caret, "..." marking each cut, at UTF-8 boundaries so the echo stays valid text.
  size_t begin = 0, end = line.size();
  if (line.size() > kMaxEchoBytes) {
    const size_t width = 2 * kEchoContext;
    begin = std::min(caret > kEchoContext ? caret - kEchoContext : 0, line.size() - width);
    end = begin + width;
    while (begin > 0 && isUtf8Continuation(line[begin])) ++begin;
    while (end < line.size() && isUtf8Continuation(line[end])) --end;
  }
  const std::string lead = begin > 0 ? "..." : "";
  std::string shown = lead + line.substr(begin, end - begin) + (end < line.size() ? "..." : "");
  // Control bytes (a NUL would even end the message where what() is printed as a C
  // string) are echoed as '?', one for one, so the caret still lines up.
  for (char &c : shown)
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) c = '?';
  out += shown + "\n";
  // Tabs are kept in the indentation so the caret lines up in a terminal.
  std::string pad(lead.size(), ' ');
  for (size_t i = begin; i < caret; ++i) pad += i < end && line[i] == '\t' ? '\t' : ' ';
  out += pad + "^";
  return out;
}

} // namespace tessel

namespace tessel {

std::string errorText(const std::exception &e) {
  const std::string msg = e.what();
  return msg.rfind("error: ", 0) == 0 ? msg.substr(7) : msg;
}

Error withContext(const std::exception &e, const std::string &context) {
  return Error("error: " + context + ": " + errorText(e));
}

} // namespace tessel
