"""A backend registered at run time by tests/test_backend_choice.py: the numba backend under
another name, counting the simulations it runs."""
from dynlab.backends.numba import NumbaBackend


class XyzBackend(NumbaBackend):
    name = "test-xyz"
    description = "the numba backend under another name (tests only)"
    simulations = 0

    def simulate(self, form, x, h0, *, stop: bool = True, dtype=None):
        type(self).simulations += 1
        if dtype is None:
            return super().simulate(form, x, h0, stop=stop)
        return super().simulate(form, x, h0, stop=stop, dtype=dtype)


class NoTrainingBackend(NumbaBackend):
    """The numba backend without its training passes: training on it must be refused before any work."""
    name = "test-no-training"
    description = "the numba backend without training passes (tests only)"

    def supports(self, op, form):
        return op not in ("train_forward", "train_backward") and super().supports(op, form)
