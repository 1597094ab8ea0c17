// The collector's entry points are called from C: NVTX's injection table, CUPTI's buffer and
// API callbacks, NCCL's profiler plugin, CUDA's injection hook. An exception that unwinds into
// a C frame ends the host process, so each entry point goes through NoThrow, which stops any
// exception (in practice std::bad_alloc), counts it, and returns a fallback value.
#pragma once

#include <cstdint>
#include <type_traits>

namespace rankscope::collector {

// Exceptions stopped so far in this process; the rank file's meta `collector.faults`.
uint64_t CollectorFaults();
// Counts one; the first prints one line to stderr naming the exception being handled.
void NoteCollectorFault() noexcept;

template <auto Function, auto Fallback = 0>
struct NoThrow;

// NoThrow<&F>::Call has F's signature, so it fills the same function-pointer slot.
template <typename R, typename... Args, R (*Function)(Args...), auto Fallback>
struct NoThrow<Function, Fallback> {
  static R Call(Args... args) noexcept {
    try {
      return Function(args...);
    } catch (...) {
      NoteCollectorFault();
      if constexpr (!std::is_void_v<R>) return static_cast<R>(Fallback);
    }
  }
};

}  // namespace rankscope::collector
