//===- runtime/Npy.cpp - NumPy .npy reading and writing -----------------------===//
#include "runtime/Npy.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ir/Diagnostics.h"
#include "ir/TextUtil.h"
#include "runtime/MemoryLimit.h"

namespace tessel::rt {

static_assert(std::endian::native == std::endian::little,
              "the .npy reader assumes a little-endian host");

namespace {

/// The longest header read (numpy's own are a few hundred bytes; version 1 allows 65535).
constexpr size_t kMaxNpyHeaderBytes = size_t(1) << 20;

[[noreturn]] void fail(const std::string &name, const std::string &msg) {
  throw Error("error: " + name + ": " + msg);
}

/// Minimal reader of the header dict literal.
struct HeaderParser {
  const std::string &s;
  const std::string &name;
  size_t i = 0;

  void ws() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  }
  bool eat(char c) {
    ws();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c))
      fail(name, std::string("malformed .npy header: expected '") + c + "' at offset " +
                     std::to_string(i) + " in " + s);
  }
  std::string str() {
    ws();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"'))
      fail(name, "malformed .npy header: expected a string in " + s);
    char q = s[i++];
    size_t e = s.find(q, i);
    if (e == std::string::npos) fail(name, "malformed .npy header: unterminated string in " + s);
    std::string r = s.substr(i, e - i);
    i = e + 1;
    return r;
  }
  std::string word() {
    ws();
    size_t b = i;
    while (i < s.size() && std::isalnum(static_cast<unsigned char>(s[i]))) ++i;
    return s.substr(b, i - b);
  }
};

/// Where the header of a .npy file ends (the data's first byte), from its first 12
/// bytes (10 for version 1); fails for a missing magic or an unknown version.
size_t npyDataStart(const std::string &bytes, const std::string &name, size_t &hstart) {
  static const char magic[] = "\x93NUMPY";
  if (bytes.size() < 10 || std::memcmp(bytes.data(), magic, 6) != 0)
    fail(name, "not a .npy file (missing the \\x93NUMPY magic)");
  int major = static_cast<unsigned char>(bytes[6]), minor = static_cast<unsigned char>(bytes[7]);
  size_t hlen;
  if (major == 1) {
    hlen = static_cast<unsigned char>(bytes[8]) | (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) fail(name, "truncated .npy header");
    hlen = 0;
    for (int k = 3; k >= 0; --k) hlen = (hlen << 8) | static_cast<unsigned char>(bytes[8 + k]);
    hstart = 12;
  } else {
    fail(name, "unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor) +
                   " (supported: 1.0, 2.0, 3.0)");
  }
  if (hlen > kMaxNpyHeaderBytes)
    fail(name, ".npy header of " + std::to_string(hlen) + " bytes (at most " +
                   std::to_string(kMaxNpyHeaderBytes) + "; numpy writes a few hundred)");
  return hstart + hlen;
}

