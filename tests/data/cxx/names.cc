// A C++ program for spelunk's name model (issue 26, item 0): templates, overloads, a lambda,
// std::vector growth, a function GCC splits into hot and cold parts, and an inlined
// std::atomic update. crates/cli/tests/cxx_names_emulated.rs builds it with g++ -O2 -g,
// records it under `spelunk record --emulate` and finds the lines marked `// LINE:name` below
// in the report, annotate and allocation sites. Keep each marker on the line it names.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace shapes {
template <typename T>
struct Grid {
  std::vector<T> cells;
  __attribute__((noinline)) T sum_every(unsigned long stride) const {
    T total = 0;
    for (unsigned long i = 0; i < cells.size(); i += stride)
      total += cells[i];  // LINE:sum_every
    return total;
  }
};
}  // namespace shapes

// Two overloads of one name.
__attribute__((noinline)) long walk(const long* a, unsigned long n) {
  long s = 0;
  for (unsigned long i = 0; i < n; i++) s += a[i];  // LINE:walk_long
  return s;
}
__attribute__((noinline)) double walk(const double* a, unsigned long n) {
  double s = 0;
  for (unsigned long i = 0; i < n; i++) s += a[i];  // LINE:walk_double
  return s;
}

std::atomic<long> hits{0};

// The atomic increment is inlined from <bits/atomic_base.h>; its samples belong to this line.
__attribute__((noinline)) void count_hits(const int* flags, int n) {
  for (int i = 0; i < n; i++)
    if (flags[i]) hits.fetch_add(1, std::memory_order_relaxed);  // LINE:count_hits
}

// std::vector growth: the allocations are made by libstdc++ (operator new, called from the
// inlined _M_realloc_insert), and belong to the push_back line.
__attribute__((noinline)) std::vector<long> grow(int n) {
  std::vector<long> v;
  for (int i = 0; i < n; i++) v.push_back(i);  // LINE:grow
  return v;
}

long rare_total = 0;
__attribute__((cold, noinline)) static void note_rare(long v) { rare_total += v; }

// GCC moves the unlikely branch (it calls a cold function) into a separate `check.cold`
// piece; it still runs for one element in 64, so both pieces have samples.
__attribute__((noinline)) long check(const long* a, int n) {
  long odd = 0;
  for (int i = 0; i < n; i++) {
    if (__builtin_expect(a[i] % 64 == 63, 0)) {
      note_rare(a[i]);
      odd += a[i / 2] * 3;  // LINE:check_cold
    }
    odd += a[i] & 1;  // LINE:check
  }
  return odd;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 200000;
  int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  std::vector<long> big = grow(n);
  std::vector<double> reals(big.begin(), big.end());
  shapes::Grid<long> grid{big};
  std::vector<int> flags(n);
  for (int i = 0; i < n; i++) flags[i] = i % 3 == 0;
  long acc = 0;
  double racc = 0;
  auto each_round = [&](int r) {
    long local = 0;
    for (int i = r; i < n; i += 7) local += big[i] ^ r;  // LINE:lambda
    return local;
  };
  for (int r = 0; r < rounds; r++) {
    acc += walk(big.data(), big.size());
    racc += walk(reals.data(), reals.size());
    acc += grid.sum_every(1);
    count_hits(flags.data(), n);
    acc += check(big.data(), n);
    acc += each_round(r);
  }
  std::printf("%ld %.0f %ld\n", acc, racc, hits.load());
  return 0;
}
