"""Which series labels carry each fact: the label schema shared by the collector and the rules."""

from __future__ import annotations

from dataclasses import dataclass

#: The team of a pod whose own labels and namespace's labels name none (``labels.team``).
UNASSIGNED_TEAM = "unassigned"


@dataclass(frozen=True)
class LabelVariants:
    """Series labels that may carry each fact, in order of preference (first present wins).

    ``exported_*`` come first: scraped through a ServiceMonitor without ``honorLabels``, the
    exporter's pod labels arrive renamed, and the plain ones then name the exporter itself.
    """

    pod: tuple[str, ...] = ("exported_pod", "pod")
    namespace: tuple[str, ...] = ("exported_namespace", "namespace")
    container: tuple[str, ...] = ("exported_container", "container")
    uuid: tuple[str, ...] = ("UUID", "uuid")
    hostname: tuple[str, ...] = ("Hostname", "hostname")
