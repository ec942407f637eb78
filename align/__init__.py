"""The model-agnostic layer: any torch model and its Paddle port, not only this project's BERT.

    from align import convert, compare_forward
    state = convert(torch_model, paddle_model, name_map)       # strict: every key, shape and layout
    paddle_model.set_state_dict(state)
    report = compare_forward(torch_model.eval(), paddle_model.eval(), inputs, name_map)
    print(report.table()); assert report.passed, report.first_diverging

name_map forms: align.names.resolve. The tolerance: checks/calibrated.py.
"""
from align.compare import ForwardReport, compare_forward
from align.convert import convert
from align.names import resolve

__all__ = ["convert", "compare_forward", "ForwardReport", "resolve"]
