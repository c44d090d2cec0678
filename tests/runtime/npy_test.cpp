// .npy reading and writing: golden bytes, round trips, every rejected variant.
#include <cstring>
#include <filesystem>
#include <fstream>

#include <doctest/doctest.h>

#include "ir/Diagnostics.h"
#include "runtime/Npy.h"

using namespace tessel;
using ir::Tensor;
using ir::Type;

namespace {

/// A .npy file as numpy writes it: header dict padded to 64 bytes with '\n'.
std::string npyBytes(const std::string &dict, int major, const std::string &data) {
  std::string h = dict;
  size_t pre = major == 1 ? 10 : 12;
  size_t total = pre + h.size() + 1;
  h.append((total + 63) / 64 * 64 - total, ' ');
  h += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  if (major == 1) {
    out += static_cast<char>(h.size() & 0xff);
    out += static_cast<char>(h.size() >> 8);
  } else {
    for (int k = 0; k < 4; ++k) out += static_cast<char>((h.size() >> (8 * k)) & 0xff);
  }
  return out + h + data;
}

std::string doubles(std::initializer_list<double> v) {
  std::string s(v.size() * 8, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

} // namespace

TEST_CASE("npy: decode numpy-written headers, versions 1.0 and 2.0") {
  auto t = rt::decodeNpy(
      npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", 1,
               doubles({1, 2, 3, 4, 5, 6})),
      "a.npy");
  CHECK(t.type == Type({2, 3}));
  CHECK(t.data == std::vector<double>{1, 2, 3, 4, 5, 6});
  auto v = rt::decodeNpy(
      npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", 2, doubles({-1, 0.5, 7})),
      "b.npy");
  CHECK(v.type == Type({3}));
  CHECK(v.data[1] == 0.5);
  auto s = rt::decodeNpy(npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (), }", 1,
                                  doubles({0.4})),
                         "c.npy");
  CHECK(s.type.rank() == 0);
  CHECK(s.data == std::vector<double>{0.4});
  auto e = rt::decodeNpy(
      npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (0, 4), }", 1, ""), "d.npy");
  CHECK(e.type == Type({0, 4}));
}

TEST_CASE("npy: encode matches numpy's layout and round-trips") {
  Tensor t(Type({2, 2}), {1.5, -2, 3, 1e-300});
  std::string bytes = rt::encodeNpy(t);
  CHECK(bytes.size() % 64 == 32); // header padded to a multiple of 64 + 32 data bytes
  CHECK(bytes.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
  CHECK(bytes.find("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }") == 10);
  CHECK(bytes[bytes.size() - 33] == '\n');
  CHECK(rt::decodeNpy(bytes, "x").data == t.data);
  Tensor one(Type({3}), {1, 2, 3});
  CHECK(rt::encodeNpy(one).find("'shape': (3,)") != std::string::npos);
  CHECK(rt::encodeNpy(Tensor::scalar(2)).find("'shape': ()") != std::string::npos);
  auto dir = std::filesystem::temp_directory_path() / "tessel_npy_test";
  std::filesystem::create_directories(dir);
  auto path = (dir / "t.npy").string();
  rt::writeNpy(path, t);
  auto back = rt::readNpy(path);
  CHECK(back.type == t.type);
  CHECK(back.data == t.data);
  std::filesystem::remove_all(dir);
}

TEST_CASE("npy: errors name the file and the problem") {
  auto bad = [](const std::string &bytes, const char *what) {
    CHECK_THROWS_WITH_AS(rt::decodeNpy(bytes, "in.npy"), doctest::Contains(what), Error);
    CHECK_THROWS_WITH_AS(rt::decodeNpy(bytes, "in.npy"), doctest::Contains("in.npy"), Error);
  };
  bad("hello world, not numpy", "magic");
  bad(npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 1, doubles({1})),
      "dtype '<f4'");
  bad(npyBytes("{'descr': '>f8', 'fortran_order': False, 'shape': (1,), }", 1, doubles({1})),
      "big-endian");
  bad(npyBytes("{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }", 1, doubles({1})),
      "dtype '<i8'");
  bad(npyBytes("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 2), }", 1,
               doubles({1, 2, 3, 4})),
      "fortran_order");
  bad(npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", 1, doubles({1, 2})),
      "truncated data");
  bad(npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", 1, doubles({1, 2})),
      "bytes after the data");
  bad(npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1073741824, 1073741824, 64), }",
               1, ""),
      "too large");
  bad(npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", 1,
               doubles({1})),
      "rank 9");
  bad(npyBytes("{'descr': '<f8', 'shape': (1,), }", 1, doubles({1})), "malformed");
  bad(npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (-1,), }", 1, ""), "bad shape");
  std::string v9 = npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", 1, doubles({1}));
  v9[6] = 9;
  bad(v9, "version 9.0");
  std::string cut = npyBytes("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", 1, "");
  bad(cut.substr(0, 30), "truncated .npy header");
  CHECK_THROWS_WITH_AS(rt::readNpy("/nonexistent/dir/x.npy"),
                       doctest::Contains("/nonexistent/dir/x.npy: cannot open"), Error);
}
