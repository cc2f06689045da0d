from eoslog.cli.main import app

app()
