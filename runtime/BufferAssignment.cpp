//===- runtime/BufferAssignment.cpp - In-place decisions, slots, peak bytes ---===//
//
// Stage 3 of prepare (see PrepareStages.h). Two allocators share one liveness model
// (a group lives from its producer to its last reader; Group::readers is in list
// order) and one peak computation (listOrderPeakBytes):
//
//  * greedy by size with ancestor sets (TFLite's strategy), for programs of up to
//    kMaxAncestorInsts instructions: two buffers may share memory if one is entirely
//    before the other in the dependency order (no edge needed), or if
//    write-after-read edges that the critical path does not feel can order them;
//    such edges are added only when they save memory;
//  * list order for larger programs: a buffer takes the best-fitting free range of
//    the arena once the last reader (in list order) of its previous occupants has
//    run, if the write-after-read edges from them do not lengthen the critical path.
//
// Both compute in place where an operand dies at its reader: an elementwise result
// takes the operand's buffer, gesdd overwrites its operand instead of a copy (with
// list order, only if the edges from the operand's other readers are harmless too).
// Never with a value check on: the check reports whether the operands were finite,
// so they must survive the op.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <deque>
#include <iterator>
#include <limits>
#include <numeric>
#include <set>
#include <map>
#include <stdexcept>
#include <tuple>

#include "runtime/PrepareStages.h"

namespace tessel::rt::prep {
namespace {

int32_t groupOf(const Plan &P, int32_t v) { return P.values[v].group; }

/// The distinct groups an instruction reads (an operand may appear twice: x * x).
/// Group::readers lists each reader once, so liveness counts must too.
llvm::SmallVector<int32_t, 4> operandGroups(const Plan &P, const Instruction &inst) {
  llvm::SmallVector<int32_t, 4> gs;
  for (int32_t v : inst.in) {
    int32_t g = groupOf(P, v);
    if (std::find(gs.begin(), gs.end(), g) == gs.end()) gs.push_back(g);
  }
  return gs;
}

/// True if the group may be overwritten by its last reader: an arena buffer that no
/// final output copy reads, with no value check that would read it afterwards.
bool reusable(const Plan &P, const Group &g) {
  return P.options.reuseBuffers && P.options.valueCheck == ValueCheck::Off &&
         g.kind == GroupKind::Arena && !g.pinned;
}

/// The in-place decisions, made in list order, that both allocators share: a kernel
/// that may overwrite an operand (its plan's takeover(): gesdd) does so when the operand
/// dies at it (its copy temp then needs no storage), and an
/// elementwise result takes the storage of an operand of its size that dies at it.
/// An allocator says when an operand dies and gives results their storage.
class InPlaceAssigner {
protected:
  InPlaceAssigner(Plan &P, DepGraph &deps)
      : P(P), deps(deps), consumed(P.groups.size(), false), skip(P.groups.size(), false),
        inPlaceOperand(P.insts.size(), -1) {}
  virtual ~InPlaceAssigner() = default;

  Plan &P;
  DepGraph &deps;
  std::vector<bool> consumed;          ///< per group: an in-place result took its storage
  std::vector<bool> skip;              ///< per group: needs no storage
  std::vector<int32_t> inPlaceOperand; ///< per instruction: operand group its result replaced

  /// Operand group h of instruction i dies at i (and may be overwritten by it).
  virtual bool diesAt(int32_t h, int32_t i) const = 0;
  /// Instruction i takes over the storage of operand group h, which dies at i.
  virtual void tookOver(int32_t h, int32_t i) = 0;
  /// Result group g of instruction i shares the storage of operand group h.
  virtual void shareStorage(int32_t g, int32_t h, int32_t i) = 0;
  /// Result group g of instruction i gets storage of its own.
  virtual void newStorage(int32_t g, int32_t i) = 0;

