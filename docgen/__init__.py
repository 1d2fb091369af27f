"""The documentation site's references, generated from the code (never typed by hand): every command and option of
the Typer app, every recipe field, the trajectory record and the dataset rows, the benchmark table.

    python -m docgen                 # write docs/reference/*.md; exit 1 naming every command, option or field
                                     # that has no doc string
    python -m docgen --check         # the same check, writing nothing

`make docs` runs it before the site build; under Material for MkDocs its hook (docgen/hook.py) does.
"""
