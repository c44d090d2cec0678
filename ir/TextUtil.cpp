//===- ir/TextUtil.cpp - Lexical helpers shared by the text, JSON and DOT forms ===//
#include "ir/TextUtil.h"

#include <charconv>
#include <cmath>
#include <limits>

namespace tessel::ir::text {

std::string prefixedNumber(const char *prefix, int64_t n) {
  std::string s = prefix;
  s += std::to_string(n);
  return s;
}

std::string formatDouble(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, x); // shortest round-trip form
  return std::string(buf, res.ptr);
}

std::string formatFloatAttr(double x) {
  std::string s = formatDouble(x);
  if (s.find_first_of(".eEnia") == std::string::npos) s += ".0";
  return s;
}

std::string formatType(const Type &t) {
  std::string s = "f64[";
  for (size_t i = 0; i < t.shape.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(t.shape[i]);
  }
  s += ']';
  return s;
}

bool isBareName(llvm::StringRef s) {
  if (s.empty()) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

size_t utf8SequenceLength(llvm::StringRef s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t len;
  uint32_t cp;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    cp = c & 0x07;
  } else {
    return 0; // continuation byte, overlong lead (C0/C1) or F5..FF
  }
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  if (len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) return 0;
  if (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) return 0;
  return len;
}

std::string echoSourceLine(llvm::StringRef text, size_t lineStart) {
  llvm::StringRef raw = text.substr(lineStart);
  raw = raw.substr(0, raw.find('\n'));
  if (raw.endswith("\r")) raw = raw.drop_back();
  std::string out;
  for (size_t i = 0; i < raw.size();) {
    size_t n = utf8SequenceLength(raw, i);
    const auto c = static_cast<unsigned char>(raw[i]);
    // An invalid byte or a control character (not a tab) takes one column as '?', so the
    // caret line below stays aligned.
    if (n == 0 || (c < 0x20 && c != '\t') || c == 0x7f ||
        (n == 2 && c == 0xC2 && static_cast<unsigned char>(raw[i + 1]) < 0xA0)) {
      out += '?';
      i += n == 0 ? 1 : n;
    } else {
      out.append(raw.data() + i, n);
      i += n;
    }
  }
  return out;
}

std::string clipForMessage(llvm::StringRef s, size_t max) {
  if (s.size() <= max) return s.str();
  size_t cut = max;
  // Back up to the first byte of a UTF-8 sequence (continuation bytes are 10xxxxxx).
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut).str() + "...(" + std::to_string(s.size()) + " bytes)";
}

std::string atName(llvm::StringRef name) {
  return "@" + (isBareName(name) ? clipForMessage(name) : quoteString(clipForMessage(name)));
}

std::string percentName(llvm::StringRef name) {
  return "%" + (isBareName(name) ? clipForMessage(name) : quoteString(clipForMessage(name)));
}

std::string clipLongLines(llvm::StringRef raw, size_t max) {
  // Control bytes other than newline and tab (a terminal escape sequence in a flag's
  // value, a NUL, a carriage return that would overwrite the line) are shown as \xNN.
  // Invalid UTF-8 bytes (a lone 0x9B is an 8-bit CSI) are \xNN too, and the C1 control
  // characters U+0080..U+009F \u00NN.
  static const char hex[] = "0123456789abcdef";
  auto byteEscape = [&](std::string &out, const char *prefix, unsigned char c) {
    out += prefix;
    out += hex[c >> 4];
    out += hex[c & 15];
  };
  std::string escaped;
  escaped.reserve(raw.size());
  for (size_t i = 0; i < raw.size();) {
    const auto c = static_cast<unsigned char>(raw[i]);
    const size_t n = utf8SequenceLength(raw, i);
    if (n == 0 || (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      byteEscape(escaped, "\\x", c);
      ++i;
    } else if (n == 2 && c == 0xC2 && static_cast<unsigned char>(raw[i + 1]) < 0xA0) {
      byteEscape(escaped, "\\u00", static_cast<unsigned char>(raw[i + 1]));
      i += 2;
    } else {
      escaped.append(raw.data() + i, n);
      i += n;
    }
  }
  llvm::StringRef msg = escaped;
  std::string out;
  const size_t half = max / 2;
  while (!msg.empty()) {
    auto [line, rest] = msg.split('\n');
    const bool hadNewline = line.size() < msg.size();
    if (line.size() <= max) {
      out += line.str();
    } else {
      size_t head = half, tail = line.size() - half;
      while (head > 0 && (static_cast<unsigned char>(line[head]) & 0xC0) == 0x80) --head;
      while (tail < line.size() && (static_cast<unsigned char>(line[tail]) & 0xC0) == 0x80) ++tail;
      out += line.substr(0, head).str() + " ...(" + std::to_string(line.size()) +
             "-byte line clipped)... " + line.substr(tail).str();
    }
    if (hadNewline) out += '\n';
    msg = rest;
  }
  return out;
}

std::optional<size_t> findJsonNestingBeyond(llvm::StringRef s, int maxDepth) {
  int depth = 0;
  bool inString = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (inString) {
      if (c == '\\') ++i; // the escaped character cannot end the string
      else if (c == '"') inString = false;
      continue;
    }
    if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > maxDepth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

std::optional<size_t> findInvalidUtf8(llvm::StringRef s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t n = utf8SequenceLength(s, i);
    if (n == 0) return i;
    i += n;
  }
  return std::nullopt;
}

std::string quoteString(llvm::StringRef s) {
  static const char *hex = "0123456789abcdef";
  std::string out = "\"";
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
    case '"': out += "\\\""; ++i; continue;
    case '\\': out += "\\\\"; ++i; continue;
    case '\n': out += "\\n"; ++i; continue;
    case '\t': out += "\\t"; ++i; continue;
    case '\r': out += "\\r"; ++i; continue;
    default: break;
    }
    size_t n = utf8SequenceLength(s, i);
    if (c < 0x20 || c == 0x7F || n == 0) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
      ++i;
      continue;
    }
    out.append(s.data() + i, n);
    i += n;
  }
  out += '"';
  return out;
}

std::vector<std::string> printedNames(const Program &p) {
  std::vector<std::string> names(p.values.size());
  std::vector<bool> seen(p.values.size(), false);
  int64_t next = 0;
  auto visit = [&](ValueId v) {
    if (v >= names.size() || seen[v]) return;
    seen[v] = true;
    const std::string &n = p.values[v].name;
    names[v] = isAnonymousName(n) ? std::to_string(next++) : n;
  };
  for (ValueId v : p.inputs) visit(v);
  for (const Op &op : p.ops)
    for (ValueId v : op.results) visit(v);
  for (size_t v = 0; v < names.size(); ++v)
    if (!seen[v]) names[v] = prefixedNumber("?", v);
  return names;
}

std::optional<int64_t> checkedNumel(llvm::ArrayRef<int64_t> shape) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max() / 8; // bytes must fit
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d != 0 && n > kMax / d) {
      // Overflow unless a later extent is 0.
      for (int64_t e : shape)
        if (e == 0) return 0;
      return std::nullopt;
    }
    n *= d;
  }
  return n;
}

} // namespace tessel::ir::text
