"""The oracle: a CUSUM that knows each scenario's generating model before and after a
change, calibrated to phasewatch's false-alarm budget (bench/detection/README.md).

``statistic`` (a run's log phase medians and tail bins, and their likelihood under a
hypothesis), ``regime`` (the hypotheses from the scenario's own parameters), ``cusum``
(delay and threshold calibration), ``events`` (the delay of each labelled change), and
``table`` (the report).
"""
