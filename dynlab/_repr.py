"""Short reprs: arrays by shape, numbers as plain Python numbers.

Models, tasks and training results hold arrays of any size; their reprs name what they are
(kind, sizes, settings, final losses) in a few lines and show an array only by its shape,
never by its values (``print(model)`` for D = 512 is one line, not 120).
"""
from __future__ import annotations

import numpy as np


def shape(a) -> str:
    """``"128×128"`` for a (128, 128) array or the tuple (128, 128); ``"scalar"`` for 0-d."""
    s = a if isinstance(a, tuple) else np.shape(a)
    return "×".join(str(n) for n in s) if s else "scalar"


def value(v) -> str:
    """A setting as it reads in a call: arrays by shape, NumPy scalars as Python numbers."""
    if isinstance(v, np.ndarray) and v.ndim > 0:
        return f"<array {shape(v)}>"
    if isinstance(v, (np.integer, np.floating, np.bool_)) or (isinstance(v, np.ndarray) and v.ndim == 0):
        v = v.item()
    if isinstance(v, float):
        return repr(float(f"{v:.6g}"))          # 6 significant digits; 1.0 stays "1.0"
    return repr(v)


def number(v, digits: int = 4) -> str:
    """A measured number (a loss, a norm) to ``digits`` significant digits."""
    try:
        return f"{float(v):.{digits}g}"
    except (TypeError, ValueError):
        return repr(v)
