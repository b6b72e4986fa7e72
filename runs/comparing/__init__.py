"""Comparing and deciding: pairing two runs' cases, the paired statistics, the compare page,
the matrix, history across versions, the pinned baseline, the CI gate and flaky cases."""
