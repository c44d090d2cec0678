// Checkpoint policies: the `checkpoint` pass and splitVjp.
//  * gradients are bitwise identical under store / save-svd / recompute (reference
//    evaluator and engine), and match finite differences;
//  * clones are remat ops (Op::remat), svds are never recomputed under save-svd;
//  * peak live bytes after prepare are ordered recompute <= save-svd <= store on a chain
//    of svd steps; staged residual bytes likewise.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "ir/Builder.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/Checkpoint.h"
#include "passes/Grad.h"
#include "runtime/Runtime.h"

using namespace tessel;
using namespace tessel::passes;
using ir::OpKind;
using ir::Tensor;
using ir::Type;
using ir::ValueId;

namespace {

/// Deterministic pseudo-random fill in [-1, 1).
std::vector<double> fill(size_t n, uint64_t seed) {
  std::vector<double> v(n);
  uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  for (double &x : v) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x = double(s >> 11) / double(1ULL << 53) * 2.0 - 1.0;
  }
  return v;
}

/// A chain of `steps` SVD steps on an n×n matrix (a toy TRG):
///   x0 = exp(beta * a)
///   step: U, s, Vt = svd(x); S = U * sqrt(s); y = S S^T + C_k; m = max|y|;
///         x' = y / m; acc += log m
///   loss = acc + sum(x_K * W)
ir::Program svdChain(int64_t n, int steps) {
  ir::Program p;
  p.name = "chain";
  ir::Builder b(p);
  ValueId a = p.addInput("a", Type({n, n}));
  ValueId beta = p.addInput("beta", Type({}));
  b.setLoc("init");
  ValueId x = b.unary(OpKind::Exp, b.mul(a, b.broadcastScalar(beta, {n, n})));
  p.setName(x, "x0");
  ValueId acc = ir::kNoValue;
  for (int k = 0; k < steps; ++k) {
    std::string tag = std::to_string(k + 1);
    b.setLoc("step " + tag);
    auto usv = b.svd(x);
    p.setName(usv[0], "U" + tag);
    p.setName(usv[1], "s" + tag);
    p.setName(usv[2], "Vt" + tag);
    ValueId r = b.unary(OpKind::Sqrt, usv[1]);
    ValueId S = b.mul(usv[0], b.broadcastInDim(r, {n, n}, {1}));
    ValueId y = b.dotGeneral(S, S, {}, {}, {1}, {1});
    Tensor c(Type({n, n}), fill(size_t(n * n), 100 + k));
    for (double &v : c.data) v *= 0.3;
    y = b.add(y, b.constant(c));
    ValueId m = b.reduceMax(b.unary(OpKind::Abs, y), {0, 1});
    x = b.div(y, b.broadcastScalar(m, {n, n}));
    p.setName(x, "x" + tag);
    ValueId lm = b.unary(OpKind::Log, m);
    acc = acc == ir::kNoValue ? lm : b.add(acc, lm);
  }
  b.setLoc("closure");
  ValueId w = b.constant(Tensor(Type({n, n}), fill(size_t(n * n), 7)));
  ValueId loss = b.add(acc, b.reduceSum(b.mul(x, w), {0, 1}));
  p.setName(loss, "loss");
  p.addOutput(loss);
  ir::verifyOrThrow(p);
  return p;
}

std::vector<Tensor> chainInputs(int64_t n, double beta) {
  Tensor a(Type({n, n}), fill(size_t(n * n), 3));
  return {a, Tensor::scalar(beta)};
}

bool bitwiseEqual(const Tensor &x, const Tensor &y) {
  return x.type == y.type && x.data.size() == y.data.size() &&
         std::memcmp(x.data.data(), y.data.data(), x.data.size() * sizeof(double)) == 0;
}

int countKind(const ir::Program &p, OpKind k) {
  int c = 0;
  for (const ir::Op &op : p.ops) c += op.kind == k;
  return c;
}

/// Recomputed (remat) ops of kind k.
int countRemat(const ir::Program &p, OpKind k) {
  int c = 0;
  for (const ir::Op &op : p.ops) c += op.remat && op.kind == k;
  return c;
}

