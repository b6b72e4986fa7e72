"""The reviews app hands the judge its reviewers' overrides as worked examples (issue 18,
section 7): registered in ReviewsConfig.ready(), no stand-in provider."""

from datasets.models import Dataset
from reviews import services
from runs.judging import configs as judging
from tests.reviews.conftest import results_of


def test_the_reviewers_overrides_become_the_judges_examples(ten_run, dataset, alice, bob):
    results = results_of(ten_run)
    services.review_save(result=results[0], reviewer=alice, agrees=True)  # agreeing is no example
    services.review_save(result=results[1], reviewer=alice, agrees=False, passed=False, score=3, note="Misses the fee")
    services.review_save(
        result=results[2], reviewer=bob, agrees=False, passed=True, score=6
    )  # same verdict: score only
    services.review_save(result=results[8], reviewer=bob, agrees=False, passed=True, note="Correct after all")
    services.case_correct(result=results[1], user=alice, expected_answer="Refunds within 30 days, minus a 5 EUR fee.")
    Dataset.objects.filter(pk=dataset.pk).update(alignment_examples=5)
    dataset.refresh_from_db()

    examples = judging.alignment_examples_for(dataset)

    assert [(e["question"], e["verdict"], e["note"]) for e in examples] == [
        ("Question 9?", "pass", "Correct after all"),
        ("Question 2?", "fail", "Misses the fee"),
    ]
    assert examples[1]["expected"] == "Refunds within 30 days, minus a 5 EUR fee."  # the corrected case


def test_no_examples_unless_the_dataset_opts_in(ten_run, dataset, alice):
    services.review_save(result=results_of(ten_run)[1], reviewer=alice, agrees=False, passed=False)
    assert dataset.alignment_examples == 0
    assert judging.alignment_examples_for(dataset) == []


def test_a_rescore_is_measured_against_the_reviews_of_the_results_it_judged_again(ten_run, agent, alice):
    """Section 6: re-score, then compare the two judges' agreement on the same reviewed results."""
    from reviews.selectors import agreement_groups
    from runs.models import Result, Run, RunCase

    results = results_of(ten_run)
    # The judge passed all four; the reviewer agrees with two and fails the other two.
    services.review_save(result=results[0], reviewer=alice, agrees=True)
    services.review_save(result=results[1], reviewer=alice, agrees=True)
    services.review_save(result=results[2], reviewer=alice, agrees=False, passed=False)
    services.review_save(result=results[3], reviewer=alice, agrees=False, passed=False)
    rescore = Run.objects.create(
        agent=agent, agent_version=ten_run.agent_version, dataset=ten_run.dataset, dataset_name=ten_run.dataset_name,
        status=Run.Status.COMPLETED, purpose=Run.Purpose.RESCORE, parent=ten_run, scoring=ten_run.scoring,
        scorer=Run.Scorer.LLM, judge_model="openai/stricter-judge",
    )  # fmt: skip
    for result, status in zip(results[:4], ["pass", "pass", "fail", "fail"], strict=True):
        case = result.case
        copy = RunCase.objects.create(
            run=rescore, position=case.position, number=case.number, source_case=case.source_case,
            question=case.question, expected_answer=case.expected_answer, data=case.data,
        )  # fmt: skip
        Result.objects.create(
            run=rescore, case=copy, status=status, score=9 if status == "pass" else 3,
            actual_answer=result.actual_answer, rescored_from=result,
        )  # fmt: skip

    groups = agreement_groups(runs=[ten_run, rescore])

    assert len(groups) == 2
    before = next(g for g in groups if "stricter" not in g.label)
    after = next(g for g in groups if "stricter" in g.label)
    assert (before.figures.reviewed, before.figures.agreed) == (4, 2)
    assert (after.figures.reviewed, after.figures.agreed) == (4, 4)  # the new judge agrees with every review
    assert after.figures.kappa == 1.0 and (before.figures.kappa or 0) < after.figures.kappa