  /// Gives every result of instruction i that needs arena memory its storage.
  void assignResults(int32_t i) {
    Instruction &inst = P.insts[i];
    // A kernel that may overwrite an operand dying here (gesdd) runs on it in place.
    const OperandTakeover t = std::visit([](const auto &plan) { return plan.takeover(); }, inst.plan);
    if (t.operand >= 0) {
      const int32_t h = groupOf(P, inst.in[static_cast<size_t>(t.operand)]);
      if (diesAt(h, i)) {
        inst.inPlace = true;
        if (t.temp >= 0) skip[groupOf(P, inst.out[static_cast<size_t>(t.temp)])] = true;
        tookOver(h, i);
      }
    }
    for (size_t k = 0; k < inst.out.size(); ++k) {
      const int32_t g = groupOf(P, inst.out[k]);
      const Group &G = P.groups[g];
      if (G.kind != GroupKind::Arena || skip[g] || G.elems == 0) continue;
      const int32_t h = k == 0 && inst.kernel() == Kernel::Elementwise ? dyingOperandOfSize(i, G.elems) : -1;
      if (h < 0) {
        newStorage(g, i);
        continue;
      }
      consumed[h] = true;
      inst.inPlace = true;
      inPlaceOperand[i] = h;
      tookOver(h, i);
      shareStorage(g, h, i);
    }
  }

private:
  int32_t dyingOperandOfSize(int32_t i, int64_t elems) const {
    for (int32_t v : P.insts[i].in) {
      const int32_t h = groupOf(P, v);
      if (P.groups[h].elems == elems && diesAt(h, i)) return h;
    }
    return -1;
  }
};

/// A buffer of the arena: one group, or a chain of groups computed in place.
struct Buf {
  int64_t elems = 0;
  int32_t def = -1;          ///< first writer
  std::vector<int32_t> uses; ///< writers and readers of every group in the chain
  /// The uses that are no ancestor of another use: every use has run once these have
  /// (so "all uses before i" needs only these), in list order.
  llvm::SmallVector<int32_t, 2> lastUses;
  bool pinned = false;       ///< read by a final output copy: lives to the end
  int64_t offset = 0;
};

class GreedyAllocator : InPlaceAssigner {
public:
  GreedyAllocator(Plan &P, DepGraph &deps) : InPlaceAssigner(P, deps), bufOf(P.groups.size(), -1) {}

  void run() {
    for (size_t i = 0; i < P.insts.size(); ++i) assignResults(static_cast<int32_t>(i));
    std::vector<bool> occupies(P.groups.size());
    for (size_t g = 0; g < occupies.size(); ++g)
      occupies[g] = bufOf[g] >= 0 || P.groups[g].kind == GroupKind::Output;
    P.peakLiveBytes = listOrderPeakBytes(P, occupies, inPlaceOperand);
    for (Buf &B : bufs) // without reuse (and ancestor sets) no buffer is compared
      B.lastUses = deps.hasAncestors() ? lastUses(B.uses)
                                       : llvm::SmallVector<int32_t, 2>{*std::max_element(B.uses.begin(), B.uses.end())};
    place();
  }

private:
  std::vector<Buf> bufs;
  std::vector<int32_t> bufOf; ///< per group: its buffer, -1 for none

  /// Every other reader of h ran before i (is an ancestor of i).
  bool diesAt(int32_t h, int32_t i) const override {
    const Group &g = P.groups[h];
    return reusable(P, g) && bufOf[h] >= 0 && !consumed[h] && deps.allAncestors(g.readers, i, i);
  }
  void tookOver(int32_t, int32_t) override {}
  void shareStorage(int32_t g, int32_t h, int32_t) override {
    const Group &G = P.groups[g];
    bufOf[g] = bufOf[h];
    Buf &B = bufs[bufOf[g]];
    B.uses.insert(B.uses.end(), G.readers.begin(), G.readers.end());
    B.pinned |= G.pinned;
  }
  void newStorage(int32_t g, int32_t i) override {
    const Group &G = P.groups[g];
    Buf B;
    B.elems = (G.elems + kSlotAlign - 1) / kSlotAlign * kSlotAlign;
    B.def = i;
    B.uses = G.readers;
    B.uses.push_back(i);
    B.pinned = G.pinned;
    bufOf[g] = static_cast<int32_t>(bufs.size());
    bufs.push_back(std::move(B));
  }

