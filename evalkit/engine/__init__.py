"""The run engine: a dataset and presets in, rankings, metrics and a run folder out (runner → experiment → evaluate / sweep → output)."""
