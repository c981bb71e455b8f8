"""``dynlab simulate``: the spec's model over its input (``dynlab.spec.simulate_spec``), and the
paragraph the command prints."""
from __future__ import annotations

import numpy as np

from ..spec import simulate_spec  # noqa: F401  (the command's computation, re-exported here)


def simulate_summary(ds) -> str:
    """One paragraph describing a ``dynlab.simulate`` Dataset: shapes, final state norm, backend."""
    h = ds["h"].values
    final = np.linalg.norm(h[..., -1, :], axis=-1)
    shape = " × ".join(f"{ds.sizes[d]} {d}" for d in ds["h"].dims)
    if np.ndim(final) == 0:
        norm = f"‖h_T‖₂ = {float(final):.6g}"
    else:
        norm = f"‖h_T‖₂ over the batch: min {final.min():.6g}, median {np.median(final):.6g}, max {final.max():.6g}"
    settings = ", ".join(f"{k}={ds.attrs[k]}" for k in ("activation", "K", "g0") if k in ds.attrs)
    return (f"Simulated {ds.attrs.get('model')} ({settings}) with D={ds.sizes['unit']} hidden units and "
            f"d={ds.sizes['unit_in']} input(s): h has shape ({shape}); final state {norm}; "
            f"backend {ds.attrs.get('backend')} (kernel {ds.attrs.get('kernel', '?')}).")