/// The shape of the header dict `header` (the bytes between the length and the data):
/// exactly the keys descr, fortran_order and shape, each once, a shape tuple as
/// numpy's repr writes it ("(2, 3)", "(6,)", "()"), '<f8', C order.
std::vector<int64_t> parseNpyHeader(const std::string &header, const std::string &name) {
  if (header.find('\0') != std::string::npos)
    fail(name, "malformed .npy header: a NUL byte at offset " + std::to_string(header.find('\0')));
  HeaderParser hp{header, name};
  std::string descr;
  bool haveDescr = false, haveOrder = false, haveShape = false, fortran = false;
  std::vector<int64_t> shape;
  auto once = [&](bool &have, const std::string &key) {
    if (have) fail(name, "malformed .npy header: key '" + key + "' given twice");
    have = true;
  };
  hp.expect('{');
  while (!hp.eat('}')) {
    std::string key = hp.str();
    hp.expect(':');
    if (key == "descr") {
      once(haveDescr, key);
      descr = hp.str();
    } else if (key == "fortran_order") {
      once(haveOrder, key);
      std::string w = hp.word();
      if (w != "True" && w != "False") fail(name, "malformed .npy header: fortran_order is '" + w + "'");
      fortran = w == "True";
    } else if (key == "shape") {
      once(haveShape, key);
      hp.expect('(');
      bool comma = false;
      while (!hp.eat(')')) {
        hp.ws();
        // The entry as written, up to the next ',' or ')' (for the message).
        const size_t b = hp.i, e = std::min(header.find_first_of(",)", b), header.size());
        std::string shown = header.substr(b, e - b);
        while (!shown.empty() && std::isspace(static_cast<unsigned char>(shown.back()))) shown.pop_back();
        std::string w = hp.word();
        if (w.empty() || w.size() > 18 || w != shown || (w.size() > 1 && w[0] == '0') ||
            !std::all_of(w.begin(), w.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
          fail(name, "malformed .npy header: bad shape entry '" + ir::text::clipForMessage(shown) +
                         "' (a non-negative integer without sign or leading zeros) in " +
                         ir::text::clipForMessage(header, 200));
        shape.push_back(std::stoll(w));
        comma = hp.eat(',');
        if (!comma) {
          hp.expect(')');
          break;
        }
      }
      if (shape.size() == 1 && !comma)
        fail(name, "malformed .npy header: shape (" + std::to_string(shape[0]) +
                       ") is not a tuple; a 1-d shape is written (" + std::to_string(shape[0]) + ",)");
    } else {
      fail(name, "malformed .npy header: unknown key '" + ir::text::clipForMessage(key) + "'");
    }
    if (!hp.eat(',')) {
      hp.expect('}');
      break;
    }
  }
  if (!haveDescr || !haveOrder || !haveShape)
    fail(name, "malformed .npy header (needs descr, fortran_order and shape): " +
                   ir::text::clipForMessage(header, 200));
  if (descr != "<f8") {
    std::string why = descr == ">f8" ? "big-endian float64" : "dtype '" + ir::text::clipForMessage(descr) + "'";
    fail(name, "unsupported " + why + "; tessel reads little-endian float64 ('<f8') only "
                                      "(convert with arr.astype('<f8'))");
  }
  if (fortran)
    fail(name, "fortran_order is True; tessel reads C-order arrays only "
               "(save np.ascontiguousarray(arr))");
  if (shape.size() > static_cast<size_t>(ir::kMaxRank))
    fail(name, "rank " + std::to_string(shape.size()) + " exceeds the limit of " +
                   std::to_string(ir::kMaxRank));
  // Element count with an overflow guard (at most 2^40 elements).
  const int64_t limit = int64_t(1) << 40;
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (d != 0 && numel > limit / d)
      fail(name, "shape " + ir::shapeStr(shape) + " is too large");
    numel *= d;
  }
  return shape;
}

int64_t numelOf(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

} // namespace

ir::Tensor decodeNpy(const std::string &bytes, const std::string &name) {
  size_t hstart = 0;
  const size_t dstart = npyDataStart(bytes, name, hstart);
  if (dstart > bytes.size())
    fail(name, "truncated .npy header (needs " + std::to_string(dstart - hstart) + " bytes, file has " +
                   std::to_string(bytes.size() - hstart) + ")");
  const std::vector<int64_t> shape = parseNpyHeader(bytes.substr(hstart, dstart - hstart), name);
  const int64_t numel = numelOf(shape);
  size_t have = bytes.size() - dstart;
  size_t need = static_cast<size_t>(numel) * 8;
  if (have < need)
    fail(name, "truncated data: shape " + ir::shapeStr(shape) + " needs " + std::to_string(need) +
                   " bytes, file has " + std::to_string(have));
  if (have > need)
    fail(name, "file has " + std::to_string(have - need) + " bytes after the data of shape " +
                   ir::shapeStr(shape));
  ir::Tensor t(ir::Type(shape), std::vector<double>(static_cast<size_t>(numel)));
  if (need) std::memcpy(t.data.data(), bytes.data() + dstart, need);
  return t;
}

ir::Tensor readNpy(const std::string &path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail(path, "cannot read: it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open file");
  // Streamed: the magic and header first (a file that is not .npy, /dev/zero included,
  // fails on its first bytes), then exactly the bytes the shape needs, checked against
  // the memory this process may take before the tensor is allocated.
  auto readUpTo = [&](std::string &buf, size_t n) {
    const size_t at = buf.size();
    buf.resize(at + n);
    in.read(buf.data() + at, static_cast<std::streamsize>(n));
    buf.resize(at + static_cast<size_t>(std::max<std::streamsize>(0, in.gcount())));
    if (in.bad()) fail(path, "cannot read file");
  };
  std::string head;
  readUpTo(head, 12);
  size_t hstart = 0;
  const size_t dstart = npyDataStart(head, path, hstart);
  if (dstart > head.size()) readUpTo(head, dstart - head.size());
  if (dstart > head.size())
    fail(path, "truncated .npy header (needs " + std::to_string(dstart - hstart) + " bytes, file has " +
                   std::to_string(head.size() - hstart) + ")");
  const std::vector<int64_t> shape = parseNpyHeader(head.substr(hstart, dstart - hstart), path);
  const int64_t numel = numelOf(shape);
  const int64_t need = numel * 8;
  const bool regular = std::filesystem::is_regular_file(path, ec);
  const int64_t fileSize = regular ? static_cast<int64_t>(std::filesystem::file_size(path, ec)) : -1;
  const int64_t have = fileSize >= 0 ? fileSize - static_cast<int64_t>(head.size()) : -1;
  if (have >= 0 && have < need)
    fail(path, "truncated data: shape " + ir::shapeStr(shape) + " needs " + std::to_string(need) +
                   " bytes, file has " + std::to_string(have));
  if (have > need)
    fail(path, "file has " + std::to_string(have - need) + " bytes after the data of shape " +
                   ir::shapeStr(shape));
  const MemoryLimit mem = memoryLimit();
  if (need > mem.bytes)
    fail(path, "shape " + ir::shapeStr(shape) + " needs " + std::to_string(need) + " bytes, more than " +
                   mem.what);
  ir::Tensor t(ir::Type(shape), std::vector<double>(static_cast<size_t>(numel)));
  in.read(reinterpret_cast<char *>(t.data.data()), static_cast<std::streamsize>(need));
  if (in.bad()) fail(path, "cannot read file");
  if (in.gcount() < need)
    fail(path, "truncated data: shape " + ir::shapeStr(shape) + " needs " + std::to_string(need) +
                   " bytes, file has " + std::to_string(in.gcount()));
  if (in.peek() != std::char_traits<char>::eof())
    fail(path, "the file has bytes after the data of shape " + ir::shapeStr(shape));
  return t;
}

std::string encodeNpy(const ir::Tensor &t) {
  std::string shape = "(";
  for (size_t i = 0; i < t.type.shape.size(); ++i) {
    if (i) shape += ", ";
    shape += std::to_string(t.type.shape[i]);
  }
  if (t.type.shape.size() == 1) shape += ",";
  shape += ")";
  std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + dict.size() + 1;
  size_t padded = (total + 63) / 64 * 64;
  dict.append(padded - total, ' ');
  dict += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(1);
  out += static_cast<char>(0);
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>((dict.size() >> 8) & 0xff);
  out += dict;
  size_t n = t.data.size() * 8;
  size_t at = out.size();
  out.resize(at + n);
  if (n) std::memcpy(out.data() + at, t.data.data(), n);
  return out;
}

void writeNpy(const std::string &path, const ir::Tensor &t) {
  std::ofstream out(path, std::ios::binary);
  if (!out) fail(path, "cannot open for writing");
  std::string bytes = encodeNpy(t);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) fail(path, "cannot write file");
}

} // namespace tessel::rt
