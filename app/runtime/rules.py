"""Each target's detector settings and notifiers, as the targets file last said (the
service's ``rules``; a reload replaces ``targets``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.analysis.detectors import DetectorParams
from app.config import Target, TargetsFile
from app.notifiers import KINDS, names_for

DEFAULT_PARAMS = DetectorParams()


@dataclass
class AlertRules:
    """Each target's detector settings and notifiers, as the targets file last said.

    Targets known only by their runs (imports, agents) get the defaults and every notifier.
    """

    targets: TargetsFile
    # By name, for the file it was built from: asked a few times a run, so a scan of the
    # list made each run's cost grow with the fleet (bench/fleet.py).
    _index: tuple[TargetsFile | None, dict[str, Target]] = field(default=(None, {}), repr=False)

    def params_for(self, name: str) -> DetectorParams:
        target = self.target(name)
        return target.alerts if target is not None else DEFAULT_PARAMS

    def notifiers_for(self, name: str) -> list[str]:
        target = self.target(name)
        return names_for(target.notifiers if target is not None else [], self.targets.notifiers)

    def wants_refresh(self, notifier: str) -> bool:
        config = self.targets.notifiers.get(notifier)
        return config is None or KINDS[config.type].refreshes

    def target(self, name: str) -> Target | None:
        built_for, by_name = self._index
        if built_for is not self.targets:
            # The first of two targets of one name wins, as a scan of the list did.
            by_name = {}
            for target in self.targets.targets:
                by_name.setdefault(target.name, target)
            self._index = (self.targets, by_name)
        return by_name.get(name)

    def names(self) -> list[str]:
        """Every target's name, as the file says now (replicas share them out by name)."""
        return [target.name for target in self.targets.targets]
