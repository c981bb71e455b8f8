"""The recipes of the iRNN paper (Kag, Zhang & Saligrama, ICLR 2020): ``irnn-*`` figures and tables,
with the helpers they share (``_digits``, ``_parta``, ``_tables``, ``_training``)."""