  /// The uses that are no ancestor of another use, in list order.
  llvm::SmallVector<int32_t, 2> lastUses(std::vector<int32_t> uses) const {
    std::sort(uses.begin(), uses.end());
    uses.erase(std::unique(uses.begin(), uses.end()), uses.end());
    llvm::SmallVector<int32_t, 2> last;
    for (size_t k = 0; k < uses.size(); ++k) {
      bool covered = false;
      for (size_t j = k + 1; j < uses.size() && !covered; ++j) covered = deps.isAncestor(uses[k], uses[j]);
      if (!covered) last.push_back(uses[k]);
    }
    return last;
  }

  /// A placed buffer as place() scans it, by offset: the fields its comparisons with
  /// the buffer being placed read, next to each other.
  struct Placed {
    int64_t begin, end; ///< offsets
    int32_t def, last;  ///< first writer, last of the last uses
    int32_t buf;
    bool pinned;
    bool oneLastUse; ///< `last` is its only last use
  };

  /// Every last use of A is an ancestor of d, or (`orHarmless`) an edge from it to d is
  /// harmless. `ancestorOf(u)` answers for d: each caller reads the bitset row that
  /// stays the same in its loop (d's ancestors, or the descendants of the uses).
  template <class AncestorOf>
  bool lastUsesBefore(const Buf &A, int32_t d, AncestorOf ancestorOf, const CriticalPath *orHarmless) const {
    if (A.pinned || A.lastUses.back() >= d) return false; // ancestors come earlier
    for (int32_t u : A.lastUses)
      if (!ancestorOf(u) && !(orHarmless && orHarmless->harmless(u, d))) return false;
    return true;
  }

  /// A can be made entirely before B by harmless edges from every use of A to B's
  /// first writer. (Checking the last uses suffices: a use that leads to a last use u
  /// finishes before u does, so it is an ancestor of B.def or harmless when u is.)
  bool orderable(const CriticalPath &cp, const Buf &A, const Buf &B) const {
    return lastUsesBefore(A, B.def, [&](int32_t u) { return deps.isAncestor(u, B.def); }, &cp);
  }

  /// A is entirely before B as far as the ancestor and descendant rows know, edges
  /// added so far included (each row knows the edges into or out of its own
  /// instruction).
  bool alreadyBefore(const Buf &A, int32_t d) const {
    return lastUsesBefore(A, d, [&](int32_t u) { return deps.reaches(u, d) || deps.isAncestor(u, d); }, nullptr);
  }
  /// The same for a placed buffer y before instruction d, from y's scanned fields
  /// when it has one last use.
  bool alreadyBefore(const Placed &y, int32_t d) const {
    if (!y.oneLastUse) return alreadyBefore(bufs[y.buf], d);
    return !y.pinned && y.last < d && (deps.isAncestor(y.last, d) || deps.reaches(y.last, d));
  }

  /// The placed buffers in offset order, in pages of offsets (each sorted by begin),
  /// with the highest end in each page: a scan skips a page whose buffers all end
  /// below where they could still matter.
  class PlacedByOffset {
  public:
    explicit PlacedByOffset(int64_t pageElems) : page_(pageElems) {}
    void insert(const Placed &y) {
      const auto p = static_cast<size_t>(y.begin / page_);
      if (pages_.size() <= p) {
        pages_.resize(p + 1);
        maxEnd_.resize(p + 1, 0);
      }
      auto &v = pages_[p];
      v.insert(std::upper_bound(v.begin(), v.end(), y.begin, [](int64_t off, const Placed &z) { return off < z.begin; }),
               y);
      maxEnd_[p] = std::max(maxEnd_[p], y.end);
      maxElems_ = std::max(maxElems_, y.end - y.begin);
    }
    /// Calls f for each placed buffer overlapping [lo, hi), in offset order.
    template <class F> void forEachOverlapping(int64_t lo, int64_t hi, F f) const {
      const auto firstPage = static_cast<size_t>(std::max<int64_t>(0, lo - maxElems_) / page_);
      for (size_t p = firstPage; p < pages_.size() && pageBegin(p) < hi; ++p)
        for (const Placed &y : pages_[p])
          if (y.begin < hi && y.end > lo) f(y);
    }
    size_t pages() const { return pages_.size(); }
    int64_t pageBegin(size_t p) const { return static_cast<int64_t>(p) * page_; }
    int64_t maxEnd(size_t p) const { return maxEnd_[p]; }
    const std::vector<Placed> &page(size_t p) const { return pages_[p]; }

