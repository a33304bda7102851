"""Real servers nobody here wrote, on loopback: llama.cpp's OpenAI-compatible server (the
real engine, llama-cpp-python's portable wheel, a tiny random-weight model) and nginx
(Debian's, proxying to a small upstream). Their tests check phasewatch's breakdown against
each server's own account of its time and against an independent raw-socket client.

Without the part a test needs it skips, or fails when ``PHASEWATCH_REQUIRE_LLM=1`` /
``PHASEWATCH_REQUIRE_NGINX=1`` (``.ci/run`` sets both and installs both).
"""
