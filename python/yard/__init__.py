"""yard: the Switchyard measurement harness (experiments as data, cgroup sampling, statistics, report)."""

__version__ = "0.1.0"
