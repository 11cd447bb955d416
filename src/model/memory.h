// The one allocator of wte's large buffers: parameters, gradients, optimizer moments, the
// activation arenas (float32 and bf16).
#pragma once

#include <cstddef>
#include <memory>

namespace wte {

/// `bytes` zeroed bytes (at least 64), aligned to 64 bytes, or to 2 MiB and advised as
/// transparent huge pages when 4 MiB or more. With `touch`, the pages are written now (the page
/// faults happen here, not in a timed kernel). Free with free_aligned. Throws wte::Error when
/// the memory cannot be allocated.
void* allocate_aligned(size_t bytes, bool touch);

/// The bytes allocate_aligned(bytes, ·) hands out: `bytes` rounded up to a multiple of 64 (at least
/// 64), and from 4 MiB up to whole 2 MiB pages. (The heap block behind it is larger by the
/// alignment, up to 64 bytes or 2 MiB in front of the buffer, never touched.) The memory plan
/// (src/model/memory_plan.h) counts buffers with it.
size_t aligned_allocation_bytes(size_t bytes);

/// The aligned_allocation_bytes of every allocate_aligned buffer not yet freed, process-wide.
size_t aligned_bytes_in_use();

/// Frees what allocate_aligned returned (nullptr: nothing).
void free_aligned(void* p);

/// Deleter of a std::unique_ptr to allocate_aligned's memory.
struct AlignedDeleter {
  void operator()(void* p) const { free_aligned(p); }
};

}  // namespace wte
