"""The recipes of the MASO paper (Wang, Balestriero & Baraniuk, ICLR 2019): ``maso-*`` figures and
tables, with the helpers they share (``_tables``, ``_training``)."""
