"""Who may collect: one lease per collection scope (0008, docs/architecture.md).

Two ``gpuwatch collect --follow`` replicas for the same clusters share one lease row, named
after what they collect. The holder renews it every round; another replica takes it over once
``expires_ts`` has passed. On PostgreSQL a session advisory lock guards the same name, so a
holder that dies releases it with its connection; the row then only says who held it.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, String
from sqlalchemy.orm import Mapped, mapped_column

from gpuwatch.store.models import Base


class Lease(Base):
    __tablename__ = "leases"

    #: What the lease guards, such as ``collect:prod-us-east``.
    name: Mapped[str] = mapped_column(String(253), primary_key=True)
    #: The holder's identity: host name and process id unless configured.
    holder: Mapped[str] = mapped_column(String(253))
    #: When this holder took the lease, epoch seconds.
    acquired_ts: Mapped[int] = mapped_column(BigInteger)
    #: When the holder last renewed it.
    renewed_ts: Mapped[int] = mapped_column(BigInteger)
    #: Until when the lease is held without renewal.
    expires_ts: Mapped[int] = mapped_column(BigInteger)
