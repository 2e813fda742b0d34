"""Evaluation: golden datasets, metrics, judges, runner, reports and comparison."""
