"""portcheck: proves a PaddlePaddle port of a PyTorch model is numerically the same model, step by step.

    from portcheck import convert, compare_forward
    paddle_model.set_state_dict(convert(torch_model, paddle_model, inputs=inputs))  # strict: every key, shape, layout
    report = compare_forward(torch_model.eval(), paddle_model.eval(), inputs, isolate=True)
    print(report.pairs(), report.table()); assert report.passed, (report.first_diverging, report.differing)

    report = compare_backward(torch_model.train(), paddle_model.train(), inputs, targets,
                              loss=(torch_loss, paddle_loss), optimizer=(make_torch_opt, make_paddle_opt),
                              scheduler=(make_torch_sched, None), steps=5, isolate=True)
    # scheduler's None: Paddle's is the LRScheduler its optimizer was built with

Modules pair with no name map (portcheck.pairing: the two runs' module calls aligned); a name_map given
(names.resolve's forms) pins the pairs it names.

Each compare_* is a record_* on each side and a judge_* of the two records: a pt_ script and a pd_ script save
their side's record (portcheck.handin.save_side writes the guide's pair with its run record), a check judges
them. The reviewer's command: `python -m portcheck check <log_reprod>` (portcheck.cli).

Steps 2 and 5 for any model: portcheck.data records a loader's batches and a metric on each side (judged
exactly), portcheck.training a training log written by each side's own loop (judged step by step, and the final
metric at the task's threshold).

Modules, lowest first: errors, fileio (safe reads and writes), record (run records, fingerprints), same_run (run
records compared first), tolerances (the rules and the guide's table), diff (exact and atol+rtol judging),
calibrated (the rule measured on the model: torch's own fp32 error), report (logs), names, pairing (modules paired
by aligning two runs), convert, weights (strict loading), compare, backward, spill (records on disk), isolate
(each module on torch's own values), stream (a Llama's checkpoints compared block by block), data (Step 2),
training (Step 5), weight_stats (per-parameter norms side by side), handin (writing and judging hand-ins), steps
(a pipeline's step table and its runner), runtime (process settings for entry scripts), cli. numpy is the only
import at load time: torch and Paddle are imported only by the functions handed their models.
"""
from portcheck.backward import BackwardReport, compare_backward, judge_backward, record_backward
from portcheck.compare import ForwardReport, compare_forward, judge_forward, record_forward, record_value
from portcheck.convert import convert
from portcheck.fused import Fused
from portcheck.names import resolve

__all__ = ["convert", "compare_forward", "record_forward", "judge_forward", "record_value", "ForwardReport",
           "compare_backward", "record_backward", "judge_backward", "BackwardReport", "resolve", "Fused"]
