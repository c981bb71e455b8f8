"""``python -m dynlab.cli``: the same as the ``dynlab`` console script."""
from . import main

main()
