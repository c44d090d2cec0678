//===- runtime/Npy.h - NumPy .npy files (float64, C order) --------------------===//
//
// The NumPy format (numpy.lib.format, versions 1.0, 2.0 and 3.0): magic "\x93NUMPY",
// a version, a little-endian header length (2 bytes in 1.0, 4 bytes in 2.0/3.0), a
// Python dict literal {'descr': '<f8', 'fortran_order': False, 'shape': (..), }
// padded with spaces to a multiple of 64 bytes and ended by '\n', then the raw data.
// tessel reads and writes little-endian float64 ('<f8') in C order only.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

#include "ir/Type.h"

namespace tessel::rt {

/// Decodes the bytes of a .npy file. `name` (the file name) starts every error
/// message. Throws tessel::Error for a wrong magic or version, a malformed header, a
/// dtype other than '<f8' (big-endian, float32, integers, ...), fortran_order True,
/// a rank above 8, a shape too large, or data that is truncated or has extra bytes.
ir::Tensor decodeNpy(const std::string &bytes, const std::string &name);

/// Reads a .npy file (see decodeNpy); also an error naming the file if unreadable.
ir::Tensor readNpy(const std::string &path);

/// Encodes a tensor as a version 1.0 .npy ('<f8', C order).
std::string encodeNpy(const ir::Tensor &t);

/// Writes a tensor to `path` as .npy. Throws tessel::Error naming the file on failure.
void writeNpy(const std::string &path, const ir::Tensor &t);

} // namespace tessel::rt