  private:
    int64_t page_;
    std::vector<std::vector<Placed>> pages_;
    std::vector<int64_t> maxEnd_;
    int64_t maxElems_ = 0; ///< of the largest buffer
  };

  /// How a placed buffer y relates to X, the buffer being placed.
  enum class Relation : uint8_t {
    Ordered,    ///< the dependencies order them: they may share memory
    GoesBefore, ///< harmless edges from y's last uses to X's writer would order them
    GoesAfter,  ///< harmless edges from X's last uses to y's writer would order them
    Conflict,
  };

  /// The relations of X with the placed buffers, from what stays the same during one
  /// scan: the ancestor row of X's writer, the instructions every last use of X
  /// reaches (the AND of their descendant rows), X's writer's deadline and its last
  /// uses' latest finish. ordered(y) reads two bits of y; schedule(y) two times.
  class RelationsOfX {
  public:
    RelationsOfX(const GreedyAllocator &a, const CriticalPath &cp, const Buf &X)
        : a_(a), cp_(cp), X_(X), anc_(a.deps.ancestorRow(X.def)), deadline_(cp.deadline(X.def)) {
      if (X.pinned) return; // lives to the end: precedes nothing
      const size_t words = a.deps.rowWords();
      const uint64_t *first = a.deps.descendantRow(X.lastUses[0]);
      reach_.assign(first, first + words);
      for (size_t k = 1; k < X.lastUses.size(); ++k) {
        const uint64_t *row = a.deps.descendantRow(X.lastUses[k]);
        for (size_t w = 0; w < words; ++w) reach_[w] &= row[w];
      }
      for (int32_t u : X.lastUses) finish_ = std::max(finish_, cp.finish(u));
    }

    /// Every last use of X reaches y's writer (X is entirely before y).
    bool xBefore(const Placed &y) const { return !reach_.empty() && bit(reach_.data(), y.def); }

    /// Edges from every last use of X to instruction d were added: X now reaches d
    /// and its descendants.
    void addedEdgesFromX(int32_t d) {
      if (reach_.empty()) return;
      const uint64_t *row = a_.deps.descendantRow(d);
      for (size_t w = 0; w < reach_.size(); ++w) reach_[w] |= row[w];
      reach_[d / 64] |= uint64_t(1) << (d % 64);
    }

    /// X is entirely before y or y entirely before X in the dependency order: every
    /// last use of the one is an ancestor of the other's writer.
    bool ordered(const Placed &y) const {
      if (xBefore(y)) return true;
      if (y.pinned) return false;
      if (y.oneLastUse) return bit(anc_, y.last);
      return a_.lastUsesBefore(a_.bufs[y.buf], X_.def, [&](int32_t u) { return bit(anc_, u); }, nullptr);
    }

    /// For y not ordered with X: whether harmless edges could order them (orderable()
    /// either way, y first preferred).
    Relation schedule(const Placed &y) const {
      if (!y.pinned && y.last < X_.def &&
          (y.oneLastUse ? cp_.finish(y.last) <= deadline_
                        : a_.lastUsesBefore(a_.bufs[y.buf], X_.def, [&](int32_t u) { return bit(anc_, u); }, &cp_)))
        return Relation::GoesBefore;
      if (!X_.pinned && X_.lastUses.back() < y.def &&
          (finish_ <= cp_.deadline(y.def) ||
           a_.lastUsesBefore(X_, y.def, [&](int32_t u) { return a_.deps.reaches(u, y.def); }, &cp_)))
        return Relation::GoesAfter;
      return Relation::Conflict;
    }

  private:
    static bool bit(const uint64_t *row, int32_t i) { return (row[i / 64] >> (i % 64)) & 1u; }
    const GreedyAllocator &a_;
    const CriticalPath &cp_;
    const Buf &X_;
    const uint64_t *anc_;
    double deadline_;
    double finish_ = 0;
    std::vector<uint64_t> reach_; ///< empty if X is pinned
  };

