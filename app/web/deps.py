"""What a request handler may reach: the service ``create_app`` built, and a database session.

The one seam between the web layer and the store: handlers never build engines or sessions.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request

from app.runtime.service import Service
from app.store.db import Session


def get_service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


def get_session(service: Annotated[Service, Depends(get_service)]) -> Iterator[Session]:
    with service.pipeline.sessions() as session:
        yield session


ServiceDep = Annotated[Service, Depends(get_service)]
SessionDep = Annotated[Session, Depends(get_session)]
