"""How requests reach a Prometheus-compatible server (the collector's queries, the dashboard's
rules request): extra headers, the tenant (``X-Scope-OrgID``), bearer or basic
authentication, and the TLS trust (I/O: reads the token file)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import requests

from gpuwatch.config.sections import PrometheusSettings

log = logging.getLogger(__name__)

#: The header that names the tenant of Mimir, Cortex and Thanos Receive (and of proxies in front
#: of VictoriaMetrics cluster).
TENANT_HEADER = "X-Scope-OrgID"


@dataclass(frozen=True)
class HttpOptions:
    """What every request carries; secrets in clear, never to be printed."""

    headers: dict[str, str] = field(default_factory=dict)
    tenant: str | None = None
    bearer_token: str | None = None
    bearer_token_file: str | None = None
    basic_auth: tuple[str, str] | None = None
    ca_file: str | None = None
    insecure_skip_verify: bool = False

    def all_headers(self) -> dict[str, str]:
        """The headers of every request; the bearer token file is read now (a token that is
        rotated is read again by the next collection round)."""
        out = dict(self.headers)
        if self.tenant is not None:
            out[TENANT_HEADER] = self.tenant
        token = self.bearer_token
        if self.bearer_token_file is not None:
            token = Path(self.bearer_token_file).read_text(encoding="utf-8").strip()
        if token:
            out["Authorization"] = f"Bearer {token}"
        return out

    def session(self) -> requests.Session:
        """A session that sends the headers and the basic authentication, and trusts the CA
        bundle (or, with ``insecure_skip_verify``, any certificate)."""
        session = requests.Session()
        session.headers.update(self.all_headers())
        if self.basic_auth is not None:
            session.auth = self.basic_auth
        if self.ca_file is not None:
            session.verify = self.ca_file
        elif self.insecure_skip_verify:
            log.warning(
                "prometheus.tls_insecure_skip_verify: the server's certificate is not checked"
            )
            session.verify = False
        return session


def http_options(prom: PrometheusSettings) -> HttpOptions:
    """The headers, authentication and TLS trust of every request to ``prom``."""
    basic = prom.basic_auth
    return HttpOptions(
        headers={k: v.get_secret_value() for k, v in prom.headers.items()},
        tenant=prom.tenant,
        bearer_token=prom.bearer_token.get_secret_value() if prom.bearer_token else None,
        bearer_token_file=prom.bearer_token_file,
        basic_auth=(basic.username, basic.password.get_secret_value()) if basic else None,
        ca_file=prom.tls_ca_file,
        insecure_skip_verify=prom.tls_insecure_skip_verify,
    )
