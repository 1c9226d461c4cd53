// How generated C++ is cut so that big modules compile in minutes: long functions into
// segments, and the module into several translation units compiled side by side.
//
// g++'s time on one function grows faster than its length (measured here: 7 ms an HLO
// instruction in functions of 100, 70 ms in one of 4000), so a computation's straight-line code
// is cut into segment functions of bounded size, called in order by the computation's own
// function, which owns every buffer. A segment takes as parameters the buffers its text
// names; the owner allocates a heap buffer before the first segment that names it and frees it
// after the last one.
//
// The pieces of a module (functions, large constants) are then packed into translation units
// of bounded size. Every unit starts with the same shared text (the prelude, every prototype,
// every small constant), so any unit can call any function.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hlocache::compiler {

struct CpuLoweringOptions {
  // A computation's code is cut into a new segment once the current one holds this many bytes
  // of generated text; 0 cuts after every instruction that wrote code (tests use it to check
  // that every op's code stands alone).
  size_t segment_bytes = 48 << 10;
  // Pieces are packed into translation units of about this many bytes of definitions (a
  // module below it is one unit); 0 gives each piece its own unit.
  size_t unit_bytes = 1536 << 10;
  // At most this many units, however big the module.
  size_t max_units = 16;
};

// One function or constant of the generated module.
struct CodePiece {
  std::string declaration;  // Goes into every unit ("int f(int);"), may be empty.
  std::string definition;   // Goes into exactly one unit.
};

// The packing: `shared` starts every unit; pieces keep their order and are spread over as few
// units as `options` allow, each holding about the same number of bytes. Deterministic: the
// same pieces give the same units.
std::vector<std::string> PackUnits(const std::string& shared, const std::vector<CodePiece>& pieces,
                                   const CpuLoweringOptions& options);

// The identifiers of C++ `text` that are keys of `names`, in order of first appearance.
std::vector<std::string> NamesUsed(std::string_view text,
                                   const std::map<std::string, std::string>& names);

// The distinct identifiers of C++ `text`, in order of first appearance.
std::vector<std::string> Identifiers(std::string_view text);

// `text` with each identifier that is a key of `to` replaced by its value; the rest as is.
std::string RenameNames(std::string_view text, const std::map<std::string, std::string>& to);

// `text` with every `name[subscript]` (the identifier `name`, then exactly `subscript`)
// replaced by `with`; nullopt when `name` does not occur, or occurs other than so.
std::optional<std::string> ReplaceSubscripted(std::string_view text, std::string_view name,
                                              std::string_view subscript, std::string_view with);

// A buffer of a computation's function: a C++ name for a pointer to its elements.
struct BufferDecl {
  std::string name;
  std::string type;  // The element's C type.
  int64_t count = 1;
  int64_t element_bytes = 1;
  bool on_heap = false;
  // When set, not a buffer of its own: this parameter of the function (a result the caller
  // provides, written in place instead of copied into at the end).
  std::string alias;
};

// A pointer variable of a computation's function: a C++ name for a `const type*` that the code
// of one instruction assigns (a loop's current state, which swaps between buffers each step)
// and later instructions read as the leaf of a value. `targets` are the pointer expressions it
// may hold; the buffers and pointers they name stay allocated, and are never assumed unaliased,
// for as long as the variable is named.
struct PointerDecl {
  std::string name;
  std::string type;  // The element's C type.
  std::vector<std::string> targets;
};

// The C++ function of one computation, cut into segments. Callers append each instruction's
// code to body() and call EndInstruction() after it.
//
// A computation short enough for one segment is one plain function, its buffers local arrays
// (small) or heap allocations (large). A longer one becomes segment functions taking one
// argument, the frame: an array of pointers to the computation's parameters, results and
// buffers. Each instruction's code is then a block that first defines, from the frame, just
// the pointers its text names: their live ranges stay as short as in the plain function (g++
// spends most of its time on register pressure when hundreds of pointers live across a
// function). The owner function fills the frame, keeps small buffers in one arena and large
// ones in hc_heap (the prelude's), and frees each large one after the last segment naming it,
// or naming a pointer variable that may point to it.
class SegmentedFunction {
 public:
  // `signature` is "int NAME(const T* p0, ..., R* r0, ...)"; `params` names its parameters
  // with their pointer types ("const float*").
  SegmentedFunction(std::string name, std::string signature,
                    std::vector<std::pair<std::string, std::string>> params, size_t segment_bytes);

  std::string& body() { return chunk_; }
  // A buffer the function owns, named in code appended after this call.
  void Declare(BufferDecl decl);
  // A pointer variable, null until assigned, named in code appended after this call. A segment
  // reads it from the frame at the start of each instruction's block and writes it back at the
  // end, so that its value carries from one instruction to the next.
  void DeclarePointer(PointerDecl decl);
  // Closes the current instruction's code, starting a new segment when the current one is full.
  void EndInstruction();

  // What a name of this function (a parameter, result, buffer or pointer variable) is, for
  // code that receives it as an argument: its pointer type ("const float*") and whether that
  // code may take it as unaliased (__restrict), as the function's own blocks do. Nullopt for a
  // name the function does not define.
  struct NamedPointer {
    std::string type;
    bool unaliased = false;
  };
  std::optional<NamedPointer> Pointer(const std::string& name) const;

  // The pieces: the segments' functions, then the owner's. `epilogue` (the copy of the results)
  // runs after the last segment, in the owner; the buffers it names are never freed early.
  std::vector<CodePiece> Finish(const std::string& epilogue) const;

 private:
  struct Segment {
    std::vector<std::string> chunks;  // One per instruction that wrote code.
    size_t bytes = 0;
  };
  std::vector<CodePiece> FinishOne(const std::string& epilogue) const;

  std::string name_;
  std::string signature_;
  std::vector<std::pair<std::string, std::string>> params_;
  size_t segment_bytes_;
  std::string chunk_;
  std::vector<Segment> segments_{Segment()};
  std::vector<BufferDecl> buffers_;
  std::vector<size_t> declared_in_;  // The segment each buffer was declared in.
  std::vector<PointerDecl> pointers_;
  std::map<std::string, std::string> pointer_types_;  // Every name above -> its pointer type.
};

}  // namespace hlocache::compiler
