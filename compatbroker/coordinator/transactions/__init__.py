"""The transaction coordinator: transactional ids, their transactions and markers, kept durable in
`__transaction_state`.

- state.py: TransactionState and TransactionMetadata, with Kafka's legal transitions;
- records.py: the key/value codec of `__transaction_state` records;
- loader.py: replaying a partition of `__transaction_state` when this node becomes its leader;
- rules.py: Kafka's decisions for InitProducerId and EndTxn (pure functions);
- coordinator.py: TransactionCoordinator (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, verification,
  timeouts, expiration) and `transactions_of(broker)`;
- markers.py: `write_markers`, the control batches that end a transaction in each partition, written on its
  leader node (`write_markers_here` on this node).
"""
from .coordinator import (EndResult, InitResult, TransactionConfig, TransactionCoordinator, TransactionView,
                          TransactionWriteError, transactions_of)
from .markers import write_markers, write_markers_here
from .state import TransactionMetadata, TransactionState

__all__ = ["EndResult", "InitResult", "TransactionConfig", "TransactionCoordinator", "TransactionMetadata",
           "TransactionState", "TransactionView", "TransactionWriteError", "transactions_of", "write_markers",
           "write_markers_here"]
