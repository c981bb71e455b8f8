"""Input generators and tasks.

Every generator is seeded and returns (T, d) for ``batch=None`` or (B, T, d) for
``batch=B``; sequences of a batch are independent draws.
"""
from .inputs import INPUTS, constant, make_input, noise, random_walk, sine
from .labelled import LABELLED, digit_sequences, labelled_sequences, pattern_sequences

__all__ = ["INPUTS", "constant", "make_input", "noise", "random_walk", "sine"]
__all__ += ["LABELLED", "digit_sequences", "labelled_sequences", "pattern_sequences"]
from .sequences import (TASKS, Task, adding_problem, copy_baseline, copy_memory, flipflop, load_digits_sequences,
                        make_task, noise_padded, pad_with_noise)

__all__ += ["TASKS", "Task", "adding_problem", "copy_baseline", "copy_memory", "flipflop", "load_digits_sequences",
            "make_task", "noise_padded", "pad_with_noise"]
from .datafiles import LabelledData, read_har, read_mnist
from .realdata import DATA_TASKS

__all__ += ["DATA_TASKS", "LabelledData", "read_har", "read_mnist"]
from .static import STATIC_TASKS, StaticTask, damped_oscillator, oscillator_trajectory, xor

__all__ += ["STATIC_TASKS", "StaticTask", "damped_oscillator", "oscillator_trajectory", "xor"]
