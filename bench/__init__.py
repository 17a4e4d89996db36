"""Benchmarks: they print figures and ratios; nothing here asserts a time."""
