#include "compiler/hlo/canonical.h"

#include "compiler/hlo/canonical_builder.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <optional>
#include <unordered_map>

// XXH3 compiled in line: the structural hashes are of a few dozen bytes an instruction, where a
// call through the library's run-time dispatch (common/fast_hash.h) cost more than the hash.
// The same algorithm: the values are the library's.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "common/huge_pages.h"
#include "common/spin_wait.h"
#include "compiler/hlo/attributes.h"
#include "compiler/hlo/lexer.h"
#include "compiler/hlo/literal_text.h"
#include "compiler/hlo/name_table.h"
#include "compiler/hlo/text_writer.h"

namespace hlocache::hlo {
// Named (not anonymous) only so that CanonicalBuilder can hold a Canonicalizer.
namespace canonical_internal {

// What an instruction's canonical line is made of: fixed text, and references whose spelling
// depends on canonical positions (known only after ordering) and whose hash depends on the
// structure they point at.
enum class PieceKind : uint8_t {
  kText,      // arena_[a, b)
  kOperands,  // The operand list.
  kCallees,   // Callees of attribute a: b >> 1 of them, a bare name or ({list}) when b & 1.
  kControl,   // control-predecessors={...}.
  kChannel,   // A channel id, renumbered by first appearance; a = its number.
};

struct Piece {
  PieceKind kind;
  uint32_t a = 0;
  uint32_t b = 0;
};

struct InstInfo {
  uint32_t piece_begin = 0;
  uint32_t piece_end = 0;
  uint64_t hash = 0;
  // The instruction's children in CompInfo::children: [children_begin, operands_end) its
  // operands, [operands_end, children_end) its control predecessors in hash order.
  uint32_t children_begin = 0;
  uint32_t operands_end = 0;
  uint32_t children_end = 0;
  // The computations it calls, in canonical (sorted attribute) order: [callees_begin,
  // callees_end) of CompInfo::callees.
  uint32_t callees_begin = 0;
  uint32_t callees_end = 0;
};

struct CompInfo {
  std::vector<InstInfo> insts;
  // Every instruction's operands and control predecessors, copied in one pass into one array:
  // ordering and printing jump between these few bytes instead of between instructions
  // hundreds of bytes apart.
  std::vector<int32_t> children;
  std::vector<int32_t> callees;  // Every instruction's callees, one array (see InstInfo).
  // The same callees in printing order: each instruction's, in canonical order (the walk
  // OrderComputations takes, which needs nothing else of the computation).
  std::vector<int32_t> walk_callees;
  std::vector<int32_t> order;     // Instruction indices in canonical order.
  std::vector<int32_t> position;  // Instruction index -> canonical position.
  uint64_t hash = 0;
  // Its execution thread as printed: the written one's text, empty for none and for the
  // default one ("main").
  std::string_view printed_thread;
  bool any_control = false;            // Whether any instruction has control predecessors.
  std::vector<int32_t> channel_insts;  // Instructions with a renumbered channel id, ascending.
  // When the text is streamed: the bytes of its instructions' lines but for the numbers of
  // callees and channels, which are known only once the module is whole (see BodyBytes).
  // Until the computation is finished, the bytes that do not depend on the order either
  // (FixedLineBytes), counted as its instructions arrive.
  uint64_t line_bytes = 0;
  // Lines printed ahead (Canonicalizer::PrintAhead): [ahead_begin, ahead_end) of its text,
  // with the numbers [holes_begin, holes_end) of its holes left out.
  bool printed_ahead = false;
  uint64_t ahead_begin = 0;
  uint64_t ahead_end = 0;
  uint32_t holes_begin = 0;
  uint32_t holes_end = 0;
};

// Where a line printed ahead lacks a number known only once the module is whole: a callee's
// (`c12`, `value` its computation's index) or a channel's (`value` its slot).
struct Hole {
  uint64_t at;  // In the text printed ahead.
  int32_t value;
  bool channel;
};

// The lines of one large computation, finished once the parse has ended (the entry, last in the
// text), printed by two threads at once: everything else waits for them. Finish takes runs of
// lines from the front and prints them where the text goes; the builder's thread
// (PrintSharedFromBack) takes runs from the back into a text of its own, with the numbers of
// callees and channels when the computations were ordered and the text counted before
// (OrderComputationsAhead, as the pipeline does), else holes for them as in lines printed
// ahead. They meet where their speeds put them: Finish starts later (it puts the lines printed
// ahead first, and CanonicalizeText frees the instructions before it), and how much later
// differs by module.
struct SharedLines {
  int32_t comp = -1;  // Its index; -1 when no computation's lines are shared.
  int32_t root = -1;
  size_t run_lines = 1;  // Lines a thread takes at a time (CanonicalOptions::shared_run_lines).
  // The runs no thread took yet: [front, back), front in the low 32 bits, back in the high.
  std::atomic<uint64_t> unclaimed{0};
  // Set (and notified) once the back has printed every run it took: what follows is whole.
  std::atomic<bool> back_done{false};
  // What the back printed, its last run first.
  struct Run {
    uint64_t begin;  // In text.
    uint64_t end;
    uint32_t holes_begin;  // In holes.
    uint32_t holes_end;
  };
  std::string text;
  std::vector<Hole> holes;
  std::vector<Run> back;
};

// For each bit width (less one) of a 32-bit number: in the high half, the decimal digits d
// of the least number of that width; in the low half, 2^32 - 10^d when a number of that width
// can reach 10^d (and so have d + 1 digits), which adding the number carries into the high half.
constexpr std::array<uint64_t, 32> kDigitSteps = [] {
  std::array<uint64_t, 32> steps{};
  for (int width = 0; width < 32; ++width) {
    const uint64_t least = uint64_t{1} << width;
    uint64_t digits = 1, power = 10;
    while (power <= least) {
      power *= 10;
      ++digits;
    }
    const bool may_reach = power < (least << 1) && power < (uint64_t{1} << 32);
    steps[width] = (digits << 32) + (may_reach ? (uint64_t{1} << 32) - power : 0);
  }
  return steps;
}();

// The decimal digits of `n` without dividing it down: the canonical text's length is counted
// over every reference of a module (positions, computation and channel numbers).
constexpr size_t DecimalDigits(uint64_t n) {
  if (n > UINT32_MAX) {
    size_t digits = 1;
    for (; n >= 10; n /= 10) ++digits;
    return digits;
  }
  const int width = 31 - std::countl_zero(static_cast<uint32_t>(n) | 1);
  return static_cast<size_t>((n + kDigitSteps[width]) >> 32);
}

// Checked where it can go wrong: on both sides of every power of ten and of two.
constexpr bool DecimalDigitsAreExact() {
  auto slow = [](uint64_t n) {
    size_t digits = 1;
    for (; n >= 10; n /= 10) ++digits;
    return digits;
  };
  for (uint64_t p = 1; p <= uint64_t{10'000'000'000'000}; p *= 10) {
    for (uint64_t n : {p - 1, p, p + 1, 2 * p - 1}) {
      if (DecimalDigits(n) != slow(n)) return false;
    }
  }
  for (int b = 0; b < 40; ++b) {
    const uint64_t p = uint64_t{1} << b;
    for (uint64_t n : {p - 1, p, p + 1}) {
      if (DecimalDigits(n) != slow(n)) return false;
    }
  }
  return true;
}
static_assert(DecimalDigitsAreExact());

// The integer number token `i` prints as, if it prints as one: `01`, `1.` and `1.0` print as
// `1`. Decisions on a number (a default, a layout, a channel to renumber) are taken on this, not
// on the spelling in the input, or the next round, which reads the output, would decide
// otherwise (fuzzer findings).
std::optional<int64_t> PrintedInteger(const Module& m, uint32_t i) {
  const TokenKind kind = m.tokens[i].kind;
  if (kind != TokenKind::kInt && kind != TokenKind::kFloat) return std::nullopt;
  std::string spelled;
  AppendCanonicalNumber(m.TokenText(i), kind, spelled);
  int64_t value = 0;
  const auto [ptr, ec] = std::from_chars(spelled.data(), spelled.data() + spelled.size(), value);
  if (ec != std::errc() || ptr != spelled.data() + spelled.size()) return std::nullopt;
  return value;
}

bool IsDefaultHeaderValue(const Module& m, const Attribute& a) {
  const bool single = a.value.end == a.value.begin + 1;
  if (a.name == "replica_count" || a.name == "num_partitions") {
    return single && PrintedInteger(m, a.value.begin) == 1;
  }
  if (a.name == "is_scheduled" || a.name == "alias_passthrough_params") {
    return single && m.TokenText(a.value.begin) == "false";
  }
  if (a.name.starts_with("allow_spmd_sharding_propagation")) {
    for (uint32_t i = a.value.begin; i < a.value.end; ++i) {
      TokenKind k = m.tokens[i].kind;
      if (k == TokenKind::kIdent && m.TokenText(i) != "false") return false;
      if (k != TokenKind::kIdent && k != TokenKind::kComma && k != TokenKind::kLBrace &&
          k != TokenKind::kRBrace) {
        return false;
      }
    }
    return true;
  }
  return false;
}

class Canonicalizer {
 public:
  // `m` needs only its header and tokens until Finish: the computations may still be being
  // parsed (canonical_builder.h).
  Canonicalizer(const Module& m, CanonicalOptions options)
      : m_(&m), options_(options), scheduled_(m.IsScheduled()), value_index_(m.source()) {
    // Sized from the source so that big modules fill these without regrowing; see huge_pages.h.
    pieces_.reserve(m_->tokens.size() / 4 + 16);
    AdviseHugePages(pieces_.data(), pieces_.capacity() * sizeof(Piece));
    arena_.reserve(m_->source().size() / 2);
    AdviseHugePages(arena_.data(), arena_.capacity());
  }

