"""The ``dynlab`` command line (click).  No numerics here: commands build a spec and call the library.

Exit status: 0 success; 2 a user error (bad value, unknown name, unreadable file), printed
as one line naming the option; 1 a numerical failure (divergence), printed as one line
saying where it happened, with the results computed so far written to ``--data``.

Only click and dynlab's light modules are imported at import time, so ``dynlab --help``
answers quickly; numpy, xarray and matplotlib load inside the command that needs them.
"""
from __future__ import annotations

import re
import sys

import click

from .._version import __version__
from ..errors import DivergenceError, ParameterError
from .options import option_for, quiet_option


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _usage_message(exc: click.UsageError) -> str:
    """``NAME: what is wrong`` for every usage error: the option, argument or command typed wrongly
    comes first, as it does in a library ``ParameterError``'s line."""
    param = getattr(exc, "param", None)
    if isinstance(exc, click.MissingParameter) and param is not None:
        name = param.opts[0] if isinstance(param, click.Option) else param.human_readable_name
        return f"{name}: missing (see --help)"
    if isinstance(exc, click.BadParameter) and param is not None:
        name = param.opts[0] if getattr(param, "opts", None) else (exc.param_hint or param.name)
        return f"{name}: {exc.message}"
    if isinstance(exc, click.NoSuchOption):
        near = f"; did you mean {', '.join(exc.possibilities)}?" if exc.possibilities else ""
        return f"{exc.option_name}: no such option{near}"
    if isinstance(exc, click.BadOptionUsage):
        if "requires" in exc.message and "argument" in exc.message:
            return f"{exc.option_name}: needs a value"
        if "does not take a value" in exc.message:
            return f"{exc.option_name}: is a flag; it takes no value"
        return f"{exc.option_name}: {exc.message}"
    command = re.fullmatch(r"No such command '(.*)'\.", exc.message)
    if command:
        ctx = exc.ctx
        names = ", ".join(ctx.command.list_commands(ctx)) if ctx is not None and hasattr(ctx.command,
                                                                                        "list_commands") else ""
        return f"{command.group(1)}: no such command" + (f"; choose from {names}" if names else "")
    extra = re.fullmatch(r"Got unexpected extra arguments? \((.*)\)", exc.message)
    if extra:
        return f"{extra.group(1)}: unexpected argument(s); see --help"
    return exc.format_message()


class DynlabGroup(click.Group):
    """A click Group whose errors come out as one line on stderr (no usage block, no traceback)."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        """Run the command line; translate errors to one line and an exit status (0, 1 or 2)."""
        argv = list(sys.argv[1:] if args is None else args)
        obj = extra.pop("obj", None)
        obj = {"argv": argv} if obj is None else obj
        if not argv:  # `dynlab` alone: its help, status 0 (the same on every click release)
            with self.make_context(prog_name or "dynlab", ["--help"], resilient_parsing=True) as ctx:
                click.echo(ctx.get_help())
            return _exit(0, standalone_mode)
        from .. import config
        from .._resources import _CONFIRM, confirm_over

        confirm = confirm_over(config.CLI_CONFIRM_SECONDS)  # --force lifts it while parsing
        try:
            code = super().main(argv, prog_name or "dynlab", complete_var, standalone_mode=False, obj=obj, **extra)
        except ParameterError as exc:
            code = _fail(f"{_blamed(exc.param, obj, argv)}: {exc.message}", 2)
        except DivergenceError as exc:
            kept = getattr(exc, "written_to", None)
            asked = getattr(exc, "data_requested", None)
            where = (f"partial results written to {kept}" if kept else
                     f"no finite step to keep, {asked} not written" if asked else
                     "give --data FILE to keep the partial results")
            code = _fail(f"{exc}; {where}", 1)
        except click.UsageError as exc:
            code = _fail(_usage_message(exc), 2)
        except click.Abort:
            code = _fail("aborted", 1)
        except click.ClickException as exc:
            code = _fail(exc.format_message(), 2)
        finally:
            _CONFIRM.reset(confirm)
        return _exit(code, standalone_mode)


#: Model sizes and settings that a --weights file fixes (the options may not be given with it).
_FROM_WEIGHTS = ("--K", "--hidden", "--inputs", "--eta", "--alpha", "--g0", "--activation")


def _blamed(param: str, obj: dict, argv: list) -> str:
    """The option a ParameterError about ``param`` names: its own, or ``--weights`` where the
    value came from a weights file (``--K`` for a file whose K is too large)."""
    opt = option_for(param, obj.get("set_keys", ()))
    given = any(a == opt or a.startswith(opt + "=") for a in argv)
    if opt in _FROM_WEIGHTS and not given and any(a == "--weights" or a.startswith("--weights=") for a in argv):
        return "--weights"
    return opt


def _exit(code, standalone_mode: bool):
    code = code if isinstance(code, int) else 0  # a command's return value is not a status
    if standalone_mode:
        sys.exit(code)
    return code


def _fail(message: str, code: int) -> int:
    click.echo(f"Error: {_one_line(message)}", err=True)
    return code


@click.group(cls=DynlabGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="dynlab", message="%(prog)s %(version)s")
@quiet_option
def main():
    """dynlab: numerical dynamics and gradient analysis of recurrent networks.

    Every command builds one model from the shared options (--model, --hidden, --K, …),
    runs it through the library, writes the Dataset with --data FILE.nc and the picture
    with --out FILE.png.  Each option's help states the default that command uses; an
    option the chosen mode would not use is refused.  A user error exits with status 2, a
    numerical failure with 1.  --quiet (-q), here or after the command, prints only errors.
    """


from . import commands  # noqa: E402  (registers the commands on ``main``)

__all__ = ["main", "DynlabGroup", "commands"]