  /// Greedy by size: largest first, at the lowest offset not overlapping a buffer it
  /// conflicts with. Buffers not ordered by the dependencies may still share memory
  /// if harmless write-after-read edges order them; edges are added only when the
  /// arena would otherwise grow.
  void place() {
    const bool reuse = P.options.reuseBuffers;
    CriticalPath cp(P, deps);
    std::vector<int32_t> order(bufs.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return bufs[a].elems > bufs[b].elems; });
    // Pages of about the mean buffer size.
    int64_t total = 0, page = kSlotAlign;
    for (const Buf &B : bufs) total += B.elems;
    while (!bufs.empty() && page < total / static_cast<int64_t>(bufs.size())) page *= 2;
    PlacedByOffset byOffset(page);
    std::vector<int32_t> forced;  // buffers an edge failed to order with X: conflicts
    // The buffers an edge could order with X, with their place in the order edges are
    // tried in (below).
    struct Cand {
      int64_t key;
      Placed y;
      Relation r;
    };
    std::vector<Cand> cands;
    int64_t arena = 0;
    for (const int32_t x : order) {
      Buf &X = bufs[x];
      forced.clear();
      if (!reuse) X.offset = arena; // every buffer conflicts with every other
      else for (;;) {
        // Two lowest-gap sweeps in offset order: offAll over the buffers X conflicts
        // with (not ordered by the dependencies), offHard over those no harmless edge
        // can order either. A buffer that starts past offAll + X.elems cannot move
        // either gap (offHard <= offAll) nor overlap where X goes: the scan stops.
        // Once buffers start past offHard + X.elems, offHard is final, and only
        // whether a buffer is ordered with X still matters (for offAll); once offAll
        // is too high to take without edges, nothing does.
        int64_t offAll = 0, offHard = 0;
        // A buffer that ends at or below offHard (or, once offHard is final, below
        // offAll) can move neither: it is skipped, and so is a page of them.
        RelationsOfX rel(*this, cp, X);
        bool done = false;
        for (size_t p = 0; p < byOffset.pages() && !done; ++p) {
          const int64_t first = byOffset.pageBegin(p), last = byOffset.maxEnd(p);
          if (first >= offAll + X.elems) break;
          if (last <= offHard || (first >= offHard + X.elems && last <= offAll)) continue;
          for (const Placed &y : byOffset.page(p)) {
            if (y.begin >= offAll + X.elems) {
              done = true;
              break;
            }
            const bool hardFinal = y.begin >= offHard + X.elems;
            if (hardFinal && offAll + X.elems > std::max(arena, offHard + X.elems)) {
              done = true;
              break;
            }
            if (y.end <= offHard || (hardFinal && y.end <= offAll) || rel.ordered(y)) continue;
            offAll = std::max(offAll, y.end);
            // Whether an edge could order y with X matters only where y can still
            // move offHard or need an edge: above offHard.
            if (hardFinal) continue;
            const bool isForced = std::find(forced.begin(), forced.end(), y.buf) != forced.end();
            const Relation r = isForced ? Relation::Conflict : rel.schedule(y);
            if (r == Relation::Conflict) offHard = std::max(offHard, y.end);
          }
        }
        if (offAll + X.elems <= std::max(arena, offHard + X.elems)) {
          X.offset = offAll; // no growth without edges: no edges
          break;
        }
        // Edges are needed only with the buffers where X goes (none of which is a
        // conflict, or offHard would be past it): those ending latest first (edges
        // into X's writer), then those starting earliest (edges from X's last uses),
        // so that an edge implied by one added before is skipped.
        cands.clear();
        byOffset.forEachOverlapping(offHard, offHard + X.elems, [&](const Placed &y) {
          if (rel.ordered(y)) return;
          const Relation r = rel.schedule(y);
          if (r == Relation::Conflict) throw std::logic_error("prepare: internal error: a conflict where a buffer goes");
          const int64_t key = r == Relation::GoesBefore ? -static_cast<int64_t>(y.last)
                                                        : static_cast<int64_t>(P.insts.size()) + y.def;
          cands.push_back({key, y, r});
        });
        std::sort(cands.begin(), cands.end(), [](const Cand &a, const Cand &b) {
          return std::tie(a.key, a.y.buf) < std::tie(b.key, b.y.buf);
        });
        bool ok = true;
        for (const Cand &c : cands) {
          const bool yFirst = c.r == Relation::GoesBefore;
          if (yFirst ? alreadyBefore(c.y, X.def) : rel.xBefore(c.y) || alreadyBefore(X, c.y.def)) continue;
          const Buf &Y = bufs[c.y.buf];
          const Buf &A = yFirst ? Y : X, &B = yFirst ? X : Y;
          if (!orderable(cp, A, B)) { // slack used up by edges added just before
            forced.push_back(c.y.buf);
            ok = false;
            break;
          }
          cp.addEdgesInto(A.lastUses, B.def);
          if (!yFirst) rel.addedEdgesFromX(B.def);
        }
        if (ok) {
          X.offset = offHard;
          break;
        }
      }
      arena = std::max(arena, X.offset + X.elems);
      byOffset.insert(Placed{X.offset, X.offset + X.elems, X.def, X.lastUses.back(), x, X.pinned, X.lastUses.size() == 1});
    }
    for (const Buf &B : bufs) {
      P.slotOffset.push_back(B.offset);
      P.slotElems.push_back(B.elems);
    }
    for (size_t g = 0; g < P.groups.size(); ++g)
      if (P.groups[g].kind == GroupKind::Arena) P.groups[g].index = bufOf[g];
    P.arenaElems = arena;
  }
};

/// Buffers in list order for programs too large for ancestor sets: a buffer gets the
/// best-fitting free range of the arena when its first writer runs (else the top of
/// the arena), and frees it once its last reader in list order has run; neighbouring
/// free ranges coalesce, so the arena stays close to the list-order peak. Reuse adds
/// write-after-read edges from every instruction that used the memory before (the
/// previous occupants' readers and writers) to the new writer, so that the parallel
/// schedule respects it; a range is reused only if those edges are harmless
/// (CriticalPath), so independent ops stay as concurrent as without reuse.
class ListOrderAllocator : InPlaceAssigner {
public:
  ListOrderAllocator(Plan &P, DepGraph &deps)
      : InPlaceAssigner(P, deps), slotOf(P.groups.size(), -1), cp(P, deps) {}

