//===- runtime/MemoryLimit.cpp - The memory this process may still take ---------===//
#include "runtime/MemoryLimit.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <cctype>
#include <cerrno>

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "ir/Diagnostics.h"
#include "ir/TextUtil.h"
#include "runtime/Stats.h"

namespace tessel::rt {
namespace {

/// The first word of a small file (cgroup files), read with one pread(2) on a descriptor
/// opened at the first call and kept (-1 for a file that is not there): prepare asks for
/// the limit every time, and opening a cgroup file costs more than reading it again.
std::string firstWord(const std::string &path) {
  static std::mutex mu;
  static std::map<std::string, int> fds;
  int fd;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = fds.find(path);
    if (it != fds.end()) {
      fd = it->second;
    } else {
      fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      // Kept: a descriptor, or a file that is not there; a transient failure is retried.
      if (fd >= 0 || errno == ENOENT || errno == ENOTDIR) fds.emplace(path, fd);
    }
  }
  if (fd < 0) return "";
  char buf[64];
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return "";
  size_t end = 0;
  while (end < static_cast<size_t>(n) && !std::isspace(static_cast<unsigned char>(buf[end]))) ++end;
  return std::string(buf, end);
}

/// The first line of a file as a byte count; "max" or anything else unreadable: -1.
int64_t fileBytes(const std::string &path) {
  const std::string s = firstWord(path);
  if (s.empty() || s == "max") return -1;
  try {
    size_t used = 0;
    long long v = std::stoll(s, &used);
    return used == s.size() && v >= 0 ? static_cast<int64_t>(v) : -1;
  } catch (...) {
    return -1;
  }
}

/// This process's cgroup v2 directory under /sys/fs/cgroup ("0::/a/b" in
/// /proc/self/cgroup), or empty. Read once: a process stays in its cgroup.
const std::string &cgroupV2Dir() {
  static const std::string dir = [] {
    std::ifstream f("/proc/self/cgroup");
    std::string line;
    while (std::getline(f, line))
      if (line.rfind("0::", 0) == 0) return "/sys/fs/cgroup" + line.substr(3);
    return std::string();
  }();
  return dir;
}

void tighten(MemoryLimit &m, int64_t limit, int64_t used, const std::string &name) {
  if (limit < 0 || limit >= INT64_MAX / 2) return;
  const int64_t free = std::max<int64_t>(0, limit - std::max<int64_t>(0, used));
  if (free >= m.bytes) return;
  m.bytes = free;
  m.what = name + " of " + formatGiB(limit) + ", " + formatGiB(free) + " of it free";
}

} // namespace

std::string formatGiB(int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g GiB", static_cast<double>(bytes) / double(int64_t(1) << 30));
  return buf;
}

MemoryLimit memoryLimit() {
  MemoryLimit m;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) {
    m.bytes = static_cast<int64_t>(pages) * static_cast<int64_t>(page);
    m.what = "this machine's " + formatGiB(m.bytes) + " of memory";
  }
  rlimit r{};
  if (getrlimit(RLIMIT_AS, &r) == 0 && r.rlim_cur != RLIM_INFINITY)
    tighten(m, static_cast<int64_t>(r.rlim_cur), procStatusBytes("VmSize"),
            "the address-space limit (ulimit -v)");
  if (getrlimit(RLIMIT_DATA, &r) == 0 && r.rlim_cur != RLIM_INFINITY)
    tighten(m, static_cast<int64_t>(r.rlim_cur), procStatusBytes("VmData"),
            "the data-segment limit (ulimit -d)");
  if (const std::string &dir = cgroupV2Dir(); !dir.empty())
    tighten(m, fileBytes(dir + "/memory.max"), fileBytes(dir + "/memory.current"),
            "the cgroup's memory limit (memory.max)");
  tighten(m, fileBytes("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
          fileBytes("/sys/fs/cgroup/memory/memory.usage_in_bytes"),
          "the cgroup's memory limit (memory.limit_in_bytes)");
  return m;
}

std::string readBoundedFile(const std::string &path) {
  const std::string shown = "'" + ir::text::clipForMessage(path, 200) + "'";
  const MemoryLimit mem = memoryLimit();
  int64_t cap = mem.bytes / 2;
  auto tooLarge = [&](const std::string &size) {
    return Error("error: " + shown + " is " + size + ", more than " +
                 (cap < mem.bytes / 2 ? std::string("tessel reads from a stream of unknown size (1 GiB)")
                                      : "half of " + mem.what) +
                 " (a program or input is parsed in memory; split it or raise the limit)");
  };
  std::ifstream file;
  std::istream *in = &std::cin;
  if (path != "-") {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
      throw Error("error: cannot read " + shown + ": it is a directory");
    if (std::filesystem::is_regular_file(path, ec)) {
      const auto size = std::filesystem::file_size(path, ec);
      if (!ec && static_cast<int64_t>(std::min<uintmax_t>(size, INT64_MAX)) > cap)
        throw tooLarge(std::to_string(size) + " bytes");
    }
    file.open(path, std::ios::binary);
    if (!file) throw Error("error: cannot open " + shown);
    in = &file;
  }
  // A stream of unknown size (stdin, a pipe, a device such as /dev/zero) is read at most
  // 1 GiB: far beyond any program text, and a few seconds of reading, not minutes.
  std::error_code rc;
  if (path == "-" || !std::filesystem::is_regular_file(path, rc))
    cap = std::min<int64_t>(cap, int64_t(1) << 30);
  std::string out;
  std::string chunk(size_t(1) << 20, '\0');
  while (*in) {
    in->read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    const auto got = in->gcount();
    if (got <= 0) break;
    const int64_t need = static_cast<int64_t>(out.size()) + got;
    if (need > cap) throw tooLarge("longer than " + std::to_string(cap) + " bytes");
    // Grow by doubling but never past the cap, so old and new buffer together stay
    // within 1.5 times it.
    if (static_cast<size_t>(need) > out.capacity())
      out.reserve(static_cast<size_t>(std::min<int64_t>(cap, std::max<int64_t>(need, 2 * static_cast<int64_t>(out.capacity())))));
    out.append(chunk.data(), static_cast<size_t>(got));
  }
  if (in->bad()) throw Error("error: cannot read " + shown);
  return out;
}

} // namespace tessel::rt
