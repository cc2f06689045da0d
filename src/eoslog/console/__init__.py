"""``eoslog console``: a web console for transactions, LSOs, groups and their lag.

It talks to brokers only through the public admin client (``eoslog.client.Admin``), so it
works against eoslog and against Apache Kafka alike, and reads a broker's Prometheus
endpoint (``--metrics``) for what the Kafka protocol does not tell (log end offset, size).

- ``views``: what each page shows, gathered through the admin client (the transaction
  searches are ``eoslog transactions``' own: ``cli/transactions.py``);
- ``app``: the Starlette application, server-rendered Jinja templates (``templates/``),
  refreshed in place by a few lines of polling script; the abort action.
"""
