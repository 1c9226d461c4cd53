#include "compiler/hlo/canonical_pipeline.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common/helper_thread.h"
#include "common/spin_wait.h"
#include "compiler/hlo/canonical_builder.h"
#include "compiler/hlo/parser.h"

namespace hlocache::hlo {
namespace {

// Instructions the parser appends before it hands them over: one lock, and at most one wake-up
// of the builder, per batch rather than per instruction.
constexpr uint32_t kBatch = 256;
// Checks of the hand-over count a builder that has caught up makes before it sleeps: about
// 50 us, as long as the parser takes over a batch. Sleeping at each batch and being woken
// cost the parser a futex call a batch, a tenth of its time on a large module.
constexpr int kSpinsBeforeSleep = 1000;
// How long the parser, at the end, spins for the builder to finish before it blocks.
constexpr std::chrono::microseconds kEndSpin{2000};

// Hands the parser's instructions to a CanonicalBuilder on a thread of its own. The parser's
// side is the ParseListener calls; the builder's side is Work(). Shared state is under mu_.
class Pipeline final : public ParseListener {
 public:
  explicit Pipeline(const CanonicalOptions& options) : options_(options) {}
  ~Pipeline() override { worker_.Join(); }  // Before the state it reads goes.
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  void HeaderParsed(const Module& module) override {
    module_ = &module;
    builder_.emplace(module, options_);
    // Without a thread to be had, the builder takes everything at the end, on this one.
    builds_at_end_ = !worker_.Try([this] { Work(); });
  }

  void InstructionAdded(const Computation& comp) override {
    if (++unpublished_ < kBatch) return;
    std::lock_guard<std::mutex> lock(mu_);
    current_ = comp.instructions.data();
    current_size_ = static_cast<uint32_t>(comp.instructions.size());
    PublishLocked();
  }

  void InstructionsWillMove(const Computation&) override {
    std::unique_lock<std::mutex> lock(mu_);
    current_ = nullptr;  // Not to be read again: the next batch names the new array.
    WaitUntilNotReadingLocked(lock);
  }

  void ComputationLeft(const Computation& comp, bool parsed) override {
    if (!parsed) {
      // The parse has failed: nothing the builder would do is wanted, and the array goes.
      std::unique_lock<std::mutex> lock(mu_);
      current_ = nullptr;
      current_size_ = 0;
      failed_ = true;
      WaitUntilNotReadingLocked(lock);
      return;
    }
    // Handed over at once only to a builder that has caught up and waits for it; to a busy one,
    // with the next batch. Taking the lock, and the line the builder spins on, for each of
    // Mixtral's 3,700 computations cost the parser 0.7 to 2.7 ms (timed) of a 9.4 to 13.3 ms
    // parse.
    // The array stays where it is, and the builder may go on reading the part of it that was
    // handed over (current_).
    // The thread's text is looked up here, where the module is sure to be where it was: the
    // builder may finish the last computation after the module has moved.
    left_.push_back(
        {comp.instructions.data(), static_cast<uint32_t>(comp.instructions.size()), comp.root,
         comp.execution_thread.empty() ? std::string_view()
                                       : module_->TokenText(comp.execution_thread.begin)});
    if (unpublished_ < kBatch && !caught_up_.load(std::memory_order_relaxed)) return;
    std::lock_guard<std::mutex> lock(mu_);
    current_ = nullptr;
    current_size_ = 0;
    PublishLocked();
  }

  void ParseEnded(bool parsed) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      whole_.insert(whole_.end(), left_.begin(), left_.end());
      left_.clear();
      // Every computation is in whole_ now, the last one too: the builder must not take its
      // array again through current_ once it has built it from there.
      current_ = nullptr;
      current_size_ = 0;
      if (module_ != nullptr) {
        entry_ = module_->entry;
        computations_ = module_->computations.size();
      }
      ended_ = true;
      handovers_.fetch_add(1, std::memory_order_release);
      work_cv_.notify_one();
    }
    if (builds_at_end_) {
      Work();
    } else if (worker_.running()) {  // None was started when the parse failed before the header.
      // After a parse that succeeded, the parser's thread goes on once the builder has read the
      // last instruction: while the builder orders the last computation (most of a millisecond
      // for a large entry), the module may move and its instructions be freed. After one that
      // failed, the module goes, and the builder is waited for whole. The thread itself is
      // joined when the pipeline goes: it may still print shared lines (Work).
      WaitUntilSet(parsed ? released_ : built_, kEndSpin);
    }
  }

