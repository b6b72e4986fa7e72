"""Two schema classes of one name in the API are one component of its OpenAPI document: the
document then describes one of them for both (a body documented as `{"count"}` where `{"name"}`
is required), and generated clients and schemathesis send the wrong body. Names may repeat only
for classes that describe the same thing."""

from collections import defaultdict

from ninja import Schema

import evalsite.api  # noqa: F401  (imports every router, so every schema class exists)


def _subclasses(cls: type) -> list[type]:
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


def test_schema_names_are_unique_per_shape():
    by_name: dict[str, dict[str, type]] = defaultdict(dict)
    for cls in _subclasses(Schema):
        if not cls.__module__.startswith("ninja"):
            by_name[cls.__name__][f"{cls.__module__}.{cls.__qualname__}"] = cls
    clashes = [
        f"{name}: {', '.join(sorted(classes))}"
        for name, classes in by_name.items()
        if len({str(cls.model_json_schema()) for cls in classes.values()}) > 1
    ]
    assert clashes == []
