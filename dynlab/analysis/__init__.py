"""What we compute: equilibria, Jacobians, spectra, partitions (one module per question)."""
