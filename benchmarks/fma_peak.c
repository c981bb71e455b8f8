/* The core's double-precision multiply-add peak, measured: what BLAS's products are measured
 * against in BENCHMARKS.md (issue 20, ninth session).  Twelve independent chains
 * a ← a·m + c of vector FMAs, enough to cover the FMA latency on two pipes; the chains' sum is
 * printed so that none is optimised away, with its closed form as a check.
 *
 *   cc -O2 -march=native benchmarks/fma_peak.c -o fma_peak && ./fma_peak
 *
 * One thread: run it on an idle machine.  Needs FMA3 (AVX2-era x86); the 512-bit line only
 * where the compiler targets AVX-512. */
#include <immintrin.h>
#include <math.h>
#include <stdio.h>
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

int main(void) {
#ifdef __AVX512F__
    {
        __m512d a[CHAINS], m = _mm512_set1_pd(M), c = _mm512_set1_pd(C);
        double best = 1e30;
        for (int r = 0; r < 5; r++) {
            for (int i = 0; i < CHAINS; i++) a[i] = _mm512_set1_pd(1.0 + i);
            double t = now();
            for (long n = 0; n < N; n++)
#pragma GCC unroll 12
                for (int i = 0; i < CHAINS; i++) a[i] = _mm512_fmadd_pd(a[i], m, c);
            t = now() - t;
            if (t < best) best = t;
        }
        double s = 0.0;
        for (int i = 0; i < CHAINS; i++) s += _mm512_reduce_add_pd(a[i]);
        report("512-bit FMA", 8, best, s);
    }
#endif
    {
        __m256d a[CHAINS], m = _mm256_set1_pd(M), c = _mm256_set1_pd(C);
        double best = 1e30;
        for (int r = 0; r < 5; r++) {
            for (int i = 0; i < CHAINS; i++) a[i] = _mm256_set1_pd(1.0 + i);
            double t = now();
            for (long n = 0; n < N; n++)
#pragma GCC unroll 12
                for (int i = 0; i < CHAINS; i++) a[i] = _mm256_fmadd_pd(a[i], m, c);
            t = now() - t;
            if (t < best) best = t;
        }
        double s = 0.0, o[4];
        for (int i = 0; i < CHAINS; i++) { _mm256_storeu_pd(o, a[i]); s += o[0] + o[1] + o[2] + o[3]; }
        report("256-bit FMA", 4, best, s);
    }
    return 0;
}
