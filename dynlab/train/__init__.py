"""Training small models on the CPU with exact gradients (no deep-learning framework).

``optim``     first-order optimisers (SGD with momentum, RMSprop, Adam), global-norm gradient
              clipping and a reduce-on-plateau learning-rate schedule, with state that can be
              saved and restored exactly (so a resumed run continues bit-for-bit).
``backprop``  reverse-mode gradients through time for every discrete model, the read-out and
              the losses (``loss_and_grads``).
``loop``      the training loop with its gradient diagnostics (``train_model``), checkpoints
              (``save_checkpoint``, ``resume_training``).
``spec``      the CLI's entry (``TrainSpec``, ``train_spec``).
"""
from .optim import OPTIMISERS, Adam, Plateau, RMSprop, SGD, clip_by_global_norm, make_optimiser

__all__ = ["OPTIMISERS", "Adam", "Plateau", "RMSprop", "SGD", "clip_by_global_norm", "make_optimiser"]
