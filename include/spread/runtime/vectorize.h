#pragma once
// SPREAD_VECTOR_CLONES: compile a hot loop for AVX-512 and AVX2 besides the baseline x86-64 and pick the clone
// when the program loads (GCC function multiversioning), so a portable build still runs it at full vector width.
// The library is compiled with -fno-math-errno: otherwise std::sqrt keeps loops scalar (it may set errno).
// GCC's "avx2" target has no FMA, so results differ in the last bits between AVX-512 and AVX2 machines (not
// between runs on one machine). Other compilers and architectures get the baseline build of the loop.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define SPREAD_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SPREAD_VECTOR_CLONES
#endif

// SPREAD_INLINE_INTO_CLONES: a helper of a SPREAD_VECTOR_CLONES function, inlined into each clone so that it is
// compiled for that clone's target too (a helper left out of line runs at the baseline's vector width).
#if defined(__GNUC__)
#define SPREAD_INLINE_INTO_CLONES __attribute__((always_inline)) inline
#else
#define SPREAD_INLINE_INTO_CLONES inline
#endif
