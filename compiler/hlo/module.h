// The HLO IR: a module of computations of instructions, as parsed from HLO text.
//
// Structure a compiler can walk: every instruction has its opcode, result shape, operands (indices
// of instructions in the same computation), called computations (indices into the module) and
// attributes. Attribute values are kept as token ranges of the source: exactly what was written,
// to be interpreted by whoever needs them (the canonical printer normalizes them; a code
// generator reads dimensions with the helpers below).
//
// Ownership: a Module owns its source text and tokens; every string_view in it points into that
// text and lives as long as the Module. Modules are move-only.
// Thread safety: immutable after parsing; concurrent const access is safe.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/small_vector.h"
#include "common/status.h"
#include "compiler/hlo/opcode.h"
#include "compiler/hlo/shape.h"
#include "compiler/hlo/token.h"

namespace hlocache::hlo {

struct TokenRange {
  uint32_t begin = 0;  // Index of the first token.
  uint32_t end = 0;    // One past the last token.
  bool empty() const { return begin == end; }
};

// What the parser recognized an instruction attribute as, so that passes over a module tell the
// few attributes they treat apart without reading the name's bytes again (the canonical key of a
// large module read each name, spread over megabytes of source, once more).
enum class AttributeRole : uint8_t {
  kOther,
  kDebugOnly,  // metadata, statistics, origin: left out of keys (IsDebugOnlyAttribute).
  kCallee,     // to_apply, body, branch_computations, ... (IsCalleeAttribute).
  kControlPredecessors,
  kChannelId,
  kFrontendAttributes,
  kBackendConfig,
};

// The role of an instruction attribute named `name`.
AttributeRole InstructionAttributeRole(std::string_view name);
// The role of an attribute name that instructions may carry (IsKnownInstructionAttribute), or
// nullopt for any other name: both questions in one lookup, as the parser asks them of every
// attribute.
std::optional<AttributeRole> KnownInstructionAttributeRole(std::string_view name);

struct Attribute {
  std::string_view name;
  TokenRange value;
  uint32_t offset = 0;  // Source offset of the attribute name (for diagnostics).
  AttributeRole role = AttributeRole::kOther;  // Instruction attributes: set by the parser.
};

// The members are ordered so that the small ones share one word at the end instead of padding
// each to eight bytes: a large module's tens of thousands of instructions are written by the
// parser and read by the canonicalizer from memory, and every byte less is less to move.
struct Instruction {
  std::string_view name;  // Without '%'. Empty for nested anonymous operands.
  Shape shape;
  // Instruction indices in the same computation; up to four kept in place (no allocation).
  SmallVector<int32_t, 4> operands;
  // In written order; names unique. The Attributes live in the Module (Module::KeepAttributes),
  // as the source its string_views point into does: one block for thousands of instructions
  // instead of a heap block each.
  std::span<const Attribute> attributes;
  // Computation indices, in written attribute order; instruction indices, as written. Kept in
  // the Module as the attributes are (Module::KeepIndices): a large module's thousands of
  // reduces each allocated and freed a vector for their one callee.
  std::span<const int32_t> callees;
  std::span<const int32_t> control_predecessors;
  TokenRange literal;             // constant(...): the literal's tokens.
  int64_t parameter_number = -1;  // parameter(N).
  uint32_t offset = 0;            // Source offset of the instruction's first token.
  // Equal for instructions whose written shapes are the same text, as the parser's shape memo
  // tells (the shape was parsed once, then copied): the canonicalizer prints each such shape
  // once. -1 for a shape the memo does not hold (a tuple, a layout with tiles) or none written.
  int32_t shape_text_id = -1;
  OpcodeSpelling opcode{Opcode::kParameter};
  bool shape_written = false;   // False when the text left the shape to inference.
  bool shape_inferred = false;  // Filled in by InferMissingShapes (shape_inference.h).
  bool literal_elided = false;  // The literal is `{...}`: values unknown.

  const Attribute* FindAttribute(std::string_view attr_name) const;
  // Whether `shape` holds the instruction's shape: written, or inferred from its operands.
  bool has_shape() const { return shape_written || shape_inferred; }
};

struct Computation {
  std::string_view name;                  // Without '%'.
  std::vector<Instruction> instructions;  // Textual order.
  int32_t root = -1;                      // Index of the root instruction.
  std::vector<int32_t> parameters;        // Instruction index by parameter number.
  TokenRange execution_thread;            // `execution_thread="..."` value, empty if absent.
  uint32_t offset = 0;
};

struct ProgramShape {
  std::vector<Shape> parameters;
  Shape result;
};

class Module {
 public:
  Module(std::unique_ptr<std::string> source, std::string filename);
  Module(Module&&) = default;
  Module& operator=(Module&&) = default;

