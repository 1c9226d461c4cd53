// Compiles the CPU prelude on its own, as the build's check that it is valid C++ (generated
// units are compiled only when a module is, at run time).
#include "compiler/codegen/prelude/hc_cpu.h"
