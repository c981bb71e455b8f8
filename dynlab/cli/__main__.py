"""``python -m dynlab.cli``: the same as the ``dynlab`` console script."""
from . import main

if __name__ == "__main__":
    main(prog_name="dynlab")
