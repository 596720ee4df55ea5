"""Nexmark's windowed queries on tidemark and on Spark's own SQL (``run.py``)."""
