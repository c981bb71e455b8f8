"""How a system evolves: kernels on plain arrays, no Datasets, no validation.

* ``numpy_ref``  – the NumPy reference: the update written as plainly as possible.
* ``numba_cpu``  – @njit(cache=True) scalar loops, the default for small per-step work.
* ``vectorised`` – the same updates written once against an array namespace ``xp``
  (NumPy or CuPy) with preallocated buffers: one BLAS product and in-place ufuncs per
  inner step over the whole batch.

Every simulation kernel takes the precomputed input drive and returns ``(H, bad)``:
H (B, T, D) the states h_1..h_T, and ``bad`` (B,) the 0-based step at which each sequence
first had a non-finite entry (T when it never did).  With ``stop=True`` a sequence is not
advanced past that step and the rest of its H is left unset.
"""
