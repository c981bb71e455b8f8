"""Input generators and tasks.

Every generator is seeded and returns (T, d) for ``batch=None`` or (B, T, d) for
``batch=B``; sequences of a batch are independent draws.
"""
from .inputs import INPUTS, constant, make_input, noise, random_walk, sine
from .static import STATIC_TASKS, StaticTask, damped_oscillator, oscillator_trajectory, xor

__all__ = ["INPUTS", "constant", "make_input", "noise", "random_walk", "sine"]
__all__ += ["STATIC_TASKS", "StaticTask", "damped_oscillator", "oscillator_trajectory", "xor"]
