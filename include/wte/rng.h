// A small, portable, seedable random number generator whose whole state is four integers, so a
// checkpoint can store it and a resumed run continues the same stream on any platform
// (std::mt19937's distributions are implementation-defined; this is not).
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

namespace wte {

/// xoshiro256** 1.0 (Blackman & Vigna 2018, "Scrambled linear pseudorandom number generators"),
/// seeded through SplitMix64 as its authors recommend.
class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { reseed(seed); }

  void reseed(uint64_t seed) {
    for (uint64_t& word : state_) {
      seed += 0x9e3779b97f4a7c15ULL;  // SplitMix64
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      word = z ^ (z >> 31);
    }
  }

  /// Next 64 random bits.
  uint64_t next() {
    const uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }

  /// Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  /// Uniform integer in [0, n), n > 0 (Lemire's multiply-shift; the tiny bias for n << 2^64 is
  /// irrelevant for shuffling training data).
  uint64_t below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }

  /// Standard normal by the Box-Muller transform (one value per call; the pair's second is dropped
  /// so the stream position depends only on the number of calls).
  double normal() {
    const double u1 = 1.0 - uniform();  // (0, 1]: log is finite
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
  }

  const std::array<uint64_t, 4>& state() const { return state_; }
  void set_state(const std::array<uint64_t, 4>& s) { state_ = s; }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::array<uint64_t, 4> state_{};
};

}  // namespace wte
