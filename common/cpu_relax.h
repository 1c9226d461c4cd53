// A hint to the CPU that the caller spins waiting for another thread (x86's `pause`): the
// spinning core yields to its sibling and leaves the loop without a memory-order misprediction.
// Nothing elsewhere. Thread safety: any thread.
#pragma once

namespace hlocache {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace hlocache
