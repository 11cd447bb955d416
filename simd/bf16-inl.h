// Rounding float32 vectors to bfloat16 (round to nearest, ties to even; NaN kept quiet) and storing
// them: the one place this arithmetic lives, for simd/bf16.cc and for kernels that write a bf16
// copy of their output while it is still in cache. The method and its edge cases: simd/bf16.cc;
// the scalar reference: ref::f32_to_bf16 (src/reference/kernels.h).
//
// A Highway "-inl.h" header: included once per target (after hwy/foreach_target.h and
// hwy/highway.h), hence the include guard toggled by HWY_TARGET_TOGGLE.

// Per-target include guard.
#if defined(WTE_SIMD_BF16_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef WTE_SIMD_BF16_INL_H_
#undef WTE_SIMD_BF16_INL_H_
#else
#define WTE_SIMD_BF16_INL_H_
#endif

#include <cstddef>
#include <cstdint>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace wte {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Stores the bf16 bits nearest each lane of v (a float vector of d) to dst[0, Lanes(d)).
template <class D>
HWY_INLINE void StoreBf16(D d, hn::Vec<D> v, uint16_t* HWY_RESTRICT dst) {
  const hn::RebindToUnsigned<D> du;  // u32 lanes
  const hn::RebindToSigned<D> di;    // i32 lanes
  const hn::Rebind<uint16_t, D> d16;
  const auto u = hn::BitCast(du, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
  const auto rounded = hn::ShiftRight<16>(hn::Add(u, hn::Add(lsb, hn::Set(du, 0x7FFFu))));
  const auto quiet_nan = hn::Or(hn::ShiftRight<16>(u), hn::Set(du, 0x0040u));
  // |x| bits above +Inf's are NaN (a signed compare: the sign bit is cleared first).
  const auto abs_bits = hn::BitCast(di, hn::And(u, hn::Set(du, 0x7FFFFFFFu)));
  const auto is_nan = hn::RebindMask(du, hn::Gt(abs_bits, hn::Set(di, 0x7F800000)));
  const auto out = hn::IfThenElse(is_nan, quiet_nan, rounded);
  // Every lane is in [0, 0xFFFF]: the saturating i32 -> u16 demotion keeps it exactly.
  hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, out)), d16, dst);
}

// Stores the bf16 bits nearest each lane of v0 then of v1 (full float vectors of d) to
// dst[0, 2·Lanes(d)): StoreBf16's bits for both, for fewer instructions per element. The rounding
// is done in place on the u32 bits (the bf16 value ends up in each lane's upper half, which holds
// StoreBf16's result exactly: the carry into bit 16 is the same, and a NaN gets the quiet bit
// 0x00400000 there), and one ConcatOdd of u16 lanes (a single two-source permute on AVX-512) then
// gathers the upper halves of both vectors in order, instead of a shift and a saturating demotion
// per vector. IsNaN is the unordered compare, true exactly when |x|'s bits exceed +Inf's.
#if HWY_TARGET != HWY_SCALAR
// The u16 vector StoreBf16x2 stores (the method above).
template <class D>
HWY_INLINE hn::Vec<hn::Repartition<uint16_t, D>> Bf16Pair(D d, hn::Vec<D> v0, hn::Vec<D> v1) {
  const hn::RebindToUnsigned<D> du;        // u32 lanes
  const hn::Repartition<uint16_t, D> d16;  // twice as many u16 lanes
  const auto round_in_place = [&](hn::Vec<D> v) {
    const auto u = hn::BitCast(du, v);
    const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
    const auto rounded = hn::Add(u, hn::Add(lsb, hn::Set(du, 0x7FFFu)));
    const auto quiet_nan = hn::Or(u, hn::Set(du, 0x00400000u));
    return hn::BitCast(d16, hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), quiet_nan, rounded));
  };
  // Little-endian lanes: a u32 lane's upper half is the odd u16 lane.
  return hn::ConcatOdd(d16, round_in_place(v1), round_in_place(v0));
}
#endif

template <class D>
HWY_INLINE void StoreBf16x2(D d, hn::Vec<D> v0, hn::Vec<D> v1, uint16_t* HWY_RESTRICT dst) {
#if HWY_TARGET == HWY_SCALAR
  StoreBf16(d, v0, dst);
  StoreBf16(d, v1, dst + hn::Lanes(d));
#else
  const hn::Repartition<uint16_t, D> d16;
  hn::StoreU(Bf16Pair(d, v0, v1), d16, dst);
#endif
}

// StoreBf16x2 with a non-temporal store (dst aligned to 2·Lanes(d) u16s), for a copy much larger
// than the caches that nothing reads soon: its lines are not read for ownership first nor left to
// evict the caller's working set. The caller ends its writes with hwy::FlushStream().
template <class D>
HWY_INLINE void StreamBf16x2(D d, hn::Vec<D> v0, hn::Vec<D> v1, uint16_t* HWY_RESTRICT dst) {
#if HWY_TARGET == HWY_SCALAR
  StoreBf16x2(d, v0, v1, dst);
#else
  const hn::Repartition<uint16_t, D> d16;
  hn::Stream(Bf16Pair(d, v0, v1), d16, dst);
#endif
}

// dst[i] = bf16(src[i]) for i in [0, n), on the calling thread: pairs of full vectors, then a full
// vector, then a one-lane tail.
HWY_INLINE void ConvertRowToBf16(uint16_t* HWY_RESTRICT dst, const float* HWY_RESTRICT src,
                                 size_t n) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  size_t i = 0;
  for (; i + 2 * L <= n; i += 2 * L)
    StoreBf16x2(d, hn::LoadU(d, src + i), hn::LoadU(d, src + i + L), dst + i);
  for (; i + L <= n; i += L) StoreBf16(d, hn::LoadU(d, src + i), dst + i);
  const hn::CappedTag<float, 1> d1;
  for (; i < n; ++i) StoreBf16(d1, hn::LoadU(d1, src + i), dst + i);
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace wte
HWY_AFTER_NAMESPACE();

#endif  // WTE_SIMD_BF16_INL_H_
