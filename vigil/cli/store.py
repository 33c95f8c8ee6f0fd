"""The database: ``vigil store prune`` and ``migrate``, ``vigil backup`` and
``vigil restore``."""

from __future__ import annotations

from pathlib import Path

import click

from vigil.cli.base import person_only, settings_for, with_store
from vigil.cli.root import main
from vigil.errors import InputError


@main.group("store")
def store_group() -> None:
    """Prune old history; move the store to PostgreSQL."""


@store_group.command("prune")
@click.option("--older-than", metavar="DURATION", help="Keep finished tasks this recent (default: [retention]).")
@click.option("--dry-run", is_flag=True, help="Count what would be deleted; delete nothing.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def store_prune(ctx: click.Context, older_than: str | None, dry_run: bool, as_json: bool) -> None:
    """Delete finished tasks older than [retention] keep_finished, with their runs,
    events, notes and transcripts; cost totals are kept."""
    from vigil.commands import prune_report

    person_only("prune the history")
    click.echo(with_store(ctx, lambda store, settings: prune_report(store, settings, older_than, dry_run, as_json)))


@store_group.command("migrate")
@click.option("--to", "target", required=True, metavar="URL", help="An empty PostgreSQL database (postgresql://…).")
@click.pass_context
def store_migrate(ctx: click.Context, target: str) -> None:
    """Copy this home's SQLite store into an empty PostgreSQL database and verify it.

    Refused while a dispatcher runs; while it copies, every dispatcher lane and the
    SQLite file's write lock are held, so nothing can change behind it. Then the SQLite
    file is marked moved: every Vigil process refuses it from then on."""
    from vigil.daemon import every_lane
    from vigil.store.transfer import migrate_home, progress_line, summary
    from vigil.store_url import check_store_url, mask_password

    url = check_store_url(target, "--to")
    settings = settings_for(ctx)

    started: list[bool] = []

    def progress(table: str, copied: int, total: int) -> None:
        if not started:  # said once the checks passed and the copy begins
            started.append(True)
            click.echo(f"copying {settings.store.path} → {mask_password(url)}")
        line = progress_line(table, copied, total)
        if line is not None:
            click.echo(line)

    import asyncio

    why = "what it does during the copy would stay behind in the SQLite file"
    with every_lane(settings, "vigil store migrate", why):
        copies = asyncio.run(migrate_home(settings, url, progress))
    click.echo(summary(copies, mask_password(url)))


@main.command()
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print JSON: path, bytes.")
@click.pass_context
def backup(ctx: click.Context, path: Path, as_json: bool) -> None:
    """Write a consistent copy of the database to PATH (safe while the loop runs)."""
    settings = settings_for(ctx)
    if settings.store.url is not None:
        raise InputError(
            f"the store is PostgreSQL ({settings.store.location}): back it up with pg_dump, "
            'e.g. pg_dump --format=custom --file=vigil.dump "$VIGIL_STORE_URL" (see docs/scaling.md)'
        )
    if path.exists():
        raise InputError(f"{path} already exists; choose a new file")
    with_store(ctx, lambda store, settings: store.backup(path.resolve()))
    if as_json:
        from vigil.render import dumps

        click.echo(dumps({"path": str(path.resolve()), "bytes": path.stat().st_size}))
        return
    click.echo(f"backup written to {path}")


@main.command()
@click.argument("backup_path", metavar="BACKUP", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print JSON: database, backup, tasks, kept.")
@click.pass_context
def restore(ctx: click.Context, backup_path: Path, as_json: bool) -> None:
    """Replace the database with a verified copy of BACKUP (stop every Vigil process
    of the home first); the replaced file is kept beside it."""
    from vigil.clock import SystemClock
    from vigil.daemon import every_lane
    from vigil.store.sqlite.backup import restore_file

    person_only("restore the database")
    settings = settings_for(ctx)
    if settings.store.url is not None:
        raise InputError(
            f"the store is PostgreSQL ({settings.store.location}): restore it with pg_restore (see docs/scaling.md)"
        )
    with every_lane(settings, "vigil restore", "it would write on to the replaced file"):
        done = restore_file(settings.store.path, backup_path.resolve(), SystemClock().now_ms())
    if as_json:
        from vigil.render import dumps

        kept = None if done.kept is None else str(done.kept)
        click.echo(
            dumps(
                {
                    "database": str(done.database),
                    "backup": str(backup_path.resolve()),
                    "tasks": done.tasks,
                    "kept": kept,
                }
            )
        )
        return
    click.echo(f"restored {done.database} from {backup_path} ({done.tasks} task(s))")
    if done.kept is not None:
        click.echo(f"the replaced file is kept as {done.kept}")
