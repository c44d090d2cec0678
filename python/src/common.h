//===- python/src/common.h - Shared by the parts of the extension module ---------===//
//
// The extension module tessel._tessel binds the C++ libraries (ir, passes, runtime,
// frontend) for the Python package python/tessel. Its parts:
//   module.cpp   errors, Program, the transforms and passes, prepare, Engine, trg
//   tracing.cpp  the tracing front end: _Trace and Tensor, one generic op builder
//   convert.cpp  numpy arrays <-> ir::Tensor
//
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "ir/Program.h"
#include "ir/Type.h"

namespace tessel::py {

namespace nb = nanobind;

/// A program as Python sees it: immutable once made (every transform returns a new one).
struct PyProgram {
  ir::Program ir;
  /// Milliseconds of compile work (tracing, transforms, passes) that produced it, summed
  /// along the chain of transforms from its trace or parse.
  double compileMs = 0;
};

/// A numpy array (anything numpy.asarray takes: real numbers) as an ir::Tensor of the
/// same shape: float64, C order. Throws tessel::Error naming `what` for complex, object
/// or string data, or a rank above 8.
ir::Tensor tensorFromArray(nb::handle array, const std::string &what);
/// A numpy float64 array owning the tensor's data (moved, not copied).
nb::object arrayFromTensor(ir::Tensor &&t);
/// (d0, d1, ...) of a shape.
nb::tuple shapeTuple(const ir::Shape &s);
/// A shape from a Python int or sequence of ints; tessel::Error naming `what` otherwise.
std::vector<int64_t> shapeFromObject(nb::handle obj, const std::string &what);

void bindTracing(nb::module_ &m);

} // namespace tessel::py