  Result<CanonicalModule> Run() {
    // Callees are defined before their callers, so textual order is bottom-up.
    for (const Computation& comp : m_->computations) {
      StartComputation();
      AddInstructions(comp.instructions.data(), 0, static_cast<uint32_t>(comp.instructions.size()));
      FinishComputation(comp.root, ThreadText(comp.execution_thread));
    }
    return Finish(*m_);
  }

  // The steps Run takes, for a module whose computations arrive one instruction at a time.
  void StartComputation() {
    // The header is printed here, ahead, where the builder follows the parser on a thread of
    // its own (it reads the module's header only). A large module's (Mixtral's input aliases
    // and entry layout, 77 KB) was 2% of the main thread's instructions, printed after the
    // parse, where everything left waits for it.
    if (comps_.empty()) PrintHeader(header_);
    comps_.emplace_back();
    child_offsets_.assign(1, 0);
    callee_offsets_.assign(1, 0);
    inst_hashes_.clear();
  }

  // Instructions [begin, end) of the computation last started, `insts` being its array.
  void AddInstructions(const Instruction* insts, uint32_t begin, uint32_t end) {
    CompInfo& ci = comps_.back();
    ci.insts.resize(end);
    child_offsets_.resize(end + 1);
    callee_offsets_.resize(end + 1);
    inst_hashes_.resize(end);
    for (uint32_t i = begin; i < end; ++i) {
      const Instruction& inst = insts[i];
      if (inst.literal_elided && !options_.allow_elided_constants && !first_elided_) {
        first_elided_ = inst.offset + 1;
      }
      InstInfo& info = ci.insts[i];
      info.children_begin = static_cast<uint32_t>(ci.children.size());
      ci.children.insert(ci.children.end(), inst.operands.begin(), inst.operands.end());
      info.operands_end = static_cast<uint32_t>(ci.children.size());
      ci.children.insert(ci.children.end(), inst.control_predecessors.begin(),
                         inst.control_predecessors.end());
      info.children_end = static_cast<uint32_t>(ci.children.size());
      child_offsets_[i + 1] = info.children_end;
      ci.any_control |= !inst.control_predecessors.empty();
      BuildInstruction(inst, info, ci);
      info.hash = HashInstruction(inst, info, ci);
      inst_hashes_[i] = info.hash;
      callee_offsets_[i + 1] = info.callees_end;
      if (options_.text_sink != nullptr) ci.line_bytes += FixedLineBytes(info);
    }
  }

  // The written execution thread of a computation (its string token, quotes and all), or empty.
  std::string_view ThreadText(TokenRange execution_thread) const {
    return execution_thread.empty() ? std::string_view() : m_->TokenText(execution_thread.begin);
  }

  // The computation last started is whole: its instructions are ordered and it is hashed.
  // `execution_thread`: ThreadText's. `print_ahead`: its lines are printed now as well, when the
  // text is streamed (PrintAhead). Reads nothing of the module.
  bool FinishComputation(int32_t root, std::string_view execution_thread, bool print_ahead = false,
                         bool share_print = false) {
    CompInfo& ci = comps_.back();
    const size_t n = ci.insts.size();
    if (ci.any_control) {
      // Control predecessors in hash order (their hashes are all known now).
      for (const InstInfo& info : ci.insts) {
        std::sort(ci.children.begin() + info.operands_end, ci.children.begin() + info.children_end,
                  [&](int32_t x, int32_t y) {
                    return ci.insts[x].hash != ci.insts[y].hash
                               ? ci.insts[x].hash < ci.insts[y].hash
                               : x < y;
                  });
      }
    }
    if (scheduled_) {
      ci.order.resize(n);
      for (size_t i = 0; i < n; ++i) ci.order[i] = static_cast<int32_t>(i);
    } else {
      OrderInstructions(root, ci);
    }
    ci.position.assign(n, -1);
    for (size_t k = 0; k < n; ++k) ci.position[ci.order[k]] = static_cast<int32_t>(k);
    // In canonical order, from the compact arrays AddInstructions keeps beside InstInfo (as
    // the walk does): a large entry's every instruction read from InstInfo, in an order far
    // from the text's, was a cache miss each.
    if (!ci.callees.empty()) {
      ci.walk_callees.reserve(ci.callees.size());
      for (int32_t i : ci.order) {
        ci.walk_callees.insert(ci.walk_callees.end(), ci.callees.begin() + callee_offsets_[i],
                               ci.callees.begin() + callee_offsets_[i + 1]);
      }
    }
    // The computation's hash covers its printed body: root, then the rest in canonical order.
    sig_.resize((n + 1) * sizeof(uint64_t));
    std::memcpy(sig_.data(), &inst_hashes_[root], sizeof(uint64_t));
    for (size_t k = 0; k < n; ++k) {
      std::memcpy(sig_.data() + (k + 1) * sizeof(uint64_t), &inst_hashes_[ci.order[k]],
                  sizeof(uint64_t));
    }
    sig_ += execution_thread;
    ci.hash = XXH3_64bits(sig_.data(), sig_.size());
    ci.printed_thread = execution_thread == "\"main\"" ? std::string_view() : execution_thread;
    // Counted here, where the builder follows the parser on a thread of its own, rather than
    // after the parse, when everything left waits for it.
    if (options_.text_sink != nullptr) {
      // The rest of the lines' bytes: `ROOT `, and the digits of each instruction's number
      // and of each reference to it (every child is printed once, as a reference). After the
      // parse has ended (the entry computation) everything else waits for this, so it walks
      // the positions and the children, not every line's pieces again as it once did.
      ci.line_bytes += root >= 0 && static_cast<size_t>(root) < n ? 5 : 0;
      for (int32_t p : ci.position) ci.line_bytes += DecimalDigits(static_cast<uint32_t>(p));
      for (int32_t child : ci.children) {
        ci.line_bytes += DecimalDigits(static_cast<uint32_t>(ci.position[child]));
      }
      if (print_ahead && !options_.record_source_lines) {
        PrintAhead(ci, root);
        // Its lines are printed: what they were printed from is not read again (but for the
        // channel numbers' count, ChannelBytes), and is freed here, on the builder's thread
        // beside the parser. Freeing every computation's arrays at the end was 3.9 million
        // instructions on the main thread for Mixtral's 3,700 computations.
        if (ci.channel_insts.empty()) {
          std::vector<InstInfo>().swap(ci.insts);
          std::vector<int32_t>().swap(ci.children);
          std::vector<int32_t>().swap(ci.callees);
          std::vector<int32_t>().swap(ci.order);
          std::vector<int32_t>().swap(ci.position);
        }
      }
      if (share_print && !print_ahead && !options_.record_source_lines &&
          n >= std::max<size_t>(options_.shared_print_lines, 1)) {
        ShareLines(static_cast<int32_t>(comps_.size() - 1), root);
        return true;
      }
    }
    return false;
  }

