"""budget stages (see module docstrings of each stage)."""
