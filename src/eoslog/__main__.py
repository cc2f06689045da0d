from eoslog.cli import run

run()