  // See CanonicalBuilder::OrderComputationsAhead.
  void OrderComputationsAhead(int32_t entry, size_t count) {
    if (options_.text_sink == nullptr || entry < 0 || static_cast<size_t>(entry) >= count ||
        count != comps_.size()) {
      return;
    }
    OrderComputations(entry, count);
    body_bytes_ = BodyBytes();
    counted_ = true;
  }

  // See CanonicalBuilder::PrintSharedFromBack. Reads only what the builder made of the
  // computations (never the module, which may be moving or gone meanwhile), and writes only
  // shared_'s text, holes and runs, which Finish reads once back_done says they are whole.
  void PrintSharedFromBack() {
    if (shared_.comp >= 0) {
      const CompInfo& ci = comps_[shared_.comp];
      TextWriter w(shared_.text);
      for (uint32_t run; ClaimRun(/*from_back=*/true, run);) {
        SharedLines::Run printed{w.written(), 0, static_cast<uint32_t>(shared_.holes.size()), 0};
        const auto [first, last] = RunLines(run);
        for (size_t k = first; k < last; ++k) {
          PrintInstruction(w, shared_.root, ci, ci.order[k], 0, &shared_.holes);
        }
        printed.end = w.written();
        printed.holes_end = static_cast<uint32_t>(shared_.holes.size());
        shared_.back.push_back(printed);
      }
      w.Finish();
    }
    SetAndWake(shared_.back_done);
  }

  // Prints the lines of a computation just finished, all but the numbers of callees and
  // channels (holes_), which StreamText puts in. The builder does it while the parser is still
  // running on the other thread, where the lines of every computation were printed after the
  // parse, when everything left waits for them: a module made of many computations (torax: 95%
  // of its text outside the entry) spent a tenth of its key's main thread there.
  void PrintAhead(CompInfo& ci, int32_t root) {
    ci.ahead_begin = ahead_.size();
    ci.holes_begin = static_cast<uint32_t>(holes_.size());
    TextWriter w(ahead_);
    for (int32_t i : ci.order) PrintInstruction(w, root, ci, i, 0, &holes_);
    w.Finish();
    ci.ahead_end = ahead_.size();
    ci.holes_end = static_cast<uint32_t>(holes_.size());
    ci.printed_ahead = true;
  }

  // Orders the computations and prints the module. `module` is the one the steps were taken
  // on, parsed to its end (it may have moved since: it is read from here on).
  Result<CanonicalModule> Finish(const Module& module) {
    m_ = &module;
    if (m_->computations.empty() || m_->entry < 0) {
      return Error(InvalidArgument(m_->filename() + ": error: module has no computations"));
    }
    if (first_elided_ != 0) {
      return Error(FailedPrecondition(
          ErrorAt(m_->filename(), m_->source(), first_elided_ - 1,
                  "constant has elided values ({...}); modules that differ only in those "
                  "values would share one key, so keying it is unsafe (allow it explicitly "
                  "with --allow-elided-constants)")
              .message()));
    }
    if (ordered_entry_ < 0) OrderComputations(m_->entry, m_->computations.size());
    if (ordered_entry_ != m_->entry || comp_id_.size() != m_->computations.size()) {
      return Error(Internal(m_->filename() + ": computations ordered from another entry"));
    }
    if (options_.text_sink != nullptr) {
      if (Status s = StreamText(*options_.text_sink); !s.ok()) return Error(std::move(s));
    } else {
      Print();
    }
    return std::move(out_);
  }

 private:
  // The lines of computation `comp` are to be printed from both ends at once: Finish takes runs
  // of them from the front, PrintSharedFromBack from the back (SharedLines).
  void ShareLines(int32_t comp, int32_t root) {
    const CompInfo& ci = comps_[comp];
    shared_.comp = comp;
    shared_.root = root;
    // 512 lines (the default) are about 25 us of printing on a large module's lines: the
    // threads end within that of each other, and take the shared word only every so often.
    shared_.run_lines = std::max<size_t>(options_.shared_run_lines, 1);
    const size_t runs = (ci.order.size() + shared_.run_lines - 1) / shared_.run_lines;
    shared_.unclaimed.store(static_cast<uint64_t>(runs) << 32, std::memory_order_relaxed);
    // Room for every line but the digits of channels (holes) and callees (holes too, unless
    // the computations are ordered by then: 10 digits at most each), plus one line's bound
    // (TextWriter::Reserve asks a line's bound past the last).
    shared_.text.reserve(ci.line_bytes + 10 * ci.callees.size() + 4096);
  }

  // Takes the first (or, `from_back`, the last) run of shared lines no one took: false when
  // none is left.
  bool ClaimRun(bool from_back, uint32_t& run) {
    uint64_t ends = shared_.unclaimed.load(std::memory_order_relaxed);
    while (true) {
      const auto front = static_cast<uint32_t>(ends);
      const auto back = static_cast<uint32_t>(ends >> 32);
      if (front >= back) return false;
      const uint64_t taken = from_back ? ends - (uint64_t{1} << 32) : ends + 1;
      if (shared_.unclaimed.compare_exchange_weak(ends, taken, std::memory_order_relaxed)) {
        run = from_back ? back - 1 : front;
        return true;
      }
    }
  }

  // Lines [first, last) in the order of the shared computation.
  std::pair<size_t, size_t> RunLines(uint32_t run) const {
    const size_t first = size_t{run} * shared_.run_lines;
    return {first, std::min(first + shared_.run_lines, comps_[shared_.comp].order.size())};
  }

  // Finish's side of a shared computation: runs of lines from the front, printed into `w`,
  // then, once PrintSharedFromBack has ended, the runs it printed, in the text's order.
  template <typename AfterLine, typename PutAhead>
  void PrintShared(TextWriter& w, const CompInfo& ci, AfterLine after_line, PutAhead put_ahead) {
    for (uint32_t run; ClaimRun(/*from_back=*/false, run);) {
      const auto [first, last] = RunLines(run);
      for (size_t k = first; k < last; ++k) {
        PrintInstruction(w, shared_.root, ci, ci.order[k], 0, nullptr);
        after_line(w);
      }
    }
    // The back's last run is a few tens of microseconds of printing: spun for, then slept.
    WaitUntilSet(shared_.back_done, std::chrono::microseconds(2000));
    // Claimed from the last run down: the text's order is the reverse.
    for (auto run = shared_.back.rbegin(); run != shared_.back.rend(); ++run) {
      PutWithHoles(w, shared_.text, run->begin, run->end, shared_.holes, run->holes_begin,
                   run->holes_end, after_line, put_ahead);
    }
  }

  // ---- token rendering ----
  // A token's text as printed: names lose their '%'. What the printer drops, decisions on the
  // token must ignore too (`%s32[3]{0}` is a shape, `%metadata={}` is metadata).
  std::string_view PrintedText(uint32_t i) const {
    std::string_view text = m_->TokenText(i);
    if (m_->tokens[i].kind == TokenKind::kIdent && text[0] == '%') text.remove_prefix(1);
    return text;
  }

  void AppendTokenRaw(uint32_t i, std::string& out) {
    const Token& t = m_->tokens[i];
    if (NeedsSpaceBetween(last_kind_, t.kind)) out += ' ';
    out += PrintedText(i);
    kind_before_last_ = last_kind_;
    last_kind_ = t.kind;
  }

  void AppendTokenNormalized(uint32_t i, std::string& out) {
    const Token& t = m_->tokens[i];
    if (t.kind != TokenKind::kInt && t.kind != TokenKind::kFloat) {
      AppendTokenRaw(i, out);
      return;
    }
    if (t.kind == TokenKind::kInt && IsCanonicalDecimal(m_->TokenText(t))) {
      // Most numbers in values: printed as written, without respelling them through a string.
      if (NeedsSpaceBetween(last_kind_, TokenKind::kInt)) out += ' ';
      out += m_->TokenText(t);
      kind_before_last_ = last_kind_;
      last_kind_ = TokenKind::kInt;
      return;
    }
    // Spaced by what the respelled number reads back as (a float `0.` prints as the integer
    // `0`), or the next round would space it differently (fuzzer finding: `...0.`).
    std::string spelled;
    AppendCanonicalNumber(m_->TokenText(t), t.kind, spelled);
    const TokenKind kind = SpelledNumberKind(spelled);
    if (NeedsSpaceBetween(last_kind_, kind)) out += ' ';
    out += spelled;
    kind_before_last_ = last_kind_;
    last_kind_ = kind;
  }

