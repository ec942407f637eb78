"""Shared, framework-free pieces of the pipeline: paths, config, diff checking, data."""
