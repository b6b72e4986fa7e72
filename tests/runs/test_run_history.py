"""runs/comparing/history.py and runs:history: the history chart's points per agent version."""

import pytest
from django.urls import reverse

from agents.models import AgentVersion
from runs.comparing.history import agent_history, judge_key
from runs.models import JudgeConfig, Run
from tests.factories import DatasetFactory

pytestmark = pytest.mark.django_db


def _version(agent, number):
    base = agent.current_version
    return AgentVersion.objects.create(agent=agent, number=number, instructions=base.instructions, model=base.model)


def _run(agent, dataset, version, passed, failed, average, *, judge_model="", status=Run.Status.COMPLETED, **kw):
    return Run.objects.create(
        agent=agent,
        agent_version=version,
        dataset=dataset,
        dataset_name=dataset.name,
        status=status,
        passed=passed,
        failed=failed,
        average_score=average,
        judge_model=judge_model,
        **kw,
    )


def test_one_point_per_version_with_the_runs_behind_it(agent):
    dataset = DatasetFactory(agent=agent, name="Refunds")
    v1, v2 = agent.current_version, _version(agent, agent.current_version.number + 1)
    a = _run(agent, dataset, v1, 6, 4, 6.0)
    b = _run(agent, dataset, v1, 8, 2, 8.0)
    c = _run(agent, dataset, v2, 9, 1, 9.0)
    _run(agent, dataset, v2, 0, 0, None, status=Run.Status.RUNNING)  # not finished: not a point
    _run(agent, dataset, v2, 0, 0, None, purpose=Run.Purpose.VERIFY)  # a subset of cases: not a point

    [history] = agent_history(agent=agent)

    assert history.name == "Refunds"
    [series] = history.series
    assert [p.version for p in series.points] == [v1.number, v2.number]
    first, second = series.points
    assert [r.pk for r in first.runs] == [a.pk, b.pk] and [r.pk for r in second.runs] == [c.pk]
    assert first.pass_rate == 14 / 20 and first.mean_score == 7.0
    assert second.pass_rate == 0.9 and second.mean_score == 9.0
    assert second.y_pass < first.y_pass  # higher is up in SVG coordinates


def test_each_judge_configuration_is_a_series_of_its_own(agent):
    dataset = DatasetFactory(agent=agent)
    v1, v2 = agent.current_version, _version(agent, agent.current_version.number + 1)
    offline = JudgeConfig.objects.create(dataset=dataset, number=1, fingerprint="a" * 64)
    model = JudgeConfig.objects.create(
        dataset=dataset, number=2, fingerprint="b" * 64, judge_model="openai/gpt-4o-mini"
    )
    _run(agent, dataset, v1, 5, 5, 5.0, judge_config=offline)
    _run(agent, dataset, v2, 4, 6, 4.0, judge_config=offline)
    _run(agent, dataset, v2, 9, 1, 9.0, judge_config=model)  # same version, another judge: not pooled

    [history] = agent_history(agent=agent)

    assert history.versions == [v1.number, v2.number]
    by_offline, by_model = history.series
    assert by_offline.label == "judge v1: offline reference scorer" and by_model.label.startswith(
        "judge v2: gpt-4o-mini"
    )
    assert [(p.version, p.pass_rate) for p in by_offline.points] == [(v1.number, 0.5), (v2.number, 0.4)]
    assert [(p.version, p.pass_rate) for p in by_model.points] == [(v2.number, 0.9)]
    assert by_model.points[0].x == by_offline.points[1].x  # one x axis of versions


def test_runs_from_before_judges_were_numbered_are_told_apart_by_their_judge(agent):
    dataset = DatasetFactory(agent=agent)
    old = _run(agent, dataset, agent.current_version, 5, 5, 5.0, judge_model="judge-a")
    new = _run(agent, dataset, agent.current_version, 7, 3, 7.0, judge_model="judge-b")
    assert judge_key(old) != judge_key(new)

    [history] = agent_history(agent=agent)

    assert [len(series.points) for series in history.series] == [1, 1]


def test_stopped_and_budget_stopped_runs_are_left_out_and_named(agent, client_alice):
    dataset = DatasetFactory(agent=agent)
    whole = _run(agent, dataset, agent.current_version, 8, 2, 8.0)
    stopped = _run(agent, dataset, agent.current_version, 1, 0, 9.0, status=Run.Status.STOPPED)
    budget = _run(
        agent, dataset, agent.current_version, 0, 3, 2.0, status=Run.Status.STOPPED, stop_reason="budget reached"
    )

    [history] = agent_history(agent=agent)

    [point] = history.series[0].points
    assert point.runs == [whole] and point.pass_rate == 0.8
    assert history.left_out == [stopped, budget]
    fragment = client_alice.get(reverse("runs:history", args=[agent.pk]), HTTP_HX_REQUEST="true").content.decode()
    assert "Left out:" in fragment and f"#{budget.pk}</a> stopped before" in fragment


def test_errors_do_not_count_against_the_pass_rate(agent):
    dataset = DatasetFactory(agent=agent)
    _run(agent, dataset, agent.current_version, 6, 2, 7.0, errored=2)

    [history] = agent_history(agent=agent)

    assert history.series[0].points[0].pass_rate == 0.75


def test_each_dataset_has_its_own_chart(agent):
    for name in ("B set", "A set"):
        _run(agent, DatasetFactory(agent=agent, name=name), agent.current_version, 1, 1, 5.0)
    assert [h.name for h in agent_history(agent=agent)] == ["A set", "B set"]


def test_the_agent_page_loads_the_fragment_and_the_fragment_lists_the_runs(client_alice, agent):
    dataset = DatasetFactory(agent=agent, name="Refunds")
    run = _run(agent, dataset, agent.current_version, 3, 1, 7.5)
    url = reverse("runs:history", args=[agent.pk])

    page = client_alice.get(reverse("agents:detail", args=[agent.pk])).content.decode()
    fragment = client_alice.get(url, HTTP_HX_REQUEST="true").content.decode()

    assert f'hx-get="{url}"' in page
    assert fragment.lstrip().startswith('<section id="version-history"')
    assert "<svg" in fragment and "75%" in fragment and f"#{run.pk}" in fragment
    assert "<html" in client_alice.get(url).content.decode()


def test_the_fragment_costs_the_same_queries_for_1_or_20_runs(client_alice, agent, django_assert_max_num_queries):
    dataset = DatasetFactory(agent=agent)
    url = reverse("runs:history", args=[agent.pk])
    _run(agent, dataset, agent.current_version, 1, 1, 5.0)
    with django_assert_max_num_queries(12) as one:
        client_alice.get(url, HTTP_HX_REQUEST="true")
    for n in range(19):
        _run(agent, dataset, _version(agent, agent.current_version.number + 1 + n), 1, 1, 5.0)
    with django_assert_max_num_queries(len(one.captured_queries)):
        client_alice.get(url, HTTP_HX_REQUEST="true")
