//===- runtime/Engine.cpp - The fixed-width engine (being written) ------------===//
#include "ir/Diagnostics.h"
#include "runtime/Runtime.h"

namespace tessel::rt {
struct Engine::Impl {
  int width;
};
Engine::Engine(int width) : impl_(std::make_unique<Impl>(Impl{width})) {}
Engine::~Engine() = default;
int Engine::width() const { return impl_->width; }
std::vector<Tensor> Engine::run(const Plan &, const std::vector<Tensor> &) {
  throw Error("error: the engine is not implemented yet");
}
std::shared_ptr<const Plan> prepare(const ir::Program &, const PrepareOptions &) {
  throw Error("error: prepare is not implemented yet");
}
} // namespace tessel::rt
