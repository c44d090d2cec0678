//===- runtime/MemoryLimit.h - The memory this process may still take -----------===//
//
// Every size check before an allocation (prepare's values and plan, iota tables, input
// files, .npy data) compares with the memory this process can really use, not just the
// machine's: the smallest headroom of
//   * the machine's physical memory (sysconf),
//   * the address-space limit (RLIMIT_AS, `ulimit -v`) less the address space in use,
//   * the data-segment limit (RLIMIT_DATA) less the data segment in use,
//   * the cgroup's memory.max (v2) or memory.limit_in_bytes (v1) less its usage,
// so a job under `ulimit -v 4000000` or a container limit gets an error naming the
// need and the limit before it allocates, instead of std::bad_alloc or the OOM killer.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>

namespace tessel::rt {

struct MemoryLimit {
  int64_t bytes = INT64_MAX; ///< what may still be allocated (INT64_MAX: no limit known)
  std::string what;          ///< e.g. "this machine's 23.5 GiB of memory", "the address-space limit (ulimit -v) of 4 GiB, 3.61 GiB of it free"
};

/// The tightest of the limits above, read now (a few /proc and /sys reads).
MemoryLimit memoryLimit();

/// "3.2 GiB" (three significant digits).
std::string formatGiB(int64_t bytes);

/// The whole of file `path` ("-": stdin), read in 1 MiB chunks and refused with a
/// tessel::Error naming the file and the limit as soon as it exceeds half of
/// memoryLimit() (a parser holds the text and what it builds from it), or 1 GiB for a
/// stream of unknown size: a 20 GB sparse file is refused by its size before a byte is
/// read, /dev/zero or an endless pipe after 1 GiB, never by std::bad_alloc. Errors start "error: cannot read 'PATH'"
/// or "error: 'PATH' is ...".
std::string readBoundedFile(const std::string &path);

} // namespace tessel::rt