  // Whether an integer token already reads as AppendCanonicalNumber spells it: decimal, no
  // leading zero (`0` and `-0` themselves included; `-0` keeps its sign there too).
  static bool IsCanonicalDecimal(std::string_view text) {
    if (text.starts_with('-')) text.remove_prefix(1);
    if (text.empty() || text.size() > 19) return false;  // Past 19 digits: may not fit.
    if (text[0] == '0') return text.size() == 1;
    return std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  }

  // How a respelled number lexes: an integer, a float, or a word (`inf`, `-nan`).
  static TokenKind SpelledNumberKind(std::string_view spelled) {
    std::string_view digits = spelled;
    if (digits.starts_with('-')) digits.remove_prefix(1);
    if (!digits.empty() && std::isalpha(static_cast<unsigned char>(digits[0]))) {
      return TokenKind::kIdent;
    }
    const bool integer = !digits.empty() && std::all_of(digits.begin(), digits.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c));
    });
    return integer ? TokenKind::kInt : TokenKind::kFloat;
  }

  uint32_t SkipGroupFrom(uint32_t i, uint32_t end) const {
    int depth = 0;
    for (; i < end; ++i) {
      TokenKind k = m_->tokens[i].kind;
      if (k == TokenKind::kLBrace || k == TokenKind::kLParen || k == TokenKind::kLBracket) ++depth;
      if (k == TokenKind::kRBrace || k == TokenKind::kRParen || k == TokenKind::kRBracket) {
        if (--depth == 0) return i + 1;
      }
    }
    return end;
  }

  // Attribute values: numbers respelled, '%' dropped, nested metadata={...} (sharding metadata)
  // dropped, whitespace reduced to what separates words.
  void AppendValue(uint32_t begin, uint32_t end, bool verbatim, std::string& out) {
    last_kind_ = TokenKind::kEnd;
    for (uint32_t i = begin; i < end; ++i) {
      const Token& t = m_->tokens[i];
      if (!verbatim && t.kind == TokenKind::kIdent && i + 2 < end &&
          m_->tokens[i + 1].kind == TokenKind::kEqual && PrintedText(i) == "metadata" &&
          m_->tokens[i + 2].kind == TokenKind::kLBrace) {
        i = SkipGroupFrom(i + 2, end);
        if (i < end && m_->tokens[i].kind == TokenKind::kComma) {
          // Drop the separator that followed the metadata.
        } else {
          --i;
          if (last_kind_ == TokenKind::kComma && !out.empty() && out.back() == ',') {
            // Drop the comma before it instead (and the space that separated it); the token
            // before that comma now meets the next one, spaced exactly as a reparse of the
            // output will space them.
            out.pop_back();
            if (!out.empty() && out.back() == ' ') out.pop_back();
            last_kind_ = kind_before_last_;
          }
        }
        continue;
      }
      if (verbatim) {
        AppendTokenRaw(i, out);
      } else {
        AppendTokenNormalized(i, out);
        i = SkipDefaultLayoutAfterShape(i, end, out);
      }
    }
  }

  // Copies out[a, b), text printed before, onto out's end.
  static void AppendCopy(uint32_t a, uint32_t b, std::string& out) {
    const size_t length = b - a;
    if (out.capacity() < out.size() + length) out.reserve(2 * (out.size() + length));
    out.append(out.data() + a, length);  // From before out's end: no reallocation now.
  }

  // AppendValue(value, /*verbatim=*/false) into arena_ (`out`), as a copy of the text it gave
  // for the same source text before, where there is one. Attribute values repeat (dimension
  // lists, replica groups, window specs on line after line), and their text is a function of
  // their tokens alone (AppendValue starts afresh and reads nothing around them), which are a
  // function of their source text (Module::SourceText).
  void AppendValueOnce(TokenRange value, std::string& out) {
    if (value.empty()) return;
    const std::string_view source = m_->SourceText(value);
    const int32_t known = value_index_.Find(source);
    if (known >= 0) {
      const ValueText& v = value_texts_[static_cast<size_t>(known)];
      AppendCopy(v.a, v.b, out);
      last_kind_ = v.last_kind;
      kind_before_last_ = v.kind_before_last;
      return;
    }
    const auto a = static_cast<uint32_t>(out.size());
    AppendValue(value.begin, value.end, /*verbatim=*/false, out);
    value_index_.Insert(source, static_cast<int32_t>(value_texts_.size()));
    value_texts_.push_back({a, static_cast<uint32_t>(out.size()), last_kind_, kind_before_last_});
  }

  // Shapes inside attribute values (operand_layout_constraints, outfeed_shape, ...) follow the
  // same rule as result shapes: a default layout is the same as none. When token i starts a shape
  // `type[dims]` whose layout `{rank-1,...,0}` is the default, prints the dims and returns the
  // index of the layout's last token so the caller skips it; otherwise returns i.
  uint32_t SkipDefaultLayoutAfterShape(uint32_t i, uint32_t end, std::string& out) {
    const auto& toks = m_->tokens;
    if (toks[i].kind != TokenKind::kIdent || i + 1 >= end ||
        toks[i + 1].kind != TokenKind::kLBracket) {
      return i;
    }
    if (!PrimitiveTypeFromName(PrintedText(i)).has_value()) return i;
    // Dims: comma-separated, each made of numbers (`16`, a float spelling that prints as one),
    // `?` or `<=`. Anything else is not a shape, in this round or the next: the decision must
    // not depend on how numbers were spelled, since the output respells them.
    uint32_t close = i + 2;
    int64_t rank = 0;
    bool in_dim = false;
    for (; close < end && toks[close].kind != TokenKind::kRBracket; ++close) {
      const TokenKind k = toks[close].kind;
      if (k == TokenKind::kComma) {
        if (!in_dim) return i;
        in_dim = false;
        continue;
      }
      if (k != TokenKind::kInt && k != TokenKind::kFloat && k != TokenKind::kOther &&
          k != TokenKind::kLessEq) {
        return i;
      }
      if (!in_dim) ++rank;
      in_dim = true;
    }
    if (rank > 0 && !in_dim) return i;  // A trailing comma.
    if (close >= end || close + 1 >= end || toks[close + 1].kind != TokenKind::kLBrace) return i;
    // Expect exactly {rank-1, ..., 0}, compared as the numbers the output spells: `{1,00}` and
    // `{1,0.}` are the default layout too, as their respelling `{1,0}` is in the next round.
    uint32_t j = close + 2;
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (j >= end || PrintedInteger(*m_, j) != d) return i;
      ++j;
      if (d > 0) {
        if (j >= end || toks[j].kind != TokenKind::kComma) return i;
        ++j;
      }
    }
    if (j >= end || toks[j].kind != TokenKind::kRBrace) return i;
    // A group right after the layout would become the shape's layout in the next round once
    // this one is dropped (fuzzer finding: `f32[1,0]{1,0}{1,0}`): such a layout is kept.
    if (j + 1 < end && toks[j + 1].kind == TokenKind::kLBrace) return i;
    for (uint32_t k = i + 1; k <= close; ++k) AppendTokenNormalized(k, out);
    return j;
  }

  // frontend_attributes={k="v", ...}: a map, so entries are sorted.
  void AppendSortedMap(const Attribute& a, std::string& out) {
    uint32_t begin = a.value.begin;
    uint32_t end = a.value.end;
    // Only a map is sorted: one brace group spanning the whole value. Anything else (`{a}{b}`)
    // is printed as written, or its pieces would regroup in the next round (fuzzer finding).
    if (end - begin < 2 || m_->tokens[begin].kind != TokenKind::kLBrace ||
        SkipGroupFrom(begin, end) != end || m_->tokens[end - 1].kind != TokenKind::kRBrace) {
      AppendValue(begin, end, /*verbatim=*/true, out);
      return;
    }
    std::vector<std::string> entries;
    uint32_t i = begin + 1;
    while (i < end - 1) {
      uint32_t j = i;
      while (j < end - 1 && m_->tokens[j].kind != TokenKind::kComma) {
        TokenKind k = m_->tokens[j].kind;
        if (k == TokenKind::kLBrace || k == TokenKind::kLParen || k == TokenKind::kLBracket) {
          j = SkipGroupFrom(j, end - 1);
        } else {
          ++j;
        }
      }
      std::string entry;
      AppendValue(i, j, /*verbatim=*/true, entry);
      entries.push_back(std::move(entry));
      i = j + 1;
    }
    std::sort(entries.begin(), entries.end());
    out += '{';
    for (size_t k = 0; k < entries.size(); ++k) {
      if (k) out += ',';
      out += entries[k];
    }
    out += '}';
  }

  void AppendLiteral(const Instruction& inst, std::string& out) {
    const PrimitiveType type = inst.shape.IsArray() ? inst.shape.type : PrimitiveType::kTuple;
    TokenKind prev = TokenKind::kEnd;
    for (uint32_t i = inst.literal.begin; i < inst.literal.end; ++i) {
      const Token& t = m_->tokens[i];
      if (t.kind == TokenKind::kInt || t.kind == TokenKind::kFloat || t.kind == TokenKind::kIdent) {
        // Spaced by what the respelled element reads back as, as in attribute values.
        std::string spelled;
        if (type == PrimitiveType::kTuple) {
          AppendCanonicalNumber(m_->TokenText(t), t.kind, spelled);
        } else {
          AppendCanonicalElement(m_->TokenText(t), t.kind, type, spelled);
        }
        const TokenKind kind = t.kind == TokenKind::kIdent && spelled == m_->TokenText(t)
                                   ? TokenKind::kIdent
                                   : SpelledNumberKind(spelled);
        if (NeedsSpaceBetween(prev, kind)) out += ' ';
        prev = kind;
        out += spelled;
      } else {
        if (NeedsSpaceBetween(prev, t.kind)) out += ' ';
        prev = t.kind;
        out += m_->TokenText(t);
      }
    }
  }

  // ---- per-computation structure ----
  // The text written straight into arena_ from `begin` on becomes the instruction's next text
  // piece, or extends its last one when that ends at `begin`.
  void EndText(size_t begin) {
    const auto end = static_cast<uint32_t>(arena_.size());
    if (end == begin) return;
    if (pieces_.size() > current_piece_begin_ && pieces_.back().kind == PieceKind::kText &&
        pieces_.back().b == begin) {
      pieces_.back().b = end;
      return;
    }
    pieces_.push_back({PieceKind::kText, static_cast<uint32_t>(begin), end});
  }

  // The canonical text of `inst`'s written shape, onto arena_ (`out`). A shape whose text the
  // parser met before is copied from where the first was printed: most of a large module's
  // lines repeat a few hundred shapes, and printing one costs ten times its copy.
  void AppendShapeText(const Instruction& inst, std::string& out) {
    const int32_t id = inst.shape_text_id;
    if (id < 0) {
      AppendCanonicalShape(inst.shape, out);
      return;
    }
    const auto slot = static_cast<size_t>(id);
    if (slot >= shape_texts_.size()) shape_texts_.resize(slot + 1);
    ShapeText& printed = shape_texts_[slot];
    if (printed.b != 0) {
      AppendCopy(printed.a, printed.b, out);
      return;
    }
    printed.a = static_cast<uint32_t>(out.size());
    AppendCanonicalShape(inst.shape, out);
    printed.b = static_cast<uint32_t>(out.size());
  }

  // The instruction's line without its name, as pieces: text is written straight into arena_
  // (no copy through a scratch string), references are pieces of their own.
  void BuildInstruction(const Instruction& inst, InstInfo& info, CompInfo& ci) {
    info.piece_begin = static_cast<uint32_t>(pieces_.size());
    info.callees_begin = static_cast<uint32_t>(ci.callees.size());
    current_piece_begin_ = info.piece_begin;
    std::string& out = arena_;
    size_t begin = out.size();
    if (inst.shape_written) {
      AppendShapeText(inst, out);
      out += ' ';
    }
    out += OpcodeName(inst.opcode.opcode);
    switch (inst.opcode.phase) {
      case AsyncPhase::kNone:
        break;
      case AsyncPhase::kStart:
        out += "-start";
        break;
      case AsyncPhase::kUpdate:
        out += "-update";
        break;
      case AsyncPhase::kDone:
        out += "-done";
        break;
    }
    out += '(';
    const bool plain = inst.opcode.phase == AsyncPhase::kNone;
    if (plain && inst.opcode.opcode == Opcode::kConstant) {
      AppendLiteral(inst, out);
      out += ')';
      EndText(begin);
    } else if (plain && inst.opcode.opcode == Opcode::kParameter) {
      char digits[24];
      const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, inst.parameter_number);
      out.append(digits, static_cast<size_t>(end - digits));
      out += ')';
      EndText(begin);
    } else {
      EndText(begin);
      pieces_.push_back({PieceKind::kOperands});
      begin = out.size();
      out += ')';
      EndText(begin);
    }
    // Attributes in name order; debug-only ones dropped.
    sorted_attrs_.clear();
    for (uint32_t k = 0; k < inst.attributes.size(); ++k) {
      if (inst.attributes[k].role != AttributeRole::kDebugOnly) sorted_attrs_.push_back(k);
    }
    std::sort(sorted_attrs_.begin(), sorted_attrs_.end(), [&](uint32_t x, uint32_t y) {
      return inst.attributes[x].name < inst.attributes[y].name;
    });
    // Callee positions: inst.callees holds them in written attribute order.
    callee_start_.assign(inst.attributes.size() + 1, 0);
    {
      uint32_t n = 0;
      for (uint32_t k = 0; k < inst.attributes.size(); ++k) {
        callee_start_[k] = n;
        if (inst.attributes[k].role == AttributeRole::kCallee) n += CountNames(inst.attributes[k]);
      }
      callee_start_[inst.attributes.size()] = n;
    }
    for (uint32_t k : sorted_attrs_) {
      const Attribute& a = inst.attributes[k];
      begin = out.size();
      out += ", ";
      out += a.name;
      out += '=';
      if (a.role == AttributeRole::kCallee) {
        EndText(begin);
        const bool braced = m_->tokens[a.value.begin].kind == TokenKind::kLBrace;
        const uint32_t count = callee_start_[k + 1] - callee_start_[k];
        pieces_.push_back({PieceKind::kCallees, k, (count << 1) | (braced ? 1u : 0u)});
        for (uint32_t n = callee_start_[k]; n < callee_start_[k + 1]; ++n) {
          ci.callees.push_back(inst.callees[n]);
        }
      } else if (a.role == AttributeRole::kControlPredecessors) {
        EndText(begin);
        pieces_.push_back({PieceKind::kControl});
      } else if (a.role == AttributeRole::kChannelId) {
        EndText(begin);
        // Renumbered when the value prints as a whole integer: `.0` prints as `0`, `0.1` is
        // not channel 0.
        const std::optional<int64_t> channel =
            a.value.end == a.value.begin + 1 ? PrintedInteger(*m_, a.value.begin) : std::nullopt;
        if (channel) {
          pieces_.push_back({PieceKind::kChannel, ChannelSlot(*channel)});
          const auto index = static_cast<int32_t>(&info - ci.insts.data());
          if (ci.channel_insts.empty() || ci.channel_insts.back() != index) {
            ci.channel_insts.push_back(index);
          }
        } else {
          begin = out.size();
          AppendValue(a.value.begin, a.value.end, false, out);
          EndText(begin);
        }
      } else if (a.role == AttributeRole::kFrontendAttributes) {
        AppendSortedMap(a, out);
        EndText(begin);
      } else {
        // AppendValue only ever takes back text it wrote itself (a comma before dropped
        // metadata), never the name before it.
        if (a.role == AttributeRole::kBackendConfig) {
          AppendValue(a.value.begin, a.value.end, /*verbatim=*/true, out);
        } else {
          AppendValueOnce(a.value, out);
        }
        EndText(begin);
      }
    }
    info.piece_end = static_cast<uint32_t>(pieces_.size());
    info.callees_end = static_cast<uint32_t>(ci.callees.size());
  }

  uint32_t CountNames(const Attribute& a) const {
    uint32_t n = 0;
    for (uint32_t i = a.value.begin; i < a.value.end; ++i) {
      if (m_->tokens[i].kind == TokenKind::kIdent) ++n;
    }
    return n;
  }

  // Channel ids are renamed by first appearance in the printed text; `slot` indexes the written
  // values so that printing can assign the canonical numbers.
  uint32_t ChannelSlot(int64_t channel) {
    return channel_slots_.emplace(channel, static_cast<uint32_t>(channel_slots_.size()))
        .first->second;
  }

  uint64_t HashInstruction(const Instruction& inst, const InstInfo& info, const CompInfo& ci) {
    sig_.clear();
    for (uint32_t p = info.piece_begin; p < info.piece_end; ++p) {
      const Piece& piece = pieces_[p];
      switch (piece.kind) {
        case PieceKind::kText:
          sig_.append(arena_, piece.a, piece.b - piece.a);
          break;
        case PieceKind::kOperands:
          sig_ += '\x01';
          for (uint32_t k = info.children_begin; k < info.operands_end; ++k) {
            AppendHash(ci.insts[ci.children[k]].hash);
          }
          break;
        case PieceKind::kCallees:
          sig_ += '\x02';
          break;  // Callee hashes are appended below, in canonical order.
        case PieceKind::kControl: {
          sig_ += '\x03';
          std::vector<uint64_t> hashes;
          for (int32_t pred : inst.control_predecessors) hashes.push_back(ci.insts[pred].hash);
          std::sort(hashes.begin(), hashes.end());
          for (uint64_t h : hashes) AppendHash(h);
          break;
        }
        case PieceKind::kChannel:
          sig_ += '\x04';
          break;
      }
    }
    for (uint32_t k = info.callees_begin; k < info.callees_end; ++k) {
      AppendHash(comps_[ci.callees[k]].hash);
    }
    return XXH3_64bits(sig_.data(), sig_.size());
  }

  void AppendHash(uint64_t h) { sig_.append(reinterpret_cast<const char*>(&h), sizeof h); }

  // Post-order from the root (operands in order, then control predecessors by hash), then from
  // each remaining user-less instruction in hash order.
  void OrderInstructions(int32_t root, CompInfo& ci) {
    const size_t n = ci.insts.size();
    auto by_hash = [&](int32_t x, int32_t y) {
      return ci.insts[x].hash != ci.insts[y].hash ? ci.insts[x].hash < ci.insts[y].hash : x < y;
    };
    // Scratch kept across computations: thousands of small ones must not pay for allocations.
    std::vector<uint8_t>& has_user = has_user_;
    has_user.assign(n, 0);
    for (int32_t child : ci.children) has_user[child] = 1;
    std::vector<uint8_t>& visited = visited_;
    visited.assign(n, 0);
    // The walk's stack is at most one frame an instruction deep: kept as an array with a top
    // index, it takes no capacity check per step. A large entry's walk (Mixtral's 30,000
    // instructions) comes after the parse, when everything waits for it.
    if (walk_stack_.size() < n) walk_stack_.resize(n);
    WalkFrame* const stack = walk_stack_.data();
    const int32_t* const children = ci.children.data();
    const uint32_t* const offsets = child_offsets_.data();
    ci.order.resize(n);
    int32_t* const order = ci.order.data();
    size_t ordered = 0;
    auto walk = [&](int32_t start) {
      if (visited[start]) return;
      visited[start] = 1;
      size_t top = 0;
      stack[0] = {start, offsets[start], offsets[start + 1]};
      while (true) {
        WalkFrame& f = stack[top];
        if (f.next == f.end) {
          order[ordered++] = f.inst;
          if (top == 0) return;
          --top;
          continue;
        }
        const int32_t next = children[f.next++];
        if (!visited[next]) {
          visited[next] = 1;
          stack[++top] = {next, offsets[next], offsets[next + 1]};
        }
      }
    };
    walk(root);
    std::vector<int32_t> sinks;
    for (size_t i = 0; i < n; ++i) {
      if (!has_user[i] && !visited[i]) sinks.push_back(static_cast<int32_t>(i));
    }
    std::sort(sinks.begin(), sinks.end(), by_hash);
    for (int32_t s : sinks) walk(s);
    // Every instruction is reached: from a user-less one, up its users (operands and control
    // predecessors are written before their users, so no cycle).
    ci.order.resize(ordered);
  }

  // Post-order of the call graph from the entry, callees in the order instructions name them,
  // of the `count` computations built.
  void OrderComputations(int32_t entry, size_t count) {
    comp_id_.assign(count, -1);
    std::vector<uint8_t> seen(count, 0);
    struct Frame {
      int32_t comp;
      size_t next;  // In the computation's walk_callees.
    };
    std::vector<Frame> stack{{entry, 0}};
    seen[entry] = 1;
    while (!stack.empty()) {
      const int32_t c = stack.back().comp;
      const std::vector<int32_t>& callees = comps_[c].walk_callees;
      int32_t push = -1;
      for (size_t& next = stack.back().next; next < callees.size();) {
        const int32_t callee = callees[next++];
        if (!seen[callee]) {
          seen[callee] = 1;
          push = callee;
          break;
        }
      }
      if (push >= 0) {
        stack.push_back({push, 0});
        continue;
      }
      comp_id_[c] = static_cast<int32_t>(print_order_.size());
      print_order_.push_back(c);
      stack.pop_back();
    }
    ordered_entry_ = entry;
  }

  // ---- printing ----
  // The header's line, without its newline (the body starts with it), appended to `out`.
  void PrintHeader(std::string& out) {
    out += "HloModule m";
    std::vector<const Attribute*> attrs;
    for (const Attribute& a : m_->attributes) {
      if (a.name == "origin_recovery_table" || IsDefaultHeaderValue(*m_, a)) continue;
      attrs.push_back(&a);
    }
    std::sort(attrs.begin(), attrs.end(),
              [](const Attribute* x, const Attribute* y) { return x->name < y->name; });
    for (const Attribute* a : attrs) {
      out += ", ";
      out += a->name;
      out += '=';
      if (a->name == "entry_computation_layout" && m_->entry_computation_layout) {
        const ProgramShape& p = *m_->entry_computation_layout;
        out += "{(";
        for (size_t k = 0; k < p.parameters.size(); ++k) {
          if (k) out += ", ";
          AppendCanonicalShape(p.parameters[k], out);
        }
        out += ")->";
        AppendCanonicalShape(p.result, out);
        out += '}';
      } else if (a->name == "frontend_attributes") {
        AppendSortedMap(*a, out);
      } else {
        AppendValue(a->value.begin, a->value.end, false, out);
      }
    }
  }

  // Records the source line of the line `w` ends, when asked for.
  void EndLine(TextWriter& w, uint32_t source_offset_plus_one) {
    w.Put('\n');
    if (options_.record_source_lines) {
      out_.source_lines.push_back(source_offset_plus_one ? m_->LineOf(source_offset_plus_one - 1)
                                                         : 0);
    }
  }

  // The most bytes an instruction's line takes: its text pieces, at most 13 bytes a reference
  // (`, i` or `,i` and 10 digits), and the name and newline around them.
  size_t LineBound(const InstInfo& info) const {
    size_t bytes = 32;  // `  ROOT `, the name, ` = `, the newline.
    for (uint32_t p = info.piece_begin; p < info.piece_end; ++p) {
      const Piece& piece = pieces_[p];
      switch (piece.kind) {
        case PieceKind::kText:
          bytes += piece.b - piece.a;
          break;
        case PieceKind::kOperands:
          bytes += 13 * size_t{info.operands_end - info.children_begin};
          break;
        case PieceKind::kCallees:
          bytes += 2 + 13 * size_t{piece.b >> 1};
          break;
        case PieceKind::kControl:
          bytes += 2 + 13 * size_t{info.children_end - info.operands_end};
          break;
        case PieceKind::kChannel:
          bytes += 20;
          break;
      }
    }
    return bytes;
  }

  // Instruction `i`'s line, `root` being its computation's root; `source_offset_plus_one` is
  // what EndLine records. Reads no Instruction (nor the computation, which a builder following
  // the parser may not yet have): printing runs in canonical order, and an Instruction is a few
  // hundred bytes, so a read of one is a cache miss on a large module (as much as the rest of
  // printing its line). With `holes`, the numbers of callees and channels are left out and
  // their places recorded there.
  void PrintInstruction(TextWriter& w, int32_t root, const CompInfo& ci, int32_t i,
                        uint32_t source_offset_plus_one, std::vector<Hole>* holes) {
    const InstInfo& info = ci.insts[i];
    w.Reserve(LineBound(info));
    w.Put("  ");
    if (i == root) w.Put("ROOT ");
    w.PutNumbered('i', ci.position[i]);
    w.Put(" = ");
    uint32_t callee_next = 0;
    for (uint32_t p = info.piece_begin; p < info.piece_end; ++p) {
      const Piece& piece = pieces_[p];
      switch (piece.kind) {
        case PieceKind::kText:
          w.Put(std::string_view(arena_).substr(piece.a, piece.b - piece.a));
          break;
        case PieceKind::kOperands:
          for (uint32_t k = info.children_begin; k < info.operands_end; ++k) {
            if (k != info.children_begin) w.Put(", ");
            w.PutNumbered('i', ci.position[ci.children[k]]);
          }
          break;
        case PieceKind::kCallees: {
          const uint32_t count = piece.b >> 1;
          const bool braced = (piece.b & 1) != 0;
          if (braced) w.Put('{');
          for (uint32_t k = 0; k < count; ++k) {
            if (k) w.Put(',');
            const int32_t callee = ci.callees[info.callees_begin + callee_next++];
            if (holes != nullptr && !counted_) {
              holes->push_back({w.written(), callee, false});
            } else {
              w.PutNumbered('c', comp_id_[callee]);
            }
          }
          if (braced) w.Put('}');
          break;
        }
        case PieceKind::kControl: {
          std::vector<int32_t> positions;  // Of the instruction's control predecessors.
          for (uint32_t k = info.operands_end; k < info.children_end; ++k) {
            positions.push_back(ci.position[ci.children[k]]);
          }
          std::sort(positions.begin(), positions.end());
          w.Put('{');
          for (size_t k = 0; k < positions.size(); ++k) {
            if (k) w.Put(',');
            w.PutNumbered('i', positions[k]);
          }
          w.Put('}');
          break;
        }
        case PieceKind::kChannel: {
          if (holes != nullptr && !counted_) {
            holes->push_back({w.written(), static_cast<int32_t>(piece.a), true});
          } else {
            w.PutDecimal(ChannelNumber(piece.a));
          }
          break;
        }
      }
    }
    EndLine(w, source_offset_plus_one);
  }

  void Print() {
    // Room for what the lines hold besides the arena's text: names (`  ROOT i12345 = `, a
    // newline), operand references (`, i123`) and each computation's braces. Sized from the
    // source, it fell short on modules of many small instructions and the text was copied
    // into a buffer twice its size at the end.
    size_t instructions = 0, references = 0;
    for (const CompInfo& ci : comps_) {
      instructions += ci.insts.size();
      references += ci.children.size();
    }
    out_.text.reserve(header_.size() + arena_.size() + 24 * instructions + 8 * references +
                      32 * comps_.size() + m_->source().size() / 64 + 256);
    AdviseHugePages(out_.text.data(), out_.text.capacity());
    out_.text += header_;
    TextWriter w(out_.text);
    PrintBody(
        w, [](TextWriter&) {},
        [](TextWriter& writer, std::string_view bytes) {
          writer.Reserve(bytes.size());
          writer.Put(bytes);
        });
    w.Finish();
  }

  // Everything after the header, into `w`; `after_line(w)` after each instruction's line and at
  // the end; `put_ahead(w, bytes)` puts bytes of the lines printed ahead (PrintAhead) after what
  // `w` holds.
  template <typename AfterLine, typename PutAhead>
  void PrintBody(TextWriter& w, AfterLine after_line, PutAhead put_ahead) {
    w.Reserve(1);
    EndLine(w, 0);
    for (int32_t c : print_order_) {
      const Computation& comp = m_->computations[c];
      const CompInfo& ci = comps_[c];
      const std::string_view thread = ci.printed_thread;
      // The lines around the body: 21 bytes at most each, and the thread's name.
      w.Reserve(64 + thread.size());
      EndLine(w, 0);
      if (c == m_->entry) w.Put("ENTRY ");
      w.PutNumbered('c', comp_id_[c]);
      w.Put(" {");
      EndLine(w, comp.offset + 1);
      if (ci.printed_ahead) {
        PutWithHoles(w, ahead_, ci.ahead_begin, ci.ahead_end, holes_, ci.holes_begin, ci.holes_end,
                     after_line, put_ahead);
      } else if (c == shared_.comp) {
        PrintShared(w, ci, after_line, put_ahead);
      } else {
        for (int32_t i : ci.order) {
          PrintInstruction(w, comp.root, ci, i,
                           options_.record_source_lines ? comp.instructions[i].offset + 1 : 0,
                           nullptr);
          after_line(w);
        }
      }
      w.Reserve(64 + thread.size());
      w.Put('}');
      if (!thread.empty()) {
        w.Put(", execution_thread=");
        w.Put(thread);
      }
      EndLine(w, 0);
    }
    after_line(w);
  }

  // Lines printed ahead, ahead[begin, end), with the numbers of their holes
  // [holes_begin, holes_end) put in.
  template <typename AfterLine, typename PutAhead>
  void PutWithHoles(TextWriter& w, std::string_view ahead, uint64_t begin, uint64_t end,
                    const std::vector<Hole>& holes, uint32_t holes_begin, uint32_t holes_end,
                    AfterLine after_line, PutAhead put_ahead) {
    uint64_t from = begin;
    for (uint32_t h = holes_begin; h < holes_end; ++h) {
      const Hole& hole = holes[h];
      put_ahead(w, ahead.substr(from, hole.at - from));
      w.Reserve(20);
      if (hole.channel) {
        w.PutDecimal(ChannelNumber(static_cast<uint32_t>(hole.value)));
      } else {
        w.PutNumbered('c', comp_id_[hole.value]);
      }
      after_line(w);  // Many holes close together must not make one long piece.
      from = hole.at;
    }
    put_ahead(w, ahead.substr(from, end - from));
    after_line(w);
  }

  // The text through a buffer of a few tens of kilobytes (which stays in cache) to `sink`,
  // which is told the length first: a key hashes it before the text. The length is counted
  // from what printing will write (BodyBytes), and checked against what it wrote.
  Status StreamText(CanonicalTextSink& sink) {
    constexpr size_t kChunkBytes = size_t{64} << 10;
    constexpr size_t kDirectBytes = size_t{4} << 10;
    std::string buffer;
    buffer.reserve(kChunkBytes + 4096);
    buffer += header_;
    const uint64_t total = buffer.size() + (counted_ ? body_bytes_ : BodyBytes());
    sink.Begin(total);
    uint64_t sent = 0;
    TextWriter w(buffer);
    const auto flush = [&](TextWriter& writer) {
      sink.Append(writer.Written());
      sent += writer.written();
      writer.Rewind();
    };
    PrintBody(
        w,
        [&](TextWriter& writer) {
          if (writer.written() >= kChunkBytes) flush(writer);
        },
        [&](TextWriter& writer, std::string_view bytes) {
          // Lines printed ahead go to the sink as they are, but for short runs between holes,
          // which are copied and go with what follows.
          if (bytes.size() < kDirectBytes) {
            writer.Reserve(bytes.size());
            writer.Put(bytes);
            return;
          }
          if (writer.written() != 0) flush(writer);
          sent += bytes.size();
          for (; !bytes.empty(); bytes.remove_prefix(std::min(bytes.size(), kChunkBytes))) {
            sink.Append(bytes.substr(0, kChunkBytes));
          }
        });
    if (w.written() != 0) sink.Append(w.Written());
    sent += w.written();
    if (sent != total) {
      return Internal(m_->filename() + ": canonical text printed " + std::to_string(sent) +
                      " bytes where " + std::to_string(total) + " were counted");
    }
    return Status::Ok();
  }

  // The bytes PrintBody writes, counted without writing them: each computation's lines as
  // FinishComputation counted them, with the numbers of their callees and channels, and the
  // lines around them. Assigns the channel numbers (first appearance in printing order) that
  // printing then reads back.
  // Reads nothing of the module (see OrderComputationsAhead): the computations' threads as
  // FinishComputation was told them.
  uint64_t BodyBytes() {
    uint64_t bytes = 1;  // The header's newline.
    for (int32_t c : print_order_) {
      const CompInfo& ci = comps_[c];
      const std::string_view thread = ci.printed_thread;
      // `\n[ENTRY ]cN {\n` ... `}[, execution_thread=T]\n`
      bytes += 1 + (c == ordered_entry_ ? 6 : 0) + 1 +
               DecimalDigits(static_cast<uint32_t>(comp_id_[c])) + 3 + 2 +
               (thread.empty() ? 0 : 19 + thread.size());
      bytes += ci.line_bytes;
      for (int32_t callee : ci.walk_callees)
        bytes += DecimalDigits(static_cast<uint32_t>(comp_id_[callee]));
      if (!ci.channel_insts.empty()) bytes += ChannelBytes(ci);
    }
    return bytes;
  }

  // The number channel slot `slot` prints as: the next one at its first appearance in printing
  // order (the count numbers them all when the text is streamed, and printing finds them).
  // Looked up before it is added: an emplace makes (and frees) a node even for a slot the map
  // holds.
  int64_t ChannelNumber(uint32_t slot) {
    auto it = channel_numbers_.find(slot);
    if (it == channel_numbers_.end()) {
      it = channel_numbers_.emplace(slot, static_cast<int64_t>(channel_numbers_.size() + 1)).first;
    }
    return it->second;
  }

  // The digits of the channel numbers of `ci`'s lines, in printing order.
  uint64_t ChannelBytes(const CompInfo& ci) {
    std::vector<int32_t> printed = ci.channel_insts;
    std::sort(printed.begin(), printed.end(),
              [&](int32_t x, int32_t y) { return ci.position[x] < ci.position[y]; });
    uint64_t bytes = 0;
    for (int32_t i : printed) {
      const InstInfo& info = ci.insts[i];
      for (uint32_t p = info.piece_begin; p < info.piece_end; ++p) {
        const Piece& piece = pieces_[p];
        if (piece.kind != PieceKind::kChannel) continue;
        bytes += DecimalDigits(static_cast<uint64_t>(ChannelNumber(piece.a)));
      }
    }
    return bytes;
  }

  // The bytes of PrintInstruction's line for an instruction that its place in the order does
  // not decide: all but `ROOT `, the digits of its own number and of the numbers of its
  // children (FinishComputation adds them), and those of its callees' and channels' numbers
  // (BodyBytes). Counted as the instruction arrives, on the builder's thread beside the parser.
  uint64_t FixedLineBytes(const InstInfo& info) const {
    uint64_t bytes = 2 + 1 + 3 + 1;  // `  iN = ` and the newline, but for N.
    // `i` each, `separator` between them.
    auto references = [](uint32_t begin, uint32_t end, uint64_t separator) -> uint64_t {
      return begin == end ? 0 : separator * (end - begin - 1) + (end - begin);
    };
    for (uint32_t p = info.piece_begin; p < info.piece_end; ++p) {
      const Piece& piece = pieces_[p];
      switch (piece.kind) {
        case PieceKind::kText:
          bytes += piece.b - piece.a;
          break;
        case PieceKind::kOperands:
          bytes += references(info.children_begin, info.operands_end, 2);
          break;
        case PieceKind::kCallees: {
          // `cN` each, comma-separated, braced or not; the digits are BodyBytes'.
          const uint32_t count = piece.b >> 1;
          bytes += ((piece.b & 1) != 0 ? 2 : 0) + (count == 0 ? 0 : 2 * count - 1);
          break;
        }
        case PieceKind::kControl:
          // The same predecessors PrintInstruction reads from the instruction, in another order.
          bytes += 2 + references(info.operands_end, info.children_end, 1);
          break;
        case PieceKind::kChannel:
          break;  // Only digits, BodyBytes'.
      }
    }
    return bytes;
  }

  const Module* m_;
  const CanonicalOptions options_;
  const bool scheduled_;
  uint32_t first_elided_ = 0;  // Source offset + 1 of the first elided constant met, if refused.
  std::string header_;         // The module's header line, printed at the first StartComputation.
  std::vector<CompInfo> comps_;
  std::vector<Piece> pieces_;
  std::string arena_;
  // AppendValueOnce's texts in arena_, and their source texts.
  struct ValueText {
    uint32_t a;
    uint32_t b;
    TokenKind last_kind;
    TokenKind kind_before_last;
  };
  std::vector<ValueText> value_texts_;
  // Where in arena_, [a, b), each shape the parser memoized (Instruction::shape_text_id) was
  // first printed; b is 0 until it is (a printed shape is never empty).
  struct ShapeText {
    uint32_t a = 0;
    uint32_t b = 0;
  };
  std::vector<ShapeText> shape_texts_;
  NameTable value_index_;
  std::string sig_;
  std::vector<uint32_t> sorted_attrs_;
  std::vector<uint32_t> callee_start_;
  std::unordered_map<int64_t, uint32_t> channel_slots_;
  std::unordered_map<uint32_t, int64_t> channel_numbers_;
  std::vector<int32_t> comp_id_;
  std::vector<int32_t> print_order_;
  // The entry they were ordered from, once they are (OrderComputations); -1 before.
  int32_t ordered_entry_ = -1;
  // Where the text is streamed: BodyBytes, once counted ahead with the computations ordered
  // (OrderComputationsAhead), which numbers the channels too. Lines printed after that (shared
  // lines from the back) print the numbers of callees and channels where they would leave
  // holes; Finish, which may run meanwhile, writes neither this nor what it stands for.
  bool counted_ = false;
  uint64_t body_bytes_ = 0;
  // The lines printed ahead, of every computation printed ahead, and their holes (PrintAhead).
  std::string ahead_;
  std::vector<Hole> holes_;
  SharedLines shared_;  // The computation whose lines two threads print, if any.
  // OrderInstructions' scratch.
  std::vector<uint8_t> has_user_;
  std::vector<uint8_t> visited_;
  struct WalkFrame {
    int32_t inst;
    uint32_t next;  // In CompInfo::children, up to end.
    uint32_t end;
  };
  std::vector<WalkFrame> walk_stack_;
  // The computation being built's children's bounds in CompInfo::children, one array: the
  // children of instruction i are [child_offsets_[i], child_offsets_[i + 1]). The walk steps
  // from instruction to instruction through these 4 bytes each, where it read them from
  // InstInfo, 40 bytes each, and waited on a cache miss for most steps of a large entry.
  std::vector<uint32_t> child_offsets_;
  // Its callees' bounds in CompInfo::callees, the same way, and its instructions' hashes.
  std::vector<uint32_t> callee_offsets_;
  std::vector<uint64_t> inst_hashes_;
  TokenKind last_kind_ = TokenKind::kEnd;
  TokenKind kind_before_last_ = TokenKind::kEnd;  // The kind of the token before last_kind_'s.
  size_t current_piece_begin_ = 0;  // Pieces of the instruction being built start here.
  CanonicalModule out_;
};

}  // namespace canonical_internal