ir::Program checkpointed(const ir::Program &g, RematPolicy pol, int64_t regions,
                         CheckpointStats *st = nullptr) {
  ir::Program h = g;
  CheckpointOptions o;
  o.policy = pol;
  o.regions = regions;
  runCheckpoint(h, o, st);
  ir::verifyOrThrow(h);
  return h;
}

} // namespace

TEST_CASE("checkpoint: gradients bitwise identical under store, save-svd and recompute "
          "(reference evaluator), and equal to finite differences") {
  const int64_t n = 5;
  const int steps = 4;
  ir::Program f = svdChain(n, steps);
  GradOptions go;
  go.wrt = {"beta", "a"};
  ir::Program g = grad(f, go);
  std::vector<Tensor> in = chainInputs(n, 0.7);
  std::vector<Tensor> ref = rt::evaluateReference(g, in);
  REQUIRE(ref.size() == 3);

  for (RematPolicy pol : allRematPolicies())
    for (int64_t regions : {int64_t(0), int64_t(1), int64_t(steps), int64_t(1000)}) {
      CAPTURE(rematPolicyName(pol));
      CAPTURE(regions);
      CheckpointStats st;
      ir::Program h = checkpointed(g, pol, regions, &st);
      std::vector<Tensor> out = rt::evaluateReference(h, in);
      REQUIRE(out.size() == ref.size());
      for (size_t i = 0; i < out.size(); ++i) {
        CAPTURE(i);
        CHECK(bitwiseEqual(out[i], ref[i]));
      }
      // Every clone is tagged, originals are not; svds are never recomputed under
      // save-svd; store recomputes the broadcasts (β's, then per step those of sqrt(s)
      // and of the normalisation m) and the |T| of each normalisation (a cheap unary op
      // of a saved value), nothing else.
      int remat = 0;
      for (const ir::Op &op : h.ops) {
        bool tagged = op.remat;
        remat += tagged;
        if (tagged && pol == RematPolicy::SaveSvd) CHECK(op.kind != OpKind::Svd);
        if (tagged && pol == RematPolicy::Store)
          CHECK((op.kind == OpKind::BroadcastInDim || op.kind == OpKind::Abs));
      }
      CHECK(remat == st.recomputedOps);
      CHECK(int64_t(h.ops.size()) == int64_t(g.ops.size()) + st.recomputedOps);
      if (pol == RematPolicy::Store) {
        CHECK(st.recomputedOps == 3 * steps + 1);
        CHECK(countRemat(h, OpKind::Abs) == steps);
      }
      else if (regions <= steps) CHECK(st.recomputedOps > 0);
      // One region per forward op: every value a later op reads is a region input.
      if (regions == 1000) CHECK(st.regions == st.forwardOps);
      // Each forward op is recomputed at most once (at most one extra forward).
      CHECK(st.recomputedOps <= st.forwardOps);
      if (pol == RematPolicy::Recompute && regions == 1)
        CHECK(countKind(h, OpKind::Svd) == 2 * steps); // every svd recomputed
      if (pol == RematPolicy::SaveSvd) CHECK(countKind(h, OpKind::Svd) == steps);
    }

  // Finite differences on the recompute program: d loss / d beta.
  ir::Program h = checkpointed(g, RematPolicy::Recompute, 0);
  size_t gbIndex = 0;
  for (size_t i = 0; i < h.outputs.size(); ++i)
    if (h.outputName(i) == "grad_beta") gbIndex = i;
  REQUIRE(gbIndex > 0);
  double gb = rt::evaluateReference(h, in)[gbIndex].data[0];
  const double eps = 1e-6;
  double lp = rt::evaluateReference(f, chainInputs(n, 0.7 + eps))[0].data[0];
  double lm = rt::evaluateReference(f, chainInputs(n, 0.7 - eps))[0].data[0];
  double fd = (lp - lm) / (2 * eps);
  CHECK(std::isfinite(gb));
  CHECK(std::fabs(gb - fd) <= 1e-6 * std::max(1.0, std::fabs(fd)));
}