  // Whether the builder has built every computation (it may still print shared lines, which
  // Finish waits for). Once it has, print_shared() is known.
  bool built() const { return built_.load(std::memory_order_acquire); }
  // Whether the builder's thread prints the lines of the last computation beside Finish
  // (CanonicalBuilder::FinishComputation's share_print), and so is busy until Finish ends.
  bool print_shared() const { return print_shared_; }

  // After a parse that succeeded: `module` is the parsed module (moved since). A parse that
  // succeeds has told HeaderParsed; were it not so, the module is canonicalized here whole.
  Result<CanonicalModule> Finish(const Module& module) {
    if (!builder_) return Canonicalize(module, options_);
    if (worker_.running()) WaitUntilSet(built_, kEndSpin);
    return builder_->Finish(module);
  }

 private:
  struct WholeComputation {
    const Instruction* instructions;
    uint32_t size;
    int32_t root;
    std::string_view execution_thread;  // The token's text, in the source; empty for none.
  };

  void PublishLocked() {
    whole_.insert(whole_.end(), left_.begin(), left_.end());
    left_.clear();
    published_ += unpublished_;
    unpublished_ = 0;
    handovers_.fetch_add(1, std::memory_order_release);
    // The builder is woken for a batch's worth, not for each small computation.
    if (builder_waiting_ && published_ - consumed_ >= kBatch) work_cv_.notify_one();
  }

  void WaitUntilNotReadingLocked(std::unique_lock<std::mutex>& lock) {
    parser_waiting_ = true;
    idle_cv_.wait(lock, [this] { return !reading_current_; });
    parser_waiting_ = false;
  }

  // The builder's thread: takes what the parser handed over, in order, until the parse ends.
  void Work() {
    size_t comp = 0;    // The computation being built: its index in textual order.
    uint32_t next = 0;  // Its next instruction.
    bool started = false;
    bool caught_up = false;  // What caught_up_ says: stored only when it changes.
    std::unique_lock<std::mutex> lock(mu_);
    while (!failed_) {
      const bool whole_waits = comp < whole_.size();
      const bool current_waits = current_ != nullptr && current_size_ > next;
      if ((whole_waits || current_waits) && caught_up) {
        caught_up_.store(caught_up = false, std::memory_order_relaxed);
      }
      if (whole_waits) {
        const WholeComputation whole = whole_[comp];
        // Printed while the parser runs; once it has ended, it waits for this thread, and the
        // lines are printed where they are streamed, without a copy: those of the last
        // computation, by this thread and Finish's at once, when there is a thread (and they
        // are many).
        const bool print_ahead = !ended_;
        const bool last = ended_ && comp + 1 == whole_.size();
        lock.unlock();
        if (!started) builder_->StartComputation();
        builder_->AddInstructions(whole.instructions, next, whole.size);
        if (last) SetAndWake(released_);  // No instruction is read from here on.
        if (builder_->FinishComputation(whole.root, whole.execution_thread, print_ahead,
                                        /*share_print=*/last && !builds_at_end_)) {
          print_shared_ = true;
        }
        lock.lock();
        consumed_ += whole.size - next;
        ++comp;
        next = 0;
        started = false;
        continue;
      }
      if (current_waits) {
        const Instruction* instructions = current_;
        const uint32_t end = current_size_;
        reading_current_ = true;
        lock.unlock();
        if (!started) builder_->StartComputation();
        started = true;
        builder_->AddInstructions(instructions, next, end);
        lock.lock();
        reading_current_ = false;
        if (parser_waiting_) idle_cv_.notify_one();
        consumed_ += end - next;
        next = end;
        continue;
      }
      if (ended_) break;
      // Caught up with the parser: spin a while for the next batch before sleeping.
      if (!caught_up) caught_up_.store(caught_up = true, std::memory_order_relaxed);
      const uint64_t seen = handovers_.load(std::memory_order_relaxed);
      lock.unlock();
      bool more = false;
      for (int spin = 0; spin < kSpinsBeforeSleep && !more; ++spin) {
        CpuRelax();
        more = handovers_.load(std::memory_order_acquire) != seen;
      }
      lock.lock();
      if (more || ended_ || failed_) continue;
      builder_waiting_ = true;
      work_cv_.wait(lock);
      builder_waiting_ = false;
    }
    lock.unlock();
    // Every computation is built; what is left reads nothing of the module. Ordered here, the
    // computations' numbers are printed in the shared lines rather than put in by Finish.
    SetAndWake(released_);
    if (print_shared_) builder_->OrderComputationsAhead(entry_, computations_);
    SetAndWake(built_);
    builder_->PrintSharedFromBack();
  }

  const CanonicalOptions options_;
  std::optional<CanonicalBuilder> builder_;  // Made once the header is parsed.
  HelperThread worker_;
  bool builds_at_end_ = false;  // No thread could be started.
  // The parser's own: instructions appended, and computations left whole, since the last batch.
  uint32_t unpublished_ = 0;
  std::vector<WholeComputation> left_;