  void run() {
    for (size_t ii = 0; ii < P.insts.size(); ++ii) {
      const int32_t i = static_cast<int32_t>(ii);
      assignResults(i);
      // Operands whose last reader (in list order) is i free their memory now.
      for (int32_t h : operandGroups(P, P.insts[ii]))
        if (P.groups[h].readers.back() == i) {
          std::vector<int32_t> set = P.groups[h].readers;
          if (P.groups[h].producer >= 0) set.push_back(P.groups[h].producer);
          release(h, std::move(set));
        }
      // Results nobody reads (temporaries, unused results) free theirs right after i.
      for (int32_t v : P.insts[ii].out) {
        const int32_t h = groupOf(P, v);
        if (P.groups[h].readers.empty() && !skip[h]) release(h, {i});
      }
      cp.settle(i); // no more edges into i
    }
    std::vector<bool> occupies(P.groups.size());
    for (size_t g = 0; g < occupies.size(); ++g)
      occupies[g] = slotOf[g] >= 0 || P.groups[g].kind == GroupKind::Output;
    P.peakLiveBytes = listOrderPeakBytes(P, occupies, inPlaceOperand);
    for (size_t g = 0; g < P.groups.size(); ++g)
      if (P.groups[g].kind == GroupKind::Arena) P.groups[g].index = slotOf[g];
    P.arenaElems = top;
  }

private:
  /// Part of a free range, with the instructions that must run before it is reused.
  struct Fragment {
    int64_t begin, end;
    int32_t release; ///< index into releaseSets
  };
  struct FreeRange {
    int64_t end;
    std::deque<Fragment> fragments; ///< by offset, covering the range
  };
  /// Appends the fragments of the free range just above `lo` to it (the smaller list
  /// is moved, so that coalescing stays O(n log n) over a run).
  static void appendAbove(FreeRange &lo, FreeRange &&hi) {
    lo.end = hi.end;
    if (lo.fragments.size() >= hi.fragments.size()) {
      lo.fragments.insert(lo.fragments.end(), hi.fragments.begin(), hi.fragments.end());
    } else {
      hi.fragments.insert(hi.fragments.begin(), lo.fragments.begin(), lo.fragments.end());
      lo.fragments = std::move(hi.fragments);
    }
  }
  std::vector<int64_t> slotOf; ///< per group
  CriticalPath cp;
  std::map<int64_t, FreeRange> freeByBegin;
  std::set<std::pair<int64_t, int64_t>> freeBySize; ///< (size, begin)
  std::vector<std::vector<int32_t>> releaseSets;
  int64_t top = 0; ///< arena size so far

