"""The one masking of secrets in text that leaves gpuwatch: URLs, headers and known values.

Every message, log line, traceback and ``config show`` goes through :func:`mask_text` (or, for
one URL, :func:`mask_url`) before it is printed. Three kinds of secret are masked as ``***``:

- the password in a URL's userinfo, whatever it contains: ``postgresql+psycopg://gw:S3cret@db/gw``
  and ``…//gw:S3cretP%40ss@db/gw`` (URL-encoded) and ``…//gw:p@ss/w:rd@db/gw`` (raw ``@ : /``)
  all show ``gw:***@db/gw``. The userinfo runs to the *last* ``@`` of the URL, so a raw ``@`` in
  a password never leaks its tail (a path holding ``@`` is masked too: generous, never short).
  A user name alone (no ``:``) is kept: it names an account, it does not open one;
- secret-looking query parameters (``password=``, ``token=``, ``sslpassword=``, ``api_key=`` …);
- ``Authorization`` / ``Proxy-Authorization`` header values (``Basic``, ``Bearer`` …) and
  ``Bearer`` tokens anywhere, the scheme kept (``Authorization: Bearer ***``);
- every known secret value (the configuration's passwords, header values, tokens) wherever it
  appears, as written, URL-encoded and URL-decoded. Values shorter than
  :data:`MIN_KNOWN_SECRET_LEN` characters are masked only in URLs and headers, where their
  position says what they are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from urllib.parse import quote, unquote

MASK = "***"

#: Known secret values shorter than this are not searched for in free text (a one-letter password
#: would mask every occurrence of that letter); URLs and headers mask them by position.
MIN_KNOWN_SECRET_LEN = 4

_URL = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<rest>[^\s'\"<>`]*)")
_SECRET_PARAM = re.compile(
    r"(?i)(?P<name>[^&=?#]*(?:pass|pwd|secret|token|auth|key|credential|signature|sig)[^&=#]*)="
    r"(?P<value>[^&#]*)"
)
_AUTH_HEADER = re.compile(
    r"(?i)(?P<name>(?:proxy-)?authorization['\"]?\s*[:=]\s*['\"]?)"
    r"(?:(?P<scheme>bearer|basic|token|digest|negotiate)\s+)?(?P<value>[^'\"\s,}]+)"
)
_BEARER = re.compile(r"(?i)\b(?P<scheme>bearer)\s+(?P<value>[A-Za-z0-9._~+/=\-]{8,})")


def _mask_userinfo(rest: str) -> str:
    if rest.startswith("/"):
        return rest  # no authority (sqlite:///path, file:///…)
    at = rest.rfind("@")
    if at < 0:
        return rest
    userinfo, host = rest[:at], rest[at + 1 :]
    user, colon, _password = userinfo.partition(":")
    if not colon:
        return rest
    return f"{user}:{MASK}@{host}"


def _mask_query(rest: str) -> str:
    path, question, query = rest.partition("?")
    if not question:
        return rest
    masked = _SECRET_PARAM.sub(lambda m: f"{m['name']}={MASK}", query)
    return f"{path}?{masked}"


def mask_url(url: str) -> str:
    """``url`` with the password of its userinfo and secret query values masked.

    >>> mask_url("postgresql+psycopg://gw:S3cretP%40ss@db:5432/gw?sslmode=require")
    'postgresql+psycopg://gw:***@db:5432/gw?sslmode=require'
    >>> mask_url("https://prom:p@ss/w:rd@prometheus:9090")
    'https://prom:***@prometheus:9090'
    >>> mask_url("sqlite:///var/lib/gpuwatch/gpuwatch.db")
    'sqlite:///var/lib/gpuwatch/gpuwatch.db'
    """
    match = _URL.match(url)
    if match is None:
        return url
    rest = _mask_query(_mask_userinfo(match["rest"]))
    return f"{match['scheme']}{rest}{url[match.end() :]}"


def mask_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Header names with every value masked (names are not secret; values may all be)."""
    return dict.fromkeys(headers, MASK)


def variants(secret: str) -> set[str]:
    """A secret as written, URL-encoded and URL-decoded: the forms text may carry it in."""
    return {secret, quote(secret, safe=""), quote(secret, safe="@:"), unquote(secret)}


def url_password(url: str) -> str | None:
    """The password of a URL's userinfo as written (encoded or raw), or None."""
    match = _URL.match(url)
    if match is None or match["rest"].startswith("/"):
        return None
    rest = match["rest"]
    at = rest.rfind("@")
    if at < 0:
        return None
    _user, colon, password = rest[:at].partition(":")
    return password if colon and password else None


def mask_text(text: str, known: Iterable[str] = ()) -> str:
    """``text`` with every URL, header credential and ``known`` secret masked."""
    for secret in sorted(
        {form for value in known for form in variants(value)}, key=len, reverse=True
    ):
        if len(secret) >= MIN_KNOWN_SECRET_LEN:
            text = text.replace(secret, MASK)
    text = _URL.sub(lambda m: mask_url(m.group(0)), text)
    text = _AUTH_HEADER.sub(
        lambda m: f"{m['name']}{m['scheme'] + ' ' if m['scheme'] else ''}{MASK}", text
    )
    return _BEARER.sub(lambda m: f"{m['scheme']} {MASK}", text)