TEST_CASE("checkpoint: recompute keeps only region inputs; clones sit before their first use") {
  ir::Program f = svdChain(4, 3);
  GradOptions go;
  go.wrt = {"beta"};
  ir::Program g = grad(f, go);
  CheckpointStats st;
  ir::Program h = checkpointed(g, RematPolicy::Recompute, 1, &st);
  CHECK(st.regions == 1);
  // With one region, the backward reads no forward value except inputs and the loss.
  std::vector<char> fwd(h.ops.size(), 0);
  {
    std::vector<ValueId> stack{h.outputs[0]};
    while (!stack.empty()) {
      ValueId v = stack.back();
      stack.pop_back();
      int d = h.values[v].def;
      if (d < 0 || fwd[d]) continue;
      fwd[d] = 1;
      for (ValueId u : h.ops[d].operands) stack.push_back(u);
    }
  }
  for (size_t i = 0; i < h.ops.size(); ++i) {
    if (fwd[i]) continue;
    for (ValueId u : h.ops[i].operands) {
      int d = h.values[u].def;
      CAPTURE(ir::valueRef(h, u));
      CHECK((d < 0 || !fwd[d] || u == h.outputs[0]));
    }
  }
  // The first clone comes after the last forward op and is named after its original.
  size_t lastFwd = 0, firstClone = h.ops.size();
  for (size_t i = 0; i < h.ops.size(); ++i) {
    if (fwd[i]) lastFwd = i;
    if (h.ops[i].remat && firstClone == h.ops.size())
      firstClone = i;
  }
  CHECK(firstClone > lastFwd);
  CHECK(h.lookup("U3.remat") != ir::kNoValue);
  CHECK(h.values[h.lookup("U3.remat")].type == Type({4, 4}));
  const ir::Op &u3 = h.ops[h.values[h.lookup("U3.remat")].def];
  CHECK(u3.remat);
  CHECK(u3.loc == "step 3");
  CHECK(st.residuals == 2); // a, beta (the loss is not read by the backward)
}

TEST_CASE("checkpoint: errors name the problem") {
  ir::Program f = svdChain(3, 1);
  ir::Program h = f;
  CHECK_THROWS_WITH_AS(runCheckpoint(h, {}), doctest::Contains("no grad(...) signature"), Error);
  // Output names carry no meaning: an output named grad_x does not make a gradient program.
  h.setName(h.outputs[0], "grad_x");
  CHECK_THROWS_WITH_AS(runCheckpoint(h, {}), doctest::Contains("no grad(...) signature"), Error);
  GradOptions go;
  go.keepOutputs = false;
  ir::Program g = grad(f, go);
  CHECK_THROWS_WITH_AS(runCheckpoint(g, {}), doctest::Contains("keep-outputs=true"), Error);
  CHECK_THROWS_AS(parseRematPolicy("lazy"), Error);
  CHECK(parseRematPolicy("save-svd") == RematPolicy::SaveSvd);
}

