"""Which cloud a node runs on, from what its Node object says (docs/recommendations.md).

``spec.providerID`` names the cloud as its scheme (``aws:///us-east-1a/i-…``,
``gce://project/zone/name``, ``azure:///subscriptions/…``, ``oci://ocid1.instance…``); where
it is missing, the labels that only one cloud's node pools set are used.
"""

from __future__ import annotations

from collections.abc import Mapping

#: Provider ids as the price table's ``providers`` column spells them.
KNOWN_PROVIDERS = ("aws", "gcp", "azure", "oci", "lambda", "coreweave", "ibm", "alibaba")

_SCHEMES = {
    "aws": "aws",
    "gce": "gcp",
    "azure": "azure",
    "oci": "oci",
    "ibm": "ibm",
    "alicloud": "alibaba",
}
_LABEL_PREFIXES = (
    ("eks.amazonaws.com/", "aws"),
    ("karpenter.k8s.aws/", "aws"),
    ("cloud.google.com/gke-", "gcp"),
    ("kubernetes.azure.com/", "azure"),
    ("oci.oraclecloud.com/", "oci"),
)


def provider_from_node(provider_id: str | None, labels: Mapping[str, str]) -> str | None:
    """The provider id of a node, or None where nothing says (on-premises, or unknown)."""
    scheme = (provider_id or "").split("://", 1)[0].strip().lower()
    if scheme in _SCHEMES:
        return _SCHEMES[scheme]
    for prefix, provider in _LABEL_PREFIXES:
        if any(key.startswith(prefix) for key in labels):
            return provider
    return None
