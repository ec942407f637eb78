"""The twin BERTs, laid out like Hugging Face's modeling_bert.py, and their config.

    configuration_bert.py   BertConfig, read from a checkpoint's config.json
    pt_bert.py              the PyTorch model
    pd_bert.py              its Paddle twin: `diff pt_bert.py pd_bert.py` shows only framework calls

This package imports nothing else of the project: it is what a port hands over.
"""