TEST_CASE("splitVjp: staged forward/backward give the whole-program gradients bitwise; "
          "residuals ordered recompute < save-svd < store") {
  const int64_t n = 5;
  ir::Program f = svdChain(n, 3);
  GradOptions go;
  go.wrt = {"beta"};
  ir::Program g = grad(f, go);
  std::vector<Tensor> in = chainInputs(n, 0.4);
  std::vector<Tensor> whole = rt::evaluateReference(g, in);

  int64_t bytes[3] = {0, 0, 0};
  for (RematPolicy pol : allRematPolicies()) {
    CAPTURE(rematPolicyName(pol));
    ForwardBackward fb = splitVjp(f, go, pol);
    CHECK(fb.numPrimalOutputs == 1);
    CHECK(fb.numCotangents == 0);
    CHECK(fb.backward.outputs.size() == 1);
    CHECK(fb.backward.outputName(0) == "grad_beta");
    std::vector<Tensor> fo = rt::evaluateReference(fb.forward, in);
    REQUIRE(fo.size() == fb.forward.outputs.size());
    CHECK(bitwiseEqual(fo[0], whole[0]));
    std::vector<Tensor> bo =
        rt::evaluateReference(fb.backward, fb.backwardInputs(in, fo, {}));
    REQUIRE(bo.size() == 1);
    CHECK(bitwiseEqual(bo[0], whole[1]));
    for (const Residual &r : fb.residuals) {
      CAPTURE(r.name);
      CHECK(r.bytes == r.type.bytes());
      CHECK(((r.forwardInput >= 0) != (r.forwardOutput >= 0)));
      // The origin is the defining op (or the input) of the residual, with its names.
      if (r.forwardInput >= 0) {
        CHECK(r.origin == "input %" + r.name);
      } else {
        CHECK(r.origin.find(" = ") != std::string::npos);
        // One of the defining op's results is the residual itself (whole names).
        std::string results = ", " + r.origin.substr(0, r.origin.find(" = ")) + ",";
        CHECK(results.find(", %" + r.name + ",") != std::string::npos);
      }
    }
    int bwdSvds = countKind(fb.backward, OpKind::Svd);
    switch (pol) {
    case RematPolicy::Store:
      CHECK(bwdSvds == 0);
      // Only broadcasts and |T| are redone, from their saved operands (smaller, or T
      // itself, which the backward reads anyway).
      CHECK(fb.recomputedOps > 0);
      for (const ir::Op &op : fb.backward.ops)
        if (op.remat) CHECK((op.kind == OpKind::BroadcastInDim || op.kind == OpKind::Abs));
      for (const Residual &r : fb.residuals) {
        CHECK(r.originOp != "broadcast_in_dim");
        CHECK(r.originOp != "abs");
      }
      bytes[2] = fb.residualBytes();
      break;
    case RematPolicy::SaveSvd:
      CHECK(bwdSvds == 0);
      CHECK(fb.recomputedOps > 0);
      for (const Residual &r : fb.residuals)
        CHECK((r.originOp == "svd" || r.originOp == "input"));
      bytes[1] = fb.residualBytes();
      break;
    case RematPolicy::Recompute:
      CHECK(bwdSvds == 3);
      for (const Residual &r : fb.residuals) CHECK(r.originOp == "input");
      bytes[0] = fb.residualBytes();
      break;
    }
    std::string table = fb.describeResiduals();
    CHECK(table.find(std::string("under policy ") + rematPolicyName(pol)) != std::string::npos);
  }
  CHECK(bytes[0] < bytes[1]);
  CHECK(bytes[1] < bytes[2]);

  // On the engine, the staged gradients are bitwise equal across the policies too.
  rt::Engine eng(1);
  std::vector<Tensor> engWhole = eng.run(*rt::prepare(g), in);
  for (RematPolicy pol : allRematPolicies()) {
    CAPTURE(rematPolicyName(pol));
    ForwardBackward fb = splitVjp(f, go, pol);
    std::vector<Tensor> fo = eng.run(*rt::prepare(fb.forward), in);
    std::vector<Tensor> bo = eng.run(*rt::prepare(fb.backward), fb.backwardInputs(in, fo, {}));
    CHECK(bitwiseEqual(fo[0], engWhole[0]));
    CHECK(bitwiseEqual(bo[0], engWhole[1]));
  }
  // recompute: the residuals are just the forward's inputs (a, beta).
  CHECK(bytes[0] == n * n * 8 + 8);
}

TEST_CASE("splitVjp: vjp cotangents come after the residuals") {
  const int64_t n = 4;
  ir::Program f = svdChain(n, 2);
  GradOptions go;
  go.wrt = {"a"};
  go.vjp = true;
  ir::Program g = grad(f, go);
  std::vector<Tensor> in = chainInputs(n, 0.5);
  Tensor ct = Tensor::scalar(2.5);
  std::vector<Tensor> gin = in;
  gin.push_back(ct);
  std::vector<Tensor> whole = rt::evaluateReference(g, gin);
  for (RematPolicy pol : allRematPolicies()) {
    CAPTURE(rematPolicyName(pol));
    ForwardBackward fb = splitVjp(f, go, pol);
    CHECK(fb.numCotangents == 1);
    CHECK(fb.backward.inputs.size() == fb.residuals.size() + 1);
    std::vector<Tensor> fo = rt::evaluateReference(fb.forward, in);
    std::vector<Tensor> bo = rt::evaluateReference(fb.backward, fb.backwardInputs(in, fo, {ct}));
    REQUIRE(bo.size() == 1);
    CHECK(bitwiseEqual(bo[0], whole[1]));
    CHECK_THROWS_AS(fb.backwardInputs(in, fo, {}), Error);
  }
}

