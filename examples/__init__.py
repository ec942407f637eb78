"""Worked examples of the model-agnostic layer (portcheck) on models no one here wrote."""
