"""The model-agnostic layer: any torch model and its Paddle port, not only this project's BERT.

    from portcheck import convert, compare_forward
    state = convert(torch_model, paddle_model, name_map)       # strict: every key, shape and layout
    paddle_model.set_state_dict(state)
    report = compare_forward(torch_model.eval(), paddle_model.eval(), inputs, name_map)
    print(report.table()); assert report.passed, report.first_diverging

    report = compare_backward(torch_model.train(), paddle_model.train(), inputs, targets,
                              loss=(torch_loss, paddle_loss), optimizer=(make_torch_opt, make_paddle_opt),
                              scheduler=(make_torch_sched, lambda opt: opt._learning_rate), steps=5, name_map=name_map)

Each compare_* is a record_* on each side and a judge_* of the two records: a pt_ script and a pd_ script
save their side's record (and align.handin its guide pair with run records), a check judges them.
name_map forms: align.names.resolve. The tolerance: checks/calibrated.py.
"""
from portcheck.backward import BackwardReport, compare_backward, judge_backward, record_backward
from portcheck.compare import ForwardReport, compare_forward, judge_forward, record_forward, record_value
from portcheck.convert import convert
from portcheck.names import resolve

__all__ = ["convert", "compare_forward", "record_forward", "judge_forward", "record_value", "ForwardReport",
           "compare_backward", "record_backward", "judge_backward", "BackwardReport", "resolve"]
