/* The core's double-precision multiply-add peak, measured: what BLAS's products are measured
 * against in BENCHMARKS.md (issue 20, ninth session).  Twelve independent chains
 * a ← a·m + c of vector FMAs, enough to cover the FMA latency on two pipes; the chains' sum is
 * printed so that none is optimised away, with its closed form as a check.
 *
 *   cc -O2 -march=native benchmarks/fma_peak.c -o fma_peak -lm && ./fma_peak
 *
 * One thread: run it on an idle machine.  Needs FMA3 (AVX2-era x86); the 512-bit line only
 * where the compiler targets AVX-512. */
#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define CHAINS 12
static const long N = 20000000;          /* iterations: 12 · N FMAs per vector lane */
static const double M = 0.999999, C = 1e-7;

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }

/* a_N = M^N a_0 + C (1 − M^N) / (1 − M), summed over the chains' starts a_0 = 1, …, CHAINS */
static double closed_form(int lanes) {
    double mn = pow(M, (double)N), s = 0.0;
    for (int i = 0; i < CHAINS; i++) s += mn * (1.0 + i) + C * (1.0 - mn) / (1.0 - M);
    return s * lanes;
}

static void report(const char *what, int lanes, double best, double sum) {
    double want = closed_form(lanes);
    printf("%s: %.1f GFLOP/s per core (sum %.12g, closed form %.12g, rel. diff %.1e)\n", what,
           (double)N * CHAINS * lanes * 2 / best / 1e9, sum, want, fabs(sum - want) / want);
}

/* best of five timings of CHAINS chains of N FMAs on vectors of type V (LANES doubles), their
 * final sum into *sum */
#define MEASURE(V, LANES, SET1, FMADD, best, sum)                                         \
    do {                                                                                  \
        V a_[CHAINS], m_ = SET1(M), c_ = SET1(C);                                         \
        double o_[LANES];                                                                 \
        best = 1e30;                                                                      \
        for (int r = 0; r < 5; r++) {                                                     \
            for (int i = 0; i < CHAINS; i++) a_[i] = SET1(1.0 + i);                       \
            double t = now();                                                             \
            for (long n = 0; n < N; n++)                                                  \
                _Pragma("GCC unroll 12")                                                  \
                for (int i = 0; i < CHAINS; i++) a_[i] = FMADD(a_[i], m_, c_);            \
            t = now() - t;                                                                \
            if (t < best) best = t;                                                       \
        }                                                                                 \
        sum = 0.0;                                                                        \
        for (int i = 0; i < CHAINS; i++) {                                                \
            memcpy(o_, &a_[i], sizeof o_);                                                \
            for (int k = 0; k < LANES; k++) sum += o_[k];                                 \
        }                                                                                 \
    } while (0)

int main(void) {
    double best, sum;
#ifdef __AVX512F__
    MEASURE(__m512d, 8, _mm512_set1_pd, _mm512_fmadd_pd, best, sum);
    report("512-bit FMA", 8, best, sum);
#endif
    MEASURE(__m256d, 4, _mm256_set1_pd, _mm256_fmadd_pd, best, sum);
    report("256-bit FMA", 4, best, sum);
    return 0;
}
