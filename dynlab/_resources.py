"""Resource guards: estimate what a request needs before allocating it, refuse what cannot run.

``check_memory(nbytes, param, what)`` raises ``ParameterError(param, ...)`` when an estimate of
the bytes a request allocates exceeds the memory this machine has available, naming the
estimate and what it is for ("needs ≈ 298 GiB for U (200000×200000 float64); this machine has
22 GiB available").  ``check_work(seconds, param, what)`` refuses a computation whose estimated
time, at an optimistic rate, exceeds ``max_seconds()`` (1 hour unless ``DYNLAB_MAX_HOURS`` says
otherwise).  Both are called with Python ints, so an absurd size (``hidden=10**23``) is refused
here instead of overflowing NumPy ("Maximum allowed dimension exceeded").

The estimates are lower bounds of the real peak where they can be (a run that passes may still
use a little more: temporaries, the interpreter); the rates are optimistic, so a refusal is
never of a run that would have finished within the limit on this machine.

This module imports only the standard library and ``dynlab.errors``.
"""
from __future__ import annotations

import contextvars
import math
import os

from .errors import ParameterError

#: Bytes of a float64 / complex128 entry.
F8 = 8
C16 = 16
#: Optimistic rates for the work estimates: dense float64 flops per second (BLAS on a few
#: cores), and the cost floor of one scalar-loop iteration (a step of the inner recursion, a
#: time step) however small D is.
FLOPS_PER_SECOND = 1e10
SECONDS_PER_ITERATION = 1e-8
#: The default limit on the estimated time of one computation (``DYNLAB_MAX_HOURS`` changes it).
DEFAULT_MAX_HOURS = 1.0


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation on this machine, or None when unknown.

    Linux: ``MemAvailable`` from /proc/meminfo (free memory plus the page cache and reclaimable
    slabs the kernel can give back without swapping — what ``free`` shows as *available*).
    Elsewhere: ``os.sysconf('SC_AVPHYS_PAGES') × SC_PAGE_SIZE`` (free pages only, an
    underestimate on systems with a large cache).  None when neither can be read; the memory
    checks then only refuse sizes no machine has (over 2**63 bytes).
    """
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def format_bytes(n: float) -> str:
    """``298 GiB``, ``7.3 TiB``, ``512 MiB``: three significant digits at most, binary units."""
    n = float(n)
    units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
    i = 0
    while n >= 1024 and i < len(units) - 1:
        n /= 1024
        i += 1
    if i == len(units) - 1 and n >= 1000:
        return f"{n:.3g} {units[i]}".replace("e+", "e")
    return f"{n:.3g} {units[i]}" if n < 100 else f"{n:.0f} {units[i]}"


def format_seconds(s: float) -> str:
    """``42 s``, ``3.1 h``, ``12 days``, ``3.2e+05 years``."""
    if s < 10:
        return f"{s:.2g} s"
    if s < 120:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{s / 60:.2g} min"
    if s < 2 * 86400:
        return f"{s / 3600:.2g} h"
    if s < 730 * 86400:
        return f"{s / 86400:.3g} days"
    return f"{s / (365.25 * 86400):.3g} years"


def nbytes(*shape, itemsize: int = F8) -> int:
    """Bytes of an array of this shape (exact Python int: no overflow for absurd sizes)."""
    return math.prod(int(s) for s in shape) * int(itemsize)


def shape_text(*shape) -> str:
    """``200000×200000``; sizes over 10⁹ in scientific notation (``1e+23×1e+23``)."""
    return "×".join(str(int(s)) if int(s) < 10 ** 9 else f"{float(s):.3g}" for s in shape)


def check_memory(n: int, param: str, what: str) -> None:
    """Refuse (``ParameterError(param)``) when ``n`` bytes exceed the memory available.

    ``what`` says what the bytes are for ("U (D×D float64, drawn and copied)"); the message gives
    the estimate and what this machine has.  Called before the allocation it guards.
    """
    n = int(n)
    avail = available_memory()
    if n >= 2 ** 63 or (avail is not None and n > avail):
        have = "" if avail is None else f"; this machine has {format_bytes(avail)} available"
        raise ParameterError(param, f"needs ≈ {format_bytes(n)} for {what}{have}")


def max_seconds() -> float:
    """The limit on a computation's estimated time: ``DYNLAB_MAX_HOURS`` hours (default 1)."""
    raw = os.environ.get("DYNLAB_MAX_HOURS")
    try:
        hours = float(raw) if raw else DEFAULT_MAX_HOURS
    except ValueError:
        raise ParameterError("DYNLAB_MAX_HOURS", f"must be a number of hours, got {raw!r}") from None
    if not hours > 0:
        raise ParameterError("DYNLAB_MAX_HOURS", f"must be > 0, got {raw!r}")
    return hours * 3600.0


