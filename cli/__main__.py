"""``python -m cli``: the ``dpcausal`` command, run from the checkout (./dev's launcher)."""

from cli.main import main

main(prog_name="dpcausal")
