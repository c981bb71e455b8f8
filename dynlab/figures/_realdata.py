"""The real data sets of the papers, where a user has them (``dynlab figures … --data DIR``).

``DIR`` holds MNIST's files (``train-images-idx3-ubyte[.gz]`` and the three others, or keras'
``mnist.npz``) and/or the unpacked ``UCI HAR Dataset`` folder (``DIR`` itself or ``DIR/UCI HAR
Dataset``).  The readers are ``dynlab.make_task``'s (``mnist-pixels``, ``mnist-rows``,
``noisy-mnist``, ``har2``, with ``data=``); a missing or malformed file is their one-line
``ParameterError("data", …)``.  ``need(scale, what, item)`` is the error of a paper-scale run given
no data.
"""
from __future__ import annotations

import os

HAR_FOLDER = "UCI HAR Dataset"


def har_dir(data: str) -> str:
    """The UCI HAR folder inside ``data`` (``data`` itself when it is that folder)."""
    inner = os.path.join(data, HAR_FOLDER)
    return inner if os.path.isdir(inner) else data


def need(scale, what: str, item: str) -> str:
    """``scale.data``, or a ParameterError on ``data`` saying that ``item`` at paper scale reads ``what``."""
    from ..errors import ParameterError

    if scale.data is None:
        raise ParameterError("data", f"{item} at paper scale trains on the real {what}: give its folder with "
                                     f"--data DIR (this machine has none; the stand-in scale uses scikit-learn's "
                                     f"8×8 digits)")
    return scale.data


def mnist_task(scale, name: str, item: str, **kw):
    """``make_task(name, data=…)`` of MNIST (``mnist-pixels``, ``mnist-rows``, ``noisy-mnist``)."""
    import dynlab as dl

    return dl.make_task(name, data=need(scale, "MNIST", item), **kw)


def har2_task(scale, item: str, **kw):
    """``make_task("har2", data=…)``: the paper's HAR-2 from the UCI HAR folder."""
    import dynlab as dl

    return dl.make_task("har2", data=har_dir(need(scale, "UCI HAR data (HAR-2)", item)), **kw)
