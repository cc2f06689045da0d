"""The transaction coordinator: transactional ids, their producer ids and epochs, and the
two-phase completion of their transactions.

``state`` holds the state table, ``metadata`` one id's state and its prepare/complete
transitions, ``log`` the ``__transaction_state`` record formats. Nothing here imports the
wire protocol: handlers translate requests into these calls.
"""
