"""The recipes of the implicit-networks paper (appendix A.2, §3.4, Figs. 1–7): ``implicit-*``."""
