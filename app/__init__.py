"""phasewatch: where the time of one request goes, measured on a schedule."""

__version__ = "0.1.0"
