"""
A sweep: from a TOML spec to a Zarr store to a picture, on Dask
===============================================================

A sweep computes one analysis at every point of a grid of settings and writes each finished
region to a Zarr store, so a killed run resumes where it stopped (``--resume``).  Here: the iRNN's
gradient ratio ‖∂h_T/∂h_1‖/‖∂h_T/∂h_(T−1)‖ over its number of inner steps K and step size η,
three seeds each, computed by a two-worker Dask cluster.
"""
import os
import tempfile

import xarray as xr

import dynlab as dl

where = tempfile.mkdtemp()
spec = os.path.join(where, "grad.toml")
with open(spec, "w") as fh:
    fh.write('''
analysis = "gradient_norms"

[model]
name = "irnn"
hidden = 16

[input]
kind = "noise"
steps = 200

[grid]
K = [1, 2, 5, 10]
eta = [0.1, 0.3, 0.6, 1.0]

[repeat]
seeds = 3
''')

# %%
# On the command line this is ``dynlab sweep grad.toml --out results.zarr --scheduler local``;
# from Python, with the cluster's size given:
store = os.path.join(where, "results.zarr")
res = dl.sweep.sweep_from_file(spec, store=store, scheduler="local",
                               dask_options={"n_workers": 2, "threads_per_worker": 1})
print(res.attrs["analysis"], dict(res["done"].sizes), "points computed:", res.attrs["points_computed"])

# %%
# The store is an ordinary Zarr group: open it with xarray (lazily, chunk by chunk), select, reduce.
ds = xr.open_zarr(store)
print(ds["ratio"].mean("seed").round(3).to_pandas())

# %%
# ``dl.plot.draw`` of a sweep draws the analysis' own variables (not the bookkeeping: ``done``,
# ``checksum``, …), each cell the mean over the seeds with its standard deviation, the same from
# the store as from memory.
fig = dl.plot.draw(ds)

# %%
# ``dynlab sweep --verify results.zarr`` checks a store's health (every region's checksums);
# the available analyses and what each one writes:
for name, target in dl.sweep.TARGETS.items():
    print(f"{name:>18}: {target.description}")
