"""The agreement chart over time: one bar per run with reviews (the judge-reviewer
agreement rate), drawn by templates/reviews/partials/agreement_chart.html. Geometry
only, as runs/reports/charts.py."""

from __future__ import annotations

from reviews.selectors import AgreementPoint
from runs.reports.charts import Bar, Chart

MAX_POINTS = 12


def agreement_chart(points: list[AgreementPoint]) -> Chart:
    points = points[-MAX_POINTS:]
    width, height, top, bottom, left = 440, 150, 12, 24, 34
    plot_w, plot_h = width - left - 6, height - top - bottom
    chart = Chart(
        title="Judge and reviewers agreeing, per run",
        description="Share of reviewed results where the reviewer gave the judge's verdict, per run, oldest first. "
        + "; ".join(f"run #{p.run.pk}: {p.figures.agreed} of {p.figures.reviewed}" for p in points),
        width=width,
        height=height,
        headers=("Run", "Reviewed", "Agreed", "Agreement", "Kappa"),
        baseline=top + plot_h,
        total=len(points),
    )
    slot = plot_w / max(1, len(points))
    bar_w = min(36.0, slot * 0.7)
    for index, point in enumerate(points):
        rate = point.figures.rate or 0.0
        bar_h = max(2.0, plot_h * rate)
        kappa = "–" if point.figures.kappa is None else f"{point.figures.kappa:.2f}"
        chart.bars.append(
            Bar(
                label=f"#{point.run.pk}",
                value=rate,
                x=round(left + index * slot + (slot - bar_w) / 2, 1),
                y=round(top + plot_h - bar_h, 1),
                width=round(bar_w, 1),
                height=round(bar_h, 1),
                tone="pass" if rate >= 0.8 else "mixed" if rate >= 0.5 else "fail",
                caption=f"{rate:.0%}",
                detail=f"Run #{point.run.pk}: {point.figures.agreed} of {point.figures.reviewed} agreed "
                f"({rate:.0%}), kappa {kappa}",
            )
        )
        chart.rows.append(
            (f"#{point.run.pk}", str(point.figures.reviewed), str(point.figures.agreed), f"{rate:.0%}", kappa)
        )
    chart.ticks = [(round(top + plot_h - plot_h * value, 1), f"{value:.0%}") for value in (0, 0.5, 1)]
    return chart