def work_seconds(flops: float = 0.0, iterations: float = 0.0) -> float:
    """Optimistic seconds for ``flops`` dense flops plus ``iterations`` loop iterations."""
    return float(flops) / FLOPS_PER_SECOND + float(iterations) * SECONDS_PER_ITERATION


def check_work(seconds: float, param: str, what: str) -> None:
    """Refuse (``ParameterError(param)``) a computation estimated to take longer than the limit
    (``max_seconds()``), or, inside ``confirm_over(s)`` (the command line), longer than s seconds
    (the message then says ``--force``)."""
    limit = max_seconds()
    if seconds > limit:
        raise ParameterError(param, f"{what} would take ≈ {format_seconds(seconds)} even at an optimistic "
                                    f"rate, over the {format_seconds(limit)} limit (DYNLAB_MAX_HOURS raises it)")
    confirm = _CONFIRM.get()
    if confirm is not None and seconds > confirm:
        raise ParameterError(param, f"{what} would take at least ≈ {format_seconds(seconds)} (an optimistic "
                                    f"estimate); add --force to run it")


#: The estimated seconds past which ``check_work`` asks for --force (None: it never asks).
_CONFIRM = contextvars.ContextVar("dynlab_confirm_over", default=None)


def confirm_over(seconds: float | None):
    """From now on in this context, ``check_work`` refuses an estimate over ``seconds`` with a
    message that asks for --force (None: no such limit).  The command line sets it before
    parsing, ``--force`` lifts it; library calls never set it.  Returns the token to reset."""
    return _CONFIRM.set(None if seconds is None else float(seconds))


def largest(**sizes) -> str:
    """The name of the largest of several sizes (the option to blame for their product)."""
    return max(sizes, key=lambda k: int(sizes[k]))


# ------------------------------------------------------------------ the estimates used by dynlab
def model_bytes(name: str, D: int, d: int, settings: dict | None = None, gates: int = 1) -> tuple[int, str]:
    """Peak bytes of building a random model of ``gates`` weight blocks per layer
    (``dynlab.models.gates_of``): every block drawn (a temporary) and scaled (the kept copy), so
    twice the blocks; returns (bytes, what)."""
    settings = settings or {}
    D, d = int(D), int(d)
    layers = 1
    blocks = int(gates)
    if name == "stack":
        try:
            layers = max(1, int(settings.get("layers", 1)))
        except (TypeError, ValueError):
            layers = 1
    biases = 2 if blocks > 1 else 1  # PyTorch's gated cells: b_ih and b_hh per gate
    per_layer = blocks * (D * D + D * (max(d, D) if layers > 1 else d) + biases * D)
    n = 2 * F8 * layers * per_layer
    g = f"{blocks}×" if blocks > 1 else ""
    what = f"the weights ({layers}×" if layers > 1 else "the weights ("
    what += (f"{g}U {shape_text(D, D)} = {format_bytes(blocks * nbytes(D, D))} + {g}W {shape_text(D, d)} float64, "
             "each drawn and then scaled)")
    return n, what


def check_model(name: str, hidden, inputs, settings: dict | None = None, gates: int = 1) -> None:
    """Refuse a random model (of ``gates`` weight blocks per layer) whose weights cannot be
    allocated here; blames --hidden unless the input width is what makes it large."""
    D, d = int(hidden), int(inputs)
    n, what = model_bytes(name, D, d, settings, gates)
    check_memory(n, "inputs" if d > D else "hidden", what)


def check_input(steps, inputs, batch=None, copies: int = 2) -> None:
    """Refuse an input sequence (B×T×d float64, drawn then transformed: ``copies`` alive)."""
    B = 1 if batch is None else int(batch)
    T, d = int(steps), int(inputs)
    sizes = {"steps": T, "inputs": d} if batch is None else {"batch": B, "steps": T, "inputs": d}
    shape = (T, d) if batch is None else (B, T, d)
    check_memory(copies * nbytes(*shape), largest(**sizes),
                 f"the input x ({'×'.join(_LETTER[k] for k in sizes)} = {shape_text(*shape)} float64)")


_LETTER = {"batch": "B", "steps": "T", "inputs": "d", "hidden": "D"}


def _blame(K: int, T: int, B: int, D: int, power: int = 2) -> str:
    """The option most out of proportion in a K·T·B·D^power product (against typical sizes)."""
    ratios = {"K": K / 10, "steps": T / 1000, "batch": B / 10, "hidden": (D / 100) ** power}
    return max(ratios, key=ratios.get)


def check_states(B: int, T: int, D: int, what: str = "the states h") -> None:
    """Refuse a (B, T, D) float64 state array this machine cannot hold."""
    check_memory(nbytes(B, T, D), largest(batch=B, steps=T, hidden=D),
                 f"{what} (B×T×D = {shape_text(B, T, D)} float64)")


