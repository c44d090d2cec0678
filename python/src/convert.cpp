//===- python/src/convert.cpp - numpy arrays <-> ir::Tensor ----------------------===//
#include "common.h"

#include <cstring>

#include <nanobind/stl/string.h>

#include "ir/Diagnostics.h"

namespace tessel::py {

using namespace nb::literals;

namespace {
/// An integer from a Python int or numpy integer (anything with __index__), not a bool.
bool asIndex(nb::handle h, int64_t &out) {
  // Python and numpy bools have __index__ too: a shape of True is a mistake.
  if (nb::isinstance<nb::bool_>(h) || std::string(Py_TYPE(h.ptr())->tp_name).find("bool") != std::string::npos ||
      !PyIndex_Check(h.ptr()))
    return false;
  nb::object i = nb::steal(PyNumber_Index(h.ptr()));
  if (!i.is_valid()) throw nb::python_error();
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  if (overflow != 0)
    throw Error("integer " + nb::cast<std::string>(nb::repr(h)) + " is out of the int64 range");
  out = static_cast<int64_t>(v);
  return true;
}
} // namespace

ir::Tensor tensorFromArray(nb::handle array, const std::string &what) {
  using Arr = nb::ndarray<const double, nb::c_contig, nb::device::cpu>;
  // numpy.ndarray, looked up once (engine.run converts every input on every call).
  static PyObject *ndarrayType =
      nb::object(nb::module_::import_("numpy").attr("ndarray")).release().ptr();
  nb::object obj = nb::borrow(array);
  Arr arr;
  // Only numpy arrays go to nanobind's reader directly; anything else (numbers, lists,
  // numpy scalars, whose buffers may lack strides) through numpy.asarray first.
  const bool isArray = PyObject_IsInstance(obj.ptr(), ndarrayType) == 1;
  if (!isArray || !nb::try_cast(obj, arr, /*convert=*/false)) {
    nb::module_ np = nb::module_::import_("numpy");
    // numpy's conversion, limited to real numbers: bool, integers and floats become
    // float64; complex, object and string arrays are an error (no silent truncation).
    nb::object a;
    try {
      a = np.attr("asarray")(obj);
    } catch (const nb::python_error &e) {
      throw Error(what + ": not convertible to a numpy array (" + std::string(e.what()) + ")");
    }
    const std::string kind = nb::cast<std::string>(a.attr("dtype").attr("kind"));
    if (kind != "b" && kind != "i" && kind != "u" && kind != "f")
      throw Error(what + ": expected real numbers (float64, or bool/int/float converted to "
                         "float64), got an array of dtype " +
                  nb::cast<std::string>(a.attr("dtype").attr("name")));
    // (not ascontiguousarray, which turns a 0-d array into shape (1,))
    a = np.attr("asarray")(a, "dtype"_a = np.attr("float64"), "order"_a = "C");
    if (!nb::try_cast(a, arr, false))
      throw Error(what + ": could not read the array as C-contiguous float64");
    obj = a;
  }
  if (arr.ndim() > 8)
    throw Error(what + ": rank " + std::to_string(arr.ndim()) + " is above tessel's limit of 8");
  ir::Shape shape;
  for (size_t i = 0; i < arr.ndim(); ++i) shape.push_back(static_cast<int64_t>(arr.shape(i)));
  ir::Tensor t(ir::Type(shape), std::vector<double>(arr.size()));
  if (arr.size()) std::memcpy(t.data.data(), arr.data(), arr.size() * sizeof(double));
  return t;
}

nb::object arrayFromTensor(ir::Tensor &&t) {
  auto *data = new std::vector<double>(std::move(t.data));
  nb::capsule owner(data, [](void *p) noexcept { delete static_cast<std::vector<double> *>(p); });
  std::vector<size_t> shape(t.type.shape.begin(), t.type.shape.end());
  nb::ndarray<nb::numpy, double> arr(data->data(), shape.size(), shape.data(), owner);
  return nb::cast(arr, nb::rv_policy::reference);
}

nb::tuple shapeTuple(const ir::Shape &s) {
  nb::list l;
  for (int64_t d : s) l.append(d);
  return nb::tuple(l);
}

std::vector<int64_t> shapeFromObject(nb::handle obj, const std::string &what) {
  int64_t v = 0;
  if (asIndex(obj, v)) return {v};
  std::vector<int64_t> s;
  nb::object it = nb::steal(PyObject_GetIter(obj.ptr()));
  if (!it.is_valid()) {
    PyErr_Clear();
    throw Error(what + ": expected an int or a sequence of ints, got " +
                nb::cast<std::string>(nb::repr(obj)));
  }
  for (nb::handle h : nb::borrow<nb::iterable>(obj)) {
    if (!asIndex(h, v))
      throw Error(what + ": expected a sequence of ints, got the element " +
                  nb::cast<std::string>(nb::repr(h)) + " in " + nb::cast<std::string>(nb::repr(obj)));
    s.push_back(v);
  }
  return s;
}

} // namespace tessel::py
