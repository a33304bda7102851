from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.real.llama import LlamaServer, running_llama
from tests.real.nginx import Nginx, running_nginx


@pytest.fixture(scope="session")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """One llama.cpp server for the session: it loads its model once (~3 s)."""
    with running_llama(tmp_path_factory.mktemp("llama")) as server:
        yield server


@pytest.fixture(scope="session")
def nginx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nginx]:
    """nginx and its upstream for the session."""
    with running_nginx(tmp_path_factory.mktemp("nginx")) as server:
        yield server
