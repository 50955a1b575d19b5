"""Preset TOML files (one per seed system and baseline) and, in ``config/``, the front ends that turn a seed
system's own configuration file into a preset (``evalkit preset from-config``)."""
