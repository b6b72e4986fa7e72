from django import forms

from datasets.fields import dataset_name_clean
from datasets.generation.services import KIND_QUESTIONS, KINDS, MAX_CASES, MIN_CASES

COUNT_MESSAGE = f"Choose from {MIN_CASES} to {MAX_CASES} test cases."


class GenerateForm(forms.Form):
    """Generate with AI: step 1 (how many cases, what to focus on) and step 2 (the name), one form."""

    count = forms.IntegerField(
        label="Number of Test Cases",
        min_value=MIN_CASES,
        max_value=MAX_CASES,
        initial=10,
        error_messages={
            "required": "Enter how many test cases to generate.",
            "invalid": "Enter a whole number.",
            "min_value": COUNT_MESSAGE,
            "max_value": COUNT_MESSAGE,
        },
    )
    instructions = forms.CharField(label="Additional Instructions", required=False, max_length=2000)
    kind = forms.ChoiceField(label="Kind of test cases", choices=KINDS, required=False, initial=KIND_QUESTIONS)
    name = forms.CharField(
        label="Dataset name", max_length=120, error_messages={"required": "Give the dataset a name."}
    )

    def clean_kind(self) -> str:
        return self.cleaned_data.get("kind") or KIND_QUESTIONS

    def clean_name(self) -> str:
        return dataset_name_clean(self.cleaned_data["name"])