Result<CanonicalModule> Canonicalize(const Module& module, const CanonicalOptions& options) {
  return canonical_internal::Canonicalizer(module, options).Run();
}

CanonicalBuilder::CanonicalBuilder(const Module& module, const CanonicalOptions& options)
    : impl_(std::make_unique<canonical_internal::Canonicalizer>(module, options)) {}

CanonicalBuilder::~CanonicalBuilder() = default;

void CanonicalBuilder::StartComputation() { impl_->StartComputation(); }

void CanonicalBuilder::AddInstructions(const Instruction* insts, uint32_t begin, uint32_t end) {
  impl_->AddInstructions(insts, begin, end);
}

bool CanonicalBuilder::FinishComputation(int32_t root, TokenRange execution_thread,
                                         bool print_ahead, bool share_print) {
  return impl_->FinishComputation(root, impl_->ThreadText(execution_thread), print_ahead,
                                  share_print);
}

bool CanonicalBuilder::FinishComputation(int32_t root, std::string_view execution_thread,
                                         bool print_ahead, bool share_print) {
  return impl_->FinishComputation(root, execution_thread, print_ahead, share_print);
}

void CanonicalBuilder::OrderComputationsAhead(int32_t entry, size_t computations) {
  impl_->OrderComputationsAhead(entry, computations);
}

void CanonicalBuilder::PrintSharedFromBack() { impl_->PrintSharedFromBack(); }

Result<CanonicalModule> CanonicalBuilder::Finish(const Module& module) {
  return impl_->Finish(module);
}

}  // namespace hlocache::hlo