  /// i is the last reader of h in list order, and edges from the other readers to i
  /// are harmless.
  bool diesAt(int32_t h, int32_t i) const override {
    const Group &G = P.groups[h];
    return reusable(P, G) && slotOf[h] >= 0 && !consumed[h] && G.readers.back() == i && harmlessInto(G.readers, i);
  }
  /// The other readers of h must run before i overwrites it.
  void tookOver(int32_t h, int32_t i) override { addEdges(P.groups[h].readers, i); }
  void shareStorage(int32_t g, int32_t h, int32_t) override { slotOf[g] = slotOf[h]; }

  /// Edges from every instruction of `set` (but i) to i would not delay the critical path.
  bool harmlessInto(const std::vector<int32_t> &set, int32_t i) const {
    return std::all_of(set.begin(), set.end(), [&](int32_t u) { return u == i || cp.harmless(u, i); });
  }
  void addEdges(const std::vector<int32_t> &set, int32_t i) {
    llvm::SmallVector<int32_t, 8> from;
    for (int32_t u : set)
      if (u != i) from.push_back(u);
    cp.addEdgesIntoInListOrder(from, i);
  }
  /// The lowest place in free range r (starting at `begin`) where i can reuse `elems`
  /// of it: harmless edges order before i every earlier use of the fragments there.
  /// Places start at fragment boundaries; with `growTop` (r ends at the top of the
  /// arena) a place may run past r's end into new memory. Returns the index of the
  /// first fragment used, or -1.
  int64_t reusablePlace(const FreeRange &r, int64_t elems, int32_t i, bool growTop) const {
    const auto &fr = r.fragments;
    std::vector<char> ok(fr.size());
    for (size_t k = 0; k < fr.size(); ++k) ok[k] = harmlessInto(releaseSets[static_cast<size_t>(fr[k].release)], i);
    size_t e = 0; // first fragment past the window (or the first not ok inside it)
    for (size_t s = 0; s < fr.size(); ++s) {
      const int64_t p = fr[s].begin;
      if (!growTop && p + elems > r.end) break;
      e = std::max(e, s);
      while (e < fr.size() && fr[e].begin < p + elems && ok[e]) ++e;
      if (e == fr.size() || fr[e].begin >= p + elems) return static_cast<int64_t>(s);
    }
    return -1;
  }
  /// Removes a free range from both indexes and returns it.
  FreeRange takeFree(std::map<int64_t, FreeRange>::iterator it) {
    freeBySize.erase({it->second.end - it->first, it->first});
    FreeRange r = std::move(it->second);
    freeByBegin.erase(it);
    return r;
  }
  void insertFree(int64_t begin, FreeRange r) {
    freeBySize.insert({r.end - begin, begin});
    freeByBegin.emplace(begin, std::move(r));
  }

  void release(int32_t g, std::vector<int32_t> set) {
    if (P.groups[g].kind != GroupKind::Arena || slotOf[g] < 0 || P.groups[g].pinned) return;
    if (consumed[g]) return; // the memory now belongs to an in-place result
    const auto slot = static_cast<size_t>(slotOf[g]);
    int64_t begin = P.slotOffset[slot];
    FreeRange r{begin + P.slotElems[slot], {}};
    releaseSets.push_back(std::move(set));
    r.fragments.push_back({begin, r.end, static_cast<int32_t>(releaseSets.size() - 1)});
    // Coalesce with the free neighbours.
    if (auto next = freeByBegin.find(r.end); next != freeByBegin.end()) appendAbove(r, takeFree(next));
    if (auto prev = freeByBegin.lower_bound(begin);
        prev != freeByBegin.begin() && std::prev(prev)->second.end == begin) {
      --prev;
      begin = prev->first;
      FreeRange below = takeFree(prev);
      appendAbove(below, std::move(r));
      r = std::move(below);
    }
    insertFree(begin, std::move(r));
  }

