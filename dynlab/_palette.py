"""Colours with a meaning, in one place: the pictures draw with them and the help texts name them.

Standard library only (``dynlab --help`` reads it without importing matplotlib or numpy).
"""
from __future__ import annotations

#: Okabe & Ito (2008) colour-blind-safe palette.
COLORS = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky": "#56B4E9",
    "green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
}
#: The marks of a phase portrait (``dynlab.plot.plot_phase``) → their colour's name in ``COLORS``.
PHASE = {"start": "black", "curve": "blue", "s": "vermillion"}
