# Tables defined outside app.store.models register with Base.metadata on import.
from app.store import maintenancerows as maintenancerows
from app.store import replicarows as replicarows