def simulation_work(model, B: int, T: int, per_step_flops: float = 0.0) -> tuple[float, dict]:
    """Optimistic seconds of running ``model`` over B sequences of T steps: K inner iterations
    (the form's ``inner_steps``: an iRNN's K, else 1) of ``gates`` D×(D+d) matrix-vector products
    per step (the form's weight blocks: GRU 3, LSTM 4, their stacks alike, else 1), plus
    ``per_step_flops`` more per step and sequence; returns (seconds, sizes)."""
    D, d = int(model.state_size), int(model.inputs)
    gates, K = model.step_cost()
    n = K * T * B
    seconds = work_seconds(flops=2.0 * n * gates * D * (D + d) + per_step_flops * T * B, iterations=n)
    return seconds, {"K": K, "T": T, "B": B, "D": D}


def check_simulation(model, B: int, T: int, what: str = "the simulation", per_step_flops: float = 0.0) -> None:
    """Refuse a run of ``model`` over (B, T) whose states do not fit or whose work is absurd."""
    check_states(B, T, int(model.state_size))
    seconds, s = simulation_work(model, B, T, per_step_flops)
    check_work(seconds, _blame(s["K"], s["T"], s["B"], s["D"]),
               f"{what} (K×T×B = {s['K']}×{s['T']}×{s['B']} steps of a D = {s['D']} state)")


def check_fixed_points(N: int, D: int, default_starts: int = 64) -> None:
    """Refuse a multi-start fixed-point search of N starts on a D-state whose batched Jacobians
    (N×D×D float64, and the copy ∂F is made from) do not fit, or whose work — 20 batched Newton
    solves (⅔D³ each) and the eigen-decomposition with vectors (≈ 25 D³) of every point — is
    absurd.  Blames --fixed-points when N is above its default, else --hidden."""
    N, D = int(N), int(D)
    param = "n_starts" if N > default_starts else "hidden"
    check_memory(2 * nbytes(N, D, D), param, f"the Jacobians of the fixed-point search (2 × N×D×D = "
                                              f"{shape_text(N, D, D)} float64)")
    check_work(work_seconds(flops=N * float(D) ** 3), param,
               f"the fixed-point search ({N} starts, D = {D}: batched Newton solves and eigenvectors)")


def check_spectrum(model, B: int, T: int, step: bool = True) -> None:
    """Refuse a spectrum of B×T points whose arrays do not fit (states, points, inputs of the
    system: 4 × B×T×D float64; eigenvalues: 1 or 2 × B×T×D complex128) or whose eigenvalue
    work (at least 3 D³ per eigenvalue problem, 1 or 2 per point) is absurd."""
    B, T, D = int(B), int(T), int(model.state_size)
    mats = 2 if step else 1
    check_memory(4 * nbytes(B, T, D) + mats * nbytes(B, T, D, itemsize=C16), largest(batch=B, steps=T, hidden=D),
                 f"the spectra (B×T×D = {shape_text(B, T, D)}: states and {mats} eigenvalue array(s))")
    seconds, s = simulation_work(model, B, T, per_step_flops=mats * 3.0 * float(D) ** 3)
    check_work(seconds, _blame(s["K"], T, B, D, 3),
               f"the spectra ({B * T} points, {mats} eigenvalue problem(s) of size {D} each)")


def check_gradients(model, B: int, T: int, lyapunov: bool = False) -> None:
    """Refuse a gradient-flow run whose work is absurd: the products of T step Jacobians and
    their norms (at least 6 D³ per step), or the QR of the Lyapunov spectrum (at least 2 D³ per
    step); the memory is chunked (the backend's ``backward_norms``), the states are B×T×D.  The factors are
    lower bounds of measured times (D = 300, T = 1000: 21 s and 11 s on 2 cores, estimated 16 s
    and 5.4 s), so a refusal is of a run that would take longer still."""
    B, T, D = int(B), int(T), int(model.state_size)
    check_states(B, T, D)
    per = (2.0 if lyapunov else 6.0) * float(D) ** 3
    seconds, s = simulation_work(model, B, T, per_step_flops=per)
    what = "the Lyapunov spectrum (QR of" if lyapunov else "the gradient flow (products and norms of"
    check_work(seconds, _blame(s["K"], T, B, D, 3), f"{what} B×T = {B}×{T} step Jacobians of size {D})")


def check_grid(points: int, variables: int, shape: str = "") -> None:
    """Refuse a sweep grid whose result arrays (points × variables float64 at least, twice: the
    store's buffer and the assembled Dataset) do not fit; blames ``grid`` (the spec's [grid])."""
    check_memory(2 * nbytes(points, max(int(variables), 1)), "grid",
                 f"the sweep's results ({shape + ' = ' if shape else ''}{int(points)} points × "
                 f"{int(variables)} value(s) float64, at least)")
