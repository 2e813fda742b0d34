"""What makes two reports incomparable (the rulers), and how the table names them."""

from __future__ import annotations

from pathlib import Path

from app.eval.report.records import PromptRef, ReportSummary


def judge_name(report: ReportSummary) -> str:
    return report.meta.judge.provider or "no judge"


def judge_desc(report: ReportSummary) -> str:
    prompts = report.meta.judge.prompts
    versions = ", ".join(
        f"{p.version} {(p.hash or '')[:19]}".strip() for _, p in sorted(prompts.items())
    )
    return judge_name(report) + (f" [{versions}]" if versions else "")


def _ref(ref: PromptRef) -> str:
    return f"{ref.version} ({ref.hash})"


def ruler_differences(base: ReportSummary, new: ReportSummary) -> list[str]:
    """What makes the two reports incomparable: judge model, judge prompts, datasets."""
    out: list[str] = []
    bj, nj = base.meta.judge, new.meta.judge
    if judge_name(base) != judge_name(new):
        out.append(f"judge model: base {judge_name(base)} vs new {judge_name(new)}")
    if bj.samples != nj.samples:
        out.append(f"judge samples: base {bj.samples} vs new {nj.samples}")
    for pid in sorted(set(bj.prompts) | set(nj.prompts)):
        b, n = bj.prompts.get(pid), nj.prompts.get(pid)
        if b is None or n is None:
            out.append(f"judge prompt {pid}: only in {'new' if b is None else 'base'}")
        elif (b.version, b.hash) != (n.version, n.hash):
            out.append(f"judge prompt {pid}: base {_ref(b)} vs new {_ref(n)}")
    bd = {d.name: d for d in base.meta.datasets}
    nd = {d.name: d for d in new.meta.datasets}
    for name in sorted(set(bd) | set(nd)):
        bds, nds = bd.get(name), nd.get(name)
        if bds is None or nds is None:
            out.append(f"dataset {name}: only in {'new' if bds is None else 'base'}")
        elif (bds.version, bds.sha256) != (nds.version, nds.sha256):
            out.append(
                f"dataset {name}: base v{bds.version} ({bds.sha256[:12]}) vs "
                f"new v{nds.version} ({nds.sha256[:12]})"
            )
    return out


def prompt_labels(
    base: ReportSummary, new: ReportSummary, base_path: str, new_path: str
) -> tuple[str, str]:
    """``(base label, new label)``: the prompt versions that differ, else the run ids."""
    bp, np_ = base.meta.prompts, new.meta.prompts

    def hash_of(prompts: dict[str, PromptRef], pid: str) -> str | None:
        ref = prompts.get(pid)
        return ref.hash if ref is not None else None

    differ = [pid for pid in sorted(set(bp) | set(np_)) if hash_of(bp, pid) != hash_of(np_, pid)]

    def label(report: ReportSummary, prompts: dict[str, PromptRef], path: str) -> str:
        run = report.run_id or Path(path).name
        versions = [prompts[pid].version if pid in prompts else f"{pid}: absent" for pid in differ]
        return f"{', '.join(versions)} (run {run})" if versions else f"run {run}"

    return label(base, bp, base_path), label(new, np_, new_path)
