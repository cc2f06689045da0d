"""client"""

from eoslog.client.types import PreparedTxnState

__all__ = ["PreparedTxnState"]