  /// The lowest reusable place (reusablePlace) in the smallest free range that has one
  /// (the lowest of equal ones); else in the free range at the top of the arena, which
  /// grows; else new memory at the top.
  void newStorage(int32_t g, int32_t i) override {
    const int64_t elems = (P.groups[g].elems + kSlotAlign - 1) / kSlotAlign * kSlotAlign;
    int64_t offset = top;
    std::map<int64_t, FreeRange>::iterator it = freeByBegin.end();
    int64_t first = -1; // the first fragment of *it that the buffer uses
    for (auto fit = freeBySize.lower_bound({elems, std::numeric_limits<int64_t>::min()});
         fit != freeBySize.end() && first < 0; ++fit) {
      it = freeByBegin.find(fit->second);
      first = reusablePlace(it->second, elems, i, false);
    }
    if (first < 0 && !freeByBegin.empty() && std::prev(freeByBegin.end())->second.end == top) {
      it = std::prev(freeByBegin.end());
      first = reusablePlace(it->second, elems, i, true);
    }
    if (first >= 0) {
      const int64_t rangeBegin = it->first;
      FreeRange r = takeFree(it);
      // The fragments below the place stay free; those it overlaps get edges into i;
      // the part above it stays free.
      FreeRange below{0, {}};
      for (int64_t k = 0; k < first; ++k) {
        below.fragments.push_back(r.fragments.front());
        r.fragments.pop_front();
      }
      offset = r.fragments.front().begin;
      below.end = offset;
      if (below.end > rangeBegin) insertFree(rangeBegin, std::move(below));
      const int64_t used = offset + elems;
      while (!r.fragments.empty() && r.fragments.front().begin < used) {
        Fragment &f = r.fragments.front();
        addEdges(releaseSets[static_cast<size_t>(f.release)], i);
        if (f.end > used) {
          f.begin = used;
          break;
        }
        r.fragments.pop_front();
      }
      if (r.end > used) insertFree(used, std::move(r));
    }
    top = std::max(top, offset + elems);
    slotOf[g] = static_cast<int64_t>(P.slotOffset.size());
    P.slotOffset.push_back(offset);
    P.slotElems.push_back(elems);
  }
};

} // namespace

int64_t listOrderPeakBytes(const Plan &P, const std::vector<bool> &occupies,
                           const std::vector<int32_t> &inPlaceOperand) {
  auto dies = [&](int32_t g) {
    const Group &G = P.groups[g];
    return occupies[g] && G.kind == GroupKind::Arena && !G.pinned;
  };
  std::vector<bool> gone(P.groups.size(), false);
  int64_t live = 0, peak = 0;
  for (size_t ii = 0; ii < P.insts.size(); ++ii) {
    const int32_t i = static_cast<int32_t>(ii);
    const Instruction &inst = P.insts[ii];
    for (int32_t v : inst.out)
      if (occupies[groupOf(P, v)]) live += P.groups[groupOf(P, v)].elems;
    // An in-place result replaces its operand: the operand is dead from now on.
    if (int32_t h = inPlaceOperand[ii]; h >= 0 && !gone[h]) {
      live -= P.groups[h].elems;
      gone[h] = true;
    }
    peak = std::max(peak, live * 8);
    for (int32_t g : operandGroups(P, inst))
      if (P.groups[g].readers.back() == i && dies(g) && !gone[g]) {
        live -= P.groups[g].elems;
        gone[g] = true;
      }
    for (int32_t v : inst.out) {
      const int32_t g = groupOf(P, v);
      if (P.groups[g].readers.empty() && dies(g)) live -= P.groups[g].elems;
    }
  }
  return peak;
}

void assignBuffers(Plan &P, DepGraph &deps) {
  if (P.options.reuseBuffers && !deps.hasAncestors()) ListOrderAllocator(P, deps).run();
  else GreedyAllocator(P, deps).run();
}

} // namespace tessel::rt::prep
