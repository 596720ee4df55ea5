"""The pure-Python window engine: no Spark import anywhere below this package."""
