"""Worked examples of the model-agnostic layer (align/) on models no one here wrote."""