  std::mutex mu_;
  std::condition_variable work_cv_;  // The builder waits here for instructions.
  std::condition_variable idle_cv_;  // The parser waits here for the builder to leave an array.
  // Set by the parser:
  std::vector<WholeComputation> whole_;   // Computations parsed whole, in order.
  const Instruction* current_ = nullptr;  // The computation being parsed (after whole_)...
  uint32_t current_size_ = 0;             // ... and how many of its instructions are handed over.
  uint64_t published_ = 0;                // Instructions handed over in all.
  std::atomic<uint64_t> handovers_{0};    // Batches handed over: read without the lock.
  bool ended_ = false;
  bool failed_ = false;
  bool parser_waiting_ = false;
  // Set by the builder:
  uint64_t consumed_ = 0;
  bool reading_current_ = false;  // It reads current_'s array, outside the lock.
  bool builder_waiting_ = false;
  // Whether it has caught up with the parser (spins or sleeps): read by the parser without the
  // lock, to hand it a whole computation at once.
  std::atomic<bool> caught_up_{false};
  // Set once the builder has read every instruction it will (it may still order and hash the
  // last computation, from what it made of them): the parser's thread may move the module.
  std::atomic<bool> released_{false};
  // Set once every computation is built (Work then prints the shared lines, if any): Finish
  // may start.
  std::atomic<bool> built_{false};
  bool print_shared_ = false;       // Written by the builder before built_, read after it.
  const Module* module_ = nullptr;  // The module being parsed; read on the parser's thread only.
  // Its entry and number of computations, as the parse ended (under mu_ with ended_).
  int32_t entry_ = -1;
  size_t computations_ = 0;
};

}  // namespace

Result<ParsedCanonical> ParseAndCanonicalize(std::string text, std::string filename,
                                             const CanonicalOptions& options,
                                             size_t two_thread_bytes) {
  if (text.size() < two_thread_bytes || std::thread::hardware_concurrency() < 2) {
    auto module = ParseModule(std::move(text), std::move(filename));
    if (!module) return Error(module.error());
    auto canonical = Canonicalize(*module, options);
    if (!canonical) return Error(canonical.error());
    return ParsedCanonical{std::move(*module), std::move(*canonical)};
  }
  Pipeline pipeline(options);
  auto module = ParseModule(std::move(text), std::move(filename), &pipeline);
  if (!module) return Error(module.error());
  auto canonical = pipeline.Finish(*module);
  if (!canonical) return Error(canonical.error());
  return ParsedCanonical{std::move(*module), std::move(*canonical)};
}

Result<CanonicalModule> CanonicalizeText(std::string text, std::string filename,
                                         const CanonicalOptions& options, size_t two_thread_bytes) {
  if (text.size() < two_thread_bytes || std::thread::hardware_concurrency() < 2) {
    auto module = ParseModule(std::move(text), std::move(filename));
    if (!module) return Error(module.error());
    return Canonicalize(*module, options);
  }
  Pipeline pipeline(options);
  auto module = ParseModule(std::move(text), std::move(filename), &pipeline);
  if (!module) return Error(module.error());
  // Printing reads what the builder made of the instructions, not the instructions (but for
  // their source lines, when those are recorded), so they are freed before the key is done,
  // while other work goes on: freed after it, Mixtral's 42,000 took 0.8 ms of the thread that
  // waits for it. This thread frees them while the builder orders the last computation; then,
  // if the builder's thread prints that computation's lines from the back (Mixtral's 30,000),
  // this thread frees the rest too and takes fewer of the lines; else a helper frees the rest
  // (slower: the blocks are of another thread's heap) while this thread prints.
  struct Freed {
    std::vector<Instruction> instructions;
    std::vector<int32_t> parameters;
  };
  std::vector<Freed> freed;
  HelperThread freer;
  if (!options.record_source_lines) {
    freed.reserve(module->computations.size());
    for (Computation& comp : module->computations) {
      freed.push_back({std::move(comp.instructions), std::move(comp.parameters)});
    }
    size_t done = 0;
    while (done < freed.size() && !pipeline.built()) freed[done++] = Freed();
    if (done < freed.size()) {  // The builder has built everything.
      if (pipeline.print_shared()) {
        std::vector<Freed>().swap(freed);
      } else {
        // Without a thread, they go with the module, after the print.
        freer.Try([&freed] { std::vector<Freed>().swap(freed); });
      }
    }
  }
  auto canonical = pipeline.Finish(*module);
  freer.Join();
  return canonical;
}

}  // namespace hlocache::hlo
