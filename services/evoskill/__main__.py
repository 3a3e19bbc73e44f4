from evoskill.cli import app

app()
