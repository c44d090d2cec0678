// Must not compile (ctest "attr-typo-does-not-compile" checks the diagnostic): svd_topk
// has no attribute "kk" in ir/ops.def, so ir::attr refuses it at compile time.
#include "ir/OpAttrs.h"

int64_t misspelt(const tessel::ir::Op &op) { return tessel::ir::attr<tessel::ir::OpKind::SvdTopk, "kk">(op); }
