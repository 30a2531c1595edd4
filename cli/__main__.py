"""``python -m cli``: the ``dpcausal`` command, run from the checkout (./dev's launcher). A heavy
command goes to the warm runner of ``dpcausal serve`` when one is running and matches this
process (``cli/warm_client.py``); otherwise it runs here."""

import sys

from cli.warm_client import forward

code = forward(sys.argv[1:])
if code is not None:
    sys.exit(code)

from cli.main import main  # noqa: E402 - only when the command runs here

main(prog_name="dpcausal")