  std::string_view name;
  std::vector<Attribute> attributes;                     // Header attributes, in written order.
  std::vector<Computation> computations;                 // Textual order.
  int32_t entry = -1;                                    // Index of the entry computation.
  std::optional<ProgramShape> entry_computation_layout;  // From the header, when written.
  std::vector<Token> tokens;

  std::string_view source() const { return *source_; }
  const std::string& filename() const { return filename_; }
  std::string_view TokenText(const Token& t) const { return source().substr(t.offset, t.length); }
  std::string_view TokenText(uint32_t index) const { return TokenText(tokens[index]); }
  // The source bytes from the first token of `range` (not empty) to the end of its last,
  // whatever lies between them. Text from a token's start to a token's end lexes to the same
  // tokens wherever it stands, so equal texts are equal token sequences: the parser's shape memo
  // and the canonicalizer's attribute values are found again by this text.
  std::string_view SourceText(TokenRange range) const {
    const Token& first = tokens[range.begin];
    const Token& last = tokens[range.end - 1];
    return source().substr(first.offset, size_t{last.offset} + last.length - first.offset);
  }
  const Attribute* FindAttribute(std::string_view attr_name) const;
  bool IsScheduled() const;
  bool HasElidedConstants() const;
  uint32_t LineOf(uint32_t offset) const;  // 1-based source line of a byte offset.

  // Reads an attribute value of the form {1,2,3} (or a single integer) as integers.
  Result<std::vector<int64_t>> IntList(const Attribute& attr) const;
  // Reads an attribute value that is a single integer.
  Result<int64_t> Int(const Attribute& attr) const;
  // Reads an attribute value that is a single number (epsilon=1e-05): its tokens joined, as
  // strtod reads them.
  Result<double> Float(const Attribute& attr) const;
  // The computations `inst` calls through its attribute `attr_name` (to_apply=, body=,
  // branch_computations={...}), as indices into `computations`; empty when it has no such
  // attribute. (inst.callees holds the callees of all such attributes, in written order.)
  std::vector<int32_t> CalleesOf(const Instruction& inst, std::string_view attr_name) const;

  // Copy `written` into storage the Module owns and return the copy, which stays where it is
  // (and valid) for the Module's lifetime, moves included: what Instruction::attributes,
  // callees and control_predecessors view. Used by the parser; not thread-safe (the Module is
  // being built).
  std::span<const Attribute> KeepAttributes(std::span<const Attribute> written) {
    return kept_attributes_.Keep(written);
  }
  std::span<const int32_t> KeepIndices(std::span<const int32_t> written) {
    return kept_indices_.Keep(written);
  }

 private:
  // Arrays copied into blocks of at least kBlock elements, filled front to back; blocks never
  // move. One block for thousands of instructions instead of a heap block each.
  template <typename T, size_t kBlock>
  class KeptArrays {
   public:
    // In line for the usual empty array (most instructions call and control nothing).
    std::span<const T> Keep(std::span<const T> written) {
      return written.empty() ? std::span<const T>() : Copy(written);
    }

   private:
    [[gnu::noinline]] std::span<const T> Copy(std::span<const T> written) {
      if (blocks_.empty() || blocks_.back().capacity - blocks_.back().used < written.size()) {
        const size_t capacity = std::max(kBlock, written.size());
        blocks_.push_back({std::make_unique<T[]>(capacity), capacity, 0});
      }
      Block& block = blocks_.back();
      T* kept = block.data.get() + block.used;
      std::copy(written.begin(), written.end(), kept);
      block.used += written.size();
      return {kept, written.size()};
    }

    struct Block {
      std::unique_ptr<T[]> data;
      size_t capacity = 0;
      size_t used = 0;
    };
    std::vector<Block> blocks_;
  };

  std::unique_ptr<std::string> source_;
  std::string filename_;
  mutable std::vector<uint32_t> line_starts_;    // Built on first LineOf().
  KeptArrays<Attribute, 4096> kept_attributes_;  // 128 KiB a block.
  KeptArrays<int32_t, 8192> kept_indices_;       // 32 KiB a block.
};

}  // namespace hlocache::hlo
