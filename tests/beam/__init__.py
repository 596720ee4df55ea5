"""Differential tests against Apache Beam's Python trigger driver (tools/beamref).

A package, so its helper modules (scenarios, record_golden) do not collide with
tests/flink's modules of the same names.
"""
