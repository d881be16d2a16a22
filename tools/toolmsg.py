"""say and die, as every tool under tools/ (pibvm, bench) speaks: one line on stderr after the
tool's name, so that in a log where several speak (bench drives pibvm) each line says whose it
is.  A tool's package makes its pair once, in its config module:

    say, die = toolmsg.speaker("pibvm")
"""

import sys


def speaker(tool, error=""):
    """(say, die) for TOOL.  say(msg) prints "TOOL: msg"; die(msg, code=1) prints "TOOL: " ERROR
    msg and exits with CODE.  ERROR is what die puts before the message: bench says "error: ",
    pibvm nothing."""

    def say(msg):
        print(f"{tool}: {msg}", file=sys.stderr, flush=True)

    def die(msg, code=1):
        say(error + msg)
        sys.exit(code)

    return say, die
