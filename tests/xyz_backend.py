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
