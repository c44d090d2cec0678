//===- ir/Diagnostics.cpp -------------------------------------------------------===//
#include "ir/Diagnostics.h"

namespace tessel {

std::string formatDiagnostic(const SourcePos &pos, const std::string &msg,
                             const std::string &sourceLine) {
  std::string out = pos.known() ? pos.str() + ": error: " + msg
                                : (pos.file.empty() ? "" : pos.file + ": ") + "error: " + msg;
  if (!pos.known())
    return out;
  out += "\n";
  // Tabs are kept in the indentation so the caret lines up in a terminal.
  std::string line = sourceLine;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  // Control bytes (a NUL would even end the message where what() is printed as a C
  // string) are echoed as '?', one for one, so the caret still lines up.
  for (char &c : line)
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) c = '?';
  out += line + "\n";
  std::string pad;
  for (unsigned i = 1; i < pos.col && i - 1 < line.size(); ++i)
    pad += line[i - 1] == '\t' ? '\t' : ' ';
  for (unsigned i = static_cast<unsigned>(line.size()) + 1; i < pos.col; ++i) pad += ' ';
  out += pad + "^";
  return out;
}

} // namespace tessel
