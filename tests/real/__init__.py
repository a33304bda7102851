"""Real servers nobody here wrote, on loopback: llama.cpp's OpenAI-compatible server (the
real engine, llama-cpp-python's portable wheel, a tiny random-weight model) and nginx
(Debian's, proxying to a small upstream), whose tests check phasewatch's breakdown against
each server's own account of its time and against an independent raw-socket client; and
Prometheus (Debian's ``prometheus`` and ``promtool``), which judges /metrics, the shipped
rules and the dashboard against a real serve and agent.

Without the part a test needs it skips, or fails when ``PHASEWATCH_REQUIRE_LLM=1`` /
``PHASEWATCH_REQUIRE_NGINX=1`` / ``PHASEWATCH_REQUIRE_PROMETHEUS=1`` (``.ci/run`` sets them
all and installs what they need).
"""
