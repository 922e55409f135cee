from whiz.cli import app

app()
