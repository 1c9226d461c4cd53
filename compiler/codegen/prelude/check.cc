// Compiles the CPU prelude on its own, as the build's check that it is valid C++ (generated
// units are compiled only when a module is, at run time).
#include "compiler/codegen/prelude/hc_cpu.h"
#include "compiler/codegen/prelude/hc_cpu_contractions.h"
#include "compiler/codegen/prelude/hc_cpu_threads.h"

// Generated units continue with the code the prelude shares with the interpreter.
#include "compiler/semantics/half.h"

namespace hlocache_rt {
HLOCACHE_HALF_CODE
}  // namespace hlocache_rt
