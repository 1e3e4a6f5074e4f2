"""``noti pool NAME add|del|reg|unreg|call|hangup|show|chown``: the sender-number pool by hand,
as the acting user (``--as``): a pool is its creator's (and root's), see :mod:`noti.numpool.pool`."""

from __future__ import annotations

import click

from noti.cli._options import CliContext, Output, json_options
from noti.errors import PoolError
from noti.numpool import Event, NumberPool, PoolStats

__all__ = ["pool"]


@click.group("pool")
@click.argument("name")
@click.pass_context
def pool(ctx: click.Context, name: str) -> None:
    """Manage the sender-number pool NAME (yours, once your first add creates it)."""
    acting = ctx.find_object(CliContext)
    ctx.obj = NumberPool(name, user=acting.user if acting is not None else None)


pass_pool = click.make_pass_decorator(NumberPool)


def _fire_each(target: NumberPool, event: Event, numbers: tuple[str, ...], quiet: bool) -> None:
    """Fire ``event`` for every number; refusals print ``code: message``, then one error is raised.

    A :class:`~noti.errors.PermissionDenied` (the pool is not the user's) is raised at once:
    it would refuse every number, and none was changed."""
    refused: list[PoolError] = []
    for number in numbers:
        try:
            transition = target.fire(event, number)
        except PoolError as exc:
            if len(numbers) == 1:
                raise
            refused.append(exc)
            click.echo(f"{exc.code}: {exc.message}", err=True)
            continue
        if not quiet:
            click.echo(transition.line())
    if refused:
        raise PoolError(
            f"{event} refused for {len(refused)} of {len(numbers)} numbers",
            pool=target.name,
            code=refused[-1].code,
        )


def _event_command(event: Event, summary: str) -> click.Command:
    @click.command(event.value, help=summary)
    @click.argument("numbers", metavar="NUMBER...", nargs=-1, required=True)
    @click.option("-Q", "--quiet", is_flag=True, help="Print nothing but refusals.")
    @pass_pool
    def command(target: NumberPool, /, numbers: tuple[str, ...], quiet: bool) -> None:
        _fire_each(target, event, numbers, quiet)

    return command


@click.command("call")
@click.argument("number", metavar="[NUMBER]", required=False)
@pass_pool
def call(target: NumberPool, /, number: str | None) -> None:
    """Take NUMBER, or the number free the longest, and print it; it stays busy until hangup."""
    click.echo(target.call(number).number)


@click.command("show")
@json_options
@pass_pool
def show(target: NumberPool, /, out: Output) -> None:
    """Print the owner, each number's state, the free numbers in the order call takes them,
    and the counts."""
    snapshot = target.snapshot()
    numbers, free = snapshot.numbers, snapshot.free
    counts = PoolStats.of(numbers.values()).as_dict()
    if out.quiet:
        return
    if out.wants_json:
        doc = {
            "pool": target.name,
            "owner": snapshot.owner,
            "numbers": {n: str(s) for n, s in numbers.items()},
        }
        out.json({**doc, "free": free, "counts": counts})
        return
    click.echo(f"owner: {snapshot.owner or '- (none: root members only)'}")
    width = max([len("NUMBER"), *(len(n) for n in numbers)])
    click.echo(f"{'NUMBER':<{width}}  STATE")
    for number, state in numbers.items():
        click.echo(f"{number:<{width}}  {state}")
    click.echo(f"free, next first: {' '.join(free) if free else '-'}")
    click.echo("  ".join(f"{state} {count}" for state, count in counts.items()) + f"  total {len(numbers)}")


@click.command("chown")
@click.argument("owner", metavar="USER")
@pass_pool
def chown(target: NumberPool, /, owner: str) -> None:
    """Give the pool to USER (root members only); a pool not made yet is made for USER."""
    previous = target.chown(owner)
    click.echo(f"{target.name}: owner {previous or '-'} -> {owner}")


for _event, _summary in (
    (Event.ADD, "Add numbers to the pool (idle, down); present ones are left as they are."),
    (Event.DEL, "Remove numbers from the pool, whatever their state."),
    (Event.REG, "Mark numbers up (registered); idle ones become free."),
    (Event.UNREG, "Mark numbers down; they are no longer free."),
    (Event.HANGUP, "End the calls on numbers: they become idle (free when up)."),
):
    pool.add_command(_event_command(_event, _summary))
pool.add_command(call)
pool.add_command(show)
pool.add_command(chown)
