#include "src/model/memory.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "wte/error.h"

namespace wte {

// `bytes` zeroed bytes, 64-byte aligned. calloc does not write memory that is fresh from the kernel
// (every large block): it is zero already, and its pages are faulted in only when first used.
// `touch` writes the zeros anyway, so the page faults happen here and not in a timed kernel.
//
// Buffers of 4 MiB or more (a V×C table, its gradient and moments, the activation arena) go on
// 2 MiB pages: a random row of a table larger than the TLB's reach (4096 entries of 4 KiB on Zen 5)
// then costs no page walk (the gather, wte profile), and neither does a pass over several large
// buffers. Measured on the AMD EPYC (Zen 5) virtual machine of the README's figures, `wte profile
// step --config configs/embedding_only.ini` (AdamW reads 4 and writes 3 tensors of 8.5 MB): with
// a 16 MiB threshold (those tensors on 4 KiB pages) the 1-thread AdamW took 1.3-8.1 ms from run to
// run, with this one 1.07-1.15 ms (interleaved runs). They are aligned to 2 MiB inside the block
// and advised (madvise(MADV_HUGEPAGE)) before any page is touched, so the kernel backs them with
// huge pages where transparent huge pages are `madvise` or `always`; the advice is only a hint
// (nothing changes when THP is off). Rounding up to whole 2 MiB pages costs less than half of a
// buffer's size; smaller buffers pay no rounding.
namespace {

constexpr size_t kHugePage = size_t{2} << 20, kHugeMin = size_t{4} << 20;

std::atomic<size_t> g_in_use{0};  // aligned_bytes_in_use()

}  // namespace

size_t aligned_allocation_bytes(size_t bytes) {
  bytes = bytes < 64 ? 64 : (bytes + 63) / 64 * 64;
  if (bytes >= kHugeMin) bytes = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  return bytes;
}

size_t aligned_bytes_in_use() { return g_in_use.load(); }

void* allocate_aligned(size_t bytes, bool touch) {
  bytes = aligned_allocation_bytes(bytes);
  const bool huge = bytes >= kHugeMin;
  const size_t align = huge ? kHugePage : 64;
  void* raw = std::calloc(1, bytes + align);
  if (raw == nullptr) throw Error("out of memory allocating " + std::to_string(bytes) + " bytes");
  // calloc aligns to 16: raw + 16 rounded up to `align` is at most raw + align, inside the extra
  // `align` bytes, and leaves room for the block's address and size just before it.
  const uintptr_t aligned =
      (reinterpret_cast<uintptr_t>(raw) + 2 * sizeof(void*) + align - 1) & ~uintptr_t{align - 1};
  if (huge) madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);  // a hint
  reinterpret_cast<void**>(aligned)[-1] = raw;
  reinterpret_cast<size_t*>(aligned)[-2] = bytes;
  g_in_use += bytes;
  void* p = reinterpret_cast<void*>(aligned);
  if (touch) std::memset(p, 0, bytes);
  return p;
}

void free_aligned(void* p) {
  if (p == nullptr) return;
  g_in_use -= reinterpret_cast<size_t*>(p)[-2];
  std::free(reinterpret_cast<void**>(p)[-1]);
}

}  // namespace wte