TEST_CASE("splitGradient of grad's program is splitVjp") {
  ir::Program f = svdChain(4, 2);
  GradOptions go;
  go.wrt = {"a"};
  go.vjp = true;
  go.keepOutputs = true;
  ir::Program g = grad(f, go);
  for (RematPolicy pol : allRematPolicies()) {
    CAPTURE(rematPolicyName(pol));
    ForwardBackward a = splitVjp(f, go, pol);
    ForwardBackward b = splitGradient(g, f.outputs.size(), f.inputs.size(), pol);
    CHECK(ir::printProgram(a.forward) == ir::printProgram(b.forward));
    CHECK(ir::printProgram(a.backward) == ir::printProgram(b.backward));
    CHECK(a.describeResiduals() == b.describeResiduals());
    CHECK(a.numCotangents == b.numCotangents);
  }
  CHECK_THROWS_AS(splitGradient(g, g.outputs.size() + 1, f.inputs.size(), RematPolicy::Store),
                  Error);
}

TEST_CASE("checkpoint: engine gradients bitwise identical across policies and widths; peak "
          "live bytes ordered recompute <= save-svd <= store") {
  const int64_t n = 16;
  const int steps = 6;
  ir::Program f = svdChain(n, steps);
  GradOptions go;
  go.wrt = {"beta"};
  ir::Program g = grad(f, go);
  std::vector<Tensor> in = chainInputs(n, 0.3);

  std::vector<Tensor> first;
  int64_t peak[3] = {0, 0, 0};
  rt::Engine e1(1), e2(2);
  for (RematPolicy pol : allRematPolicies()) {
    CAPTURE(rematPolicyName(pol));
    ir::Program h = checkpointed(g, pol, 0);
    auto plan = rt::prepare(h);
    int64_t pk = rt::peakLiveBytes(*plan);
    peak[pol == RematPolicy::Recompute ? 0 : pol == RematPolicy::SaveSvd ? 1 : 2] = pk;
    std::vector<Tensor> o1 = e1.run(*plan, in);
    std::vector<Tensor> o2 = e2.run(*plan, in);
    REQUIRE(o1.size() == 2);
    CHECK(bitwiseEqual(o1[1], o2[1]));
    if (first.empty())
      first = o1;
    else
      for (size_t i = 0; i < o1.size(); ++i) CHECK(bitwiseEqual(o1[i], first[i]));
  }
  MESSAGE("peak live bytes: recompute " << peak[0] << ", save-svd " << peak[1] << ", store "
                                        << peak[2]);
  CHECK(peak[0] <= peak[1]);
  CHECK(peak[1] <= peak[2]);
  CHECK(peak[0] < peak[2]);
}

TEST_CASE("listResiduals: what the backward reads under each policy") {
  ir::Program f = svdChain(4, 2);
  GradOptions go;
  go.wrt = {"beta"};
  ir::Program g = grad(f, go);
  auto names = [](const std::vector<Residual> &rs) {
    std::vector<std::string> n;
    for (const Residual &r : rs) n.push_back(r.name);
    return n;
  };
  auto has = [](const std::vector<std::string> &v, const char *s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  std::vector<Residual> store = listResiduals(g);
  std::vector<std::string> sn = names(store);
  CHECK(has(sn, "U1"));
  CHECK(has(sn, "Vt2"));
  for (const Residual &r : store) {
    CAPTURE(r.name);
    CHECK(r.bytes == r.type.bytes());
    if (r.originOp == "input") CHECK(r.forwardInput >= 0);
    if (r.name == "U1") {
      CHECK(r.originOp == "svd");
      CHECK(r.origin == "%U1, %s1, %Vt1 = svd %x0 loc(\"step 1\")");
    }
  }
  std::vector<Residual> rec = listResiduals(checkpointed(g, RematPolicy::Recompute, 1));
  for (const Residual &r : rec) CHECK(r.originOp == "input");
  CHECK(names(rec) == std::vector<std::string>{"a", "beta"});
  std::vector<Residual> svd = listResiduals(checkpointed(g, RematPolicy::SaveSvd, 1));
  for (const Residual &r : svd) CHECK((r.originOp == "svd" || r.originOp == "input"));
  int64_t b0 = 0, b1 = 0, b2 = 0;
  for (const Residual &r : rec) b0 += r.bytes;
  for (const Residual &r : svd) b1 += r.bytes;
  for (const Residual &r : store) b2 += r.bytes;
  CHECK(b0 < b1);
  CHECK(b1 < b2);
  CHECK_THROWS_AS(listResiduals(f), Error);
}
