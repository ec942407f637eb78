"""BERT's pipeline as data: its five steps, each step's scripts and the pairs its check judges (the library's
runner, portcheck.steps, executes it; run_all and the checks read the pairs from it)."""
from portcheck.pipeline.steps import Pair, StepSpec

BERT = (
    StepSpec(1, "Step1 forward", (Pair("forward", "pipeline/Step1/pt_forward_bert.py",
                                       "pipeline/Step1/pd_forward_bert.py"),), "pipeline/Step1/check_step1.py"),
    StepSpec(2, "Step2 data + metric", (Pair("data", "pipeline/Step2/pt_data_loader.py", "pipeline/Step2/pd_data_loader.py"),
                                        Pair("metric", "pipeline/Step2/pt_metric.py", "pipeline/Step2/pd_metric.py")),
             "pipeline/Step2/check_step2.py"),
    StepSpec(3, "Step3 loss", (Pair("loss", "pipeline/Step3/pt_loss.py", "pipeline/Step3/pd_loss.py"),),
             "pipeline/Step3/check_step3.py"),
    StepSpec(4, "Step4 lr + backward", (Pair("lr", "pipeline/Step4/pt_lr.py", "pipeline/Step4/pd_lr.py"),
                                        Pair("bp_align", "pipeline/Step4/pt_bp.py", "pipeline/Step4/pd_bp.py")),
             "pipeline/Step4/check_step4.py"),
    StepSpec(5, "Step5 training", (Pair("train_align", "pipeline/Step5/pt_train.py", "pipeline/Step5/pd_train.py"),),
             "pipeline/Step5/check_step5.py"),
)


def bert_step(number: int) -> StepSpec:
    return next(s for s in BERT if s.number == number)


def bert_pair(name: str) -> Pair:
    return next(p for s in BERT for p in s.pairs if p.name == name)
