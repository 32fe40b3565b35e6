"""Benchmarks of the College of Experts harness; each writes its results under ``bench/results/``."""
