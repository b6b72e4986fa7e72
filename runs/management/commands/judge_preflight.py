"""`manage.py judge_preflight`: preflight the console's judge (EVALSITE_JUDGE_MODEL) from a
terminal, as Settings → Judge preflight does, and print what it did on each calibration answer.

Exit status: 0 the judge passed, 1 it failed (its runs are marked as scored by a judge that
failed preflight), 2 no judge model is configured (the offline scorer needs no preflight).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from runs.judging import configs as judging
from runs.services.preflight import judge_config_preflight


class Command(BaseCommand):
    help = "Preflight the console's judge model on the calibration set and print the outcome."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--again", action="store_true", help="Ask again even if this judge was preflighted")

    def handle(self, *args: Any, **options: Any) -> None:
        config = judging.console_judge_config()
        if not config.judge_model:
            self.stderr.write("No judge model is configured (EVALSITE_JUDGE_MODEL or EVALSITE_LLM_MODEL).")
            raise SystemExit(2)
        self.stdout.write(f"Preflighting {config.label} on the calibration set…")
        config = judge_config_preflight(config=config, force=options["again"])
        outcome = config.preflight
        for item in outcome.get("items", []):
            score = "–" if item.get("score") is None else f"{item['score']:g}"
            problem = item.get("problem") or item.get("misplaced") or ""
            mark = "✗" if problem else "✓"
            self.stdout.write(
                f"  {mark} Q{item.get('question_number', '?')} {item.get('kind', ''):<10} {score:>4}/10  {problem}"
            )
        passed = config.preflight_status == "passed"
        verdict = "PASSED" if passed else "FAILED"
        self.stdout.write(
            f"{verdict}: {outcome.get('in_place', 0)} of {outcome.get('total', 0)} answers in place, "
            f"{outcome.get('tokens', 0)} tokens, ${outcome.get('cost', 0):.6f}, {outcome.get('seconds', 0)} s."
        )
        for reason in outcome.get("reasons", []):
            self.stdout.write(f"  {reason}")
        if not passed:
            self.stdout.write(
                "Runs this judge scores are marked as scored by a judge that failed preflight. "
                "Use a larger model as the judge (README, Connecting a model)."
            )
            raise SystemExit(1)
