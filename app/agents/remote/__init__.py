"""``phasewatch agent``: probe the targets a server assigns to one vantage and push each run
to it (the store step of ``serve`` replaced by a push). See docs/agents.md."""
