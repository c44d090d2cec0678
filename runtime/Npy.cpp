//===- runtime/Npy.cpp - NumPy .npy reading and writing -----------------------===//
#include "runtime/Npy.h"

#include <bit>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ir/Diagnostics.h"

namespace tessel::rt {

static_assert(std::endian::native == std::endian::little,
              "the .npy reader assumes a little-endian host");

namespace {

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

} // namespace

ir::Tensor decodeNpy(const std::string &bytes, const std::string &name) {
  static const char magic[] = "\x93NUMPY";
  if (bytes.size() < 10 || std::memcmp(bytes.data(), magic, 6) != 0)
    fail(name, "not a .npy file (missing the \\x93NUMPY magic)");
  int major = static_cast<unsigned char>(bytes[6]), minor = static_cast<unsigned char>(bytes[7]);
  size_t hlen, hstart;
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
  if (hstart + hlen > bytes.size())
    fail(name, "truncated .npy header (needs " + std::to_string(hlen) + " bytes, file has " +
                   std::to_string(bytes.size() - hstart) + ")");
  std::string header = bytes.substr(hstart, hlen);
  HeaderParser hp{header, name};
  std::string descr;
  bool haveDescr = false, haveOrder = false, haveShape = false, fortran = false;
  std::vector<int64_t> shape;
  hp.expect('{');
  while (!hp.eat('}')) {
    std::string key = hp.str();
    hp.expect(':');
    if (key == "descr") {
      descr = hp.str();
      haveDescr = true;
    } else if (key == "fortran_order") {
      std::string w = hp.word();
      if (w != "True" && w != "False") fail(name, "malformed .npy header: fortran_order is '" + w + "'");
      fortran = w == "True";
      haveOrder = true;
    } else if (key == "shape") {
      hp.expect('(');
      while (!hp.eat(')')) {
        std::string w = hp.word();
        if (w.empty() || w.size() > 18 ||
            !std::all_of(w.begin(), w.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
          fail(name, "malformed .npy header: bad shape entry '" + w + "' in " + header);
        shape.push_back(std::stoll(w));
        if (!hp.eat(',')) {
          hp.expect(')');
          break;
        }
      }
      haveShape = true;
    } else {
      fail(name, "malformed .npy header: unknown key '" + key + "'");
    }
    if (!hp.eat(',')) {
      hp.expect('}');
      break;
    }
  }
  if (!haveDescr || !haveOrder || !haveShape)
    fail(name, "malformed .npy header (needs descr, fortran_order and shape): " + header);
  if (descr != "<f8") {
    std::string why = descr == ">f8" ? "big-endian float64" : "dtype '" + descr + "'";
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
  size_t dstart = hstart + hlen;
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
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail(path, "cannot read file");
  return decodeNpy(ss.str(), path);
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
