"""Failures a QA person can act on. `reason` is shown on the page as is: no class names."""


class FileRejected(Exception):
    """The upload itself is unacceptable (size, type, archive); refused before any work."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ExtractionFailed(Exception):
    """Reading cases out of an accepted file failed; the dataset becomes Failed with `reason`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
