"""``python -m dynlab``: the ``dynlab`` command line, the same ``main`` as the console script."""
from .cli import main

if __name__ == "__main__":
    main(prog_name="dynlab")
