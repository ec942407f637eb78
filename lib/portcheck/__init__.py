"""portcheck: proves a PaddlePaddle port of a PyTorch model is numerically the same model, step by step.

    from portcheck import convert, compare_forward
    paddle_model.set_state_dict(convert(torch_model, paddle_model, inputs=inputs))  # strict: every key, shape, layout
    report = compare_forward(torch_model.eval(), paddle_model.eval(), inputs, isolate=True)
    print(report.pairs(), report.table()); assert report.passed, (report.first_diverging, report.differing)

    report = compare_backward(torch_model.train(), paddle_model.train(), inputs, targets,
                              loss=(torch_loss, paddle_loss), optimizer=(make_torch_opt, make_paddle_opt),
                              scheduler=(make_torch_sched, None), steps=5, isolate=True)
    # scheduler's None: Paddle's is the LRScheduler its optimizer was built with

Modules pair with no name map (portcheck.mapping.pairing: the two runs' module calls aligned); a name_map given
(names.resolve's forms) pins the pairs it names.

Each compare_* is a record_* on each side and a judge_* of the two records: a pt_ script and a pd_ script save
their side's record (portcheck.pipeline.handin.save_side writes the guide's pair with its run record), a check judges
them. The reviewer's command: `python -m portcheck check <log_reprod>` (portcheck.cli).

Steps 2 and 5 for any model: portcheck.pipeline.data records a loader's batches and a metric on each side (judged
exactly), portcheck.pipeline.training a training log written by each side's own loop (judged step by step, and the final
metric at the task's threshold).

Subpackages, lowest first; each imports only those below it (its docstring says what it holds): core (errors,
safe files, run records, the rules, diff, the measured rule, reports: numpy only), mapping (names, pairing, fused
layers, convert, strict loading), forward (one forward compared: compare, isolate, calls, plots), parallel (a model
split in tensor parallel: compare_split, each rank's run, the CPU stand-ins), checkpoints (checkpoint folders
compared block by block: what `python -m portcheck layers` reads, PaddleFormers folders too), generation
(compare_generate: cached decoding step by step, check_cache), gradients (backward, weight_stats), pipeline (data,
the step table, hand-ins, training), scripts (`portcheck run`: the command, its settings, the recorder and its
per-framework hooks), then cli. numpy is the only import at load time: torch and Paddle are imported only by the
functions handed their models. The paths of before (portcheck.compare, portcheck.forward.stream, ...) still import,
for one version, with a DeprecationWarning naming the new one (portcheck._moved).
"""
from portcheck import _moved  # noqa: F401 (first: a module importing an old path works, and says where it went)
from portcheck.gradients.backward import BackwardReport, compare_backward, judge_backward, record_backward
from portcheck.forward.compare import compare_forward, judge_forward, record_forward, record_value
from portcheck.forward.result import ForwardReport
from portcheck.generation.generate import check_cache, compare_generate
from portcheck.generation.verdict import GenerateReport
from portcheck.mapping.convert import convert
from portcheck.mapping.fused import Fused
from portcheck.mapping.names import resolve
from portcheck.pipeline.folder import Handin, Side

__all__ = ["Handin", "Side", "convert", "compare_forward", "record_forward", "judge_forward", "record_value", "ForwardReport",
           "compare_backward", "record_backward", "judge_backward", "BackwardReport", "resolve", "Fused",
           "compare_generate", "check_cache", "GenerateReport"]
