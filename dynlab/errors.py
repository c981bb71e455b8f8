"""Exceptions raised by dynlab.

``ParameterError`` is a user error: it names the offending parameter (``param``) so the
CLI can translate it to the option (``--eta``) and exit with status 2.  ``DivergenceError``
is a numerical failure: it says where (batch index, time step) the state stopped being
finite and carries the results computed before that point (``partial``), so nothing
already computed is lost.
"""
from __future__ import annotations


class DynlabError(Exception):
    """Base class of every dynlab error."""


class ParameterError(DynlabError, ValueError):
    """A bad value for a named parameter.

    Parameters
    ----------
    param : str
        The parameter's name as the Python API spells it (``"eta"``, ``"K"``, ``"x"``).
    message : str
        What is wrong, without the parameter name.
    """

    def __init__(self, param: str, message: str):
        self.param = param
        self.message = message
        super().__init__(f"{param}: {message}")


class DivergenceError(DynlabError, ArithmeticError):
    """The state became non-finite (inf or nan) during a simulation.

    Attributes
    ----------
    step : int
        The 1-based time step t at which h_t first had a non-finite entry.
    batch : int
        The sequence (batch index) where that happened first.
    partial : xarray.Dataset or None
        The states h_1 .. h_{step-1} of every sequence, computed before the failure.
    """

    def __init__(self, step: int, batch: int, model: str, partial=None):
        self.step = int(step)
        self.batch = int(batch)
        self.model = model
        self.partial = partial
        super().__init__(
            f"{model}: state became non-finite at step t={self.step} (batch {self.batch}); "
            f"{self.step - 1} finite steps were kept"
        )


class ConvergenceError(DynlabError, ArithmeticError):
    """An iterative solve did not reach its tolerance; says where and how far it got."""
