"""dynlab's cells as PyTorch modules, for training inside a PyTorch pipeline and bringing back for analysis.

``dl.to_torch(model)`` turns any dynlab model into an ``nn.Module`` whose forward pass equals
``dl.simulate`` and whose autograd gradients equal dynlab's exact BPTT gradients;
``dl.from_torch(module)`` gives the dynlab model back, parameter for parameter.  The modules can also
be made here directly, with the papers' options (``dynlab.torch.cells``)::

    from dynlab.torch import IRNN
    cell = IRNN(1, 128, K=5, P="U", rank=16, g0="previous", activation="relu", eta=0.01, batch_first=True)

==================  ==============================================================================
``RNN``             Elman RNN (``identity_init``: Le et al.'s IRNN)
``FastRNN``         FastRNN (EdgeML form)
``AntisymmetricRNN``  AntisymmetricRNN
``RIN``             Recurrent Identity Network
``IRNN``            the incremental RNN, eq. 5 or eq. 9, SiRNN (K = 1), η per time step
``CTRNN``           the continuous-time RNN, fixed-step Euler or RK4
``GRU``, ``LSTM``   PyTorch's equations with any activation (tanh: use ``torch.nn.GRU``/``LSTM``)
``Stack``           a stack of the above
``Implicit``        an implicit network, backward by the implicit function theorem
==================  ==============================================================================

A module's ``state_dict`` names the parameters as dynlab does and carries the settings (a ``uint8``
buffer ``dynlab_model``): save it with ``safetensors.torch.save_file`` and read it back with
``dynlab.load_model``, no torch needed.  Importing this package needs PyTorch (``pip install
"dynlab[torch]"``); ``import dynlab`` alone never imports torch.
"""
from __future__ import annotations

try:
    import torch  # noqa: F401
except ImportError:  # pragma: no cover - exercised without torch
    raise ImportError('dynlab.torch needs PyTorch: pip install "dynlab[torch]" (or pip install torch)') from None

from .base import CONFIG, DynlabModule
from .cells import CELLS, CTRNN, GRU, IRNN, LSTM, RIN, RNN, AntisymmetricRNN, FastRNN
from .convert import Net, to_torch
from .implicit import Implicit
from .stack import Stack

#: the public classes and functions (``CELLS``, the registry name → class table, and ``CONFIG``, the
#: settings buffer's name, are importable too)
__all__ = ["AntisymmetricRNN", "CTRNN", "DynlabModule", "FastRNN", "GRU", "IRNN", "Implicit", "LSTM", "Net", "RIN",
           "RNN", "Stack", "to_torch"]
