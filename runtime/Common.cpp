//===- runtime/Common.cpp - BLAS setup, input validation, op naming -----------===//
#include <cctype>
#include <mutex>
#include <string>

#include <cblas.h>

#include "ir/Diagnostics.h"
#include "ir/TextUtil.h"
#include "ir/Printer.h"
#include "runtime/Runtime.h"
#include "runtime/RuntimeInternal.h"

namespace tessel::rt {

void ensureBlasSingleThreaded() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

std::string blasInfo() {
  ensureBlasSingleThreaded();
  std::string cfg = openblas_get_config();
  while (!cfg.empty() && std::isspace(static_cast<unsigned char>(cfg.back()))) cfg.pop_back();
  int n = openblas_get_num_threads();
  if (cfg.rfind("OpenBLAS", 0) != 0) cfg = "OpenBLAS " + cfg;
  return cfg + ", " + std::to_string(n) + (n == 1 ? " thread" : " threads");
}

void validateInputs(const ir::Program &p, const std::vector<ir::Tensor> &inputs) {
  if (inputs.size() != p.inputs.size()) {
    std::string names;
    for (size_t i = 0; i < p.inputs.size(); ++i)
      names += (i ? ", %" : "%") + p.value(p.inputs[i]).name;
    throw Error("error: program " + ir::text::atName(p.name) + " takes " + std::to_string(p.inputs.size()) +
                " input(s) (" + names + "), got " + std::to_string(inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::ValueInfo &vi = p.value(p.inputs[i]);
    const ir::Tensor &t = inputs[i];
    bool typeOk = t.type == vi.type;
    if (typeOk && static_cast<int64_t>(t.data.size()) == t.type.numel()) continue;
    // Error path only: no allocation when the inputs are fine.
    std::string who = "error: input %" + vi.name + " (#" + std::to_string(i) + ")";
    if (!typeOk) throw Error(who + ": expected " + vi.type.str() + ", got " + t.type.str());
    throw Error(who + ": tensor of type " + t.type.str() + " holds " + std::to_string(t.data.size()) +
                " elements, expected " + std::to_string(t.type.numel()));
  }
}

CompareDir parseCompareDirection(const std::string &s) {
  std::string u;
  for (char c : s) u += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (u == "EQ") return CompareDir::EQ;
  if (u == "NE") return CompareDir::NE;
  if (u == "LT") return CompareDir::LT;
  if (u == "LE") return CompareDir::LE;
  if (u == "GT") return CompareDir::GT;
  if (u == "GE") return CompareDir::GE;
  throw Error("error: compare: unknown direction '" + s + "' (allowed: EQ, NE, LT, LE, GT, GE)");
}

std::string valueDisplayName(const ir::Program &p, ir::ValueId v) {
  return ir::valueRef(p, v);
}

std::string svdFailureMessage(const ir::Program &p, const ir::Op &op, int info) {
  std::string shape = p.type(op.operands[0]).str();
  if (info == kSvdNonFinite)
    return "error: " + describeOp(p, op) + ": input matrix " + shape +
           " contains NaN or inf; LAPACK dgesdd not called";
  std::string why = info > 0 ? "the divide-and-conquer iteration did not converge"
                             : "argument " + std::to_string(-info) + " had an illegal value";
  return "error: " + describeOp(p, op) + ": LAPACK dgesdd failed on " + shape +
         " (info = " + std::to_string(info) + ": " + why + ")";
}

} // namespace tessel::rt
