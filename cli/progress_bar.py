"""The CLI's live progress bar: a listener of the flows' progress events (flows.progress), one
bar per counted phase (fold fits, repetitions), one dim line per other phase."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class BarListener:
    def __init__(self, progress: Any) -> None:
        self.progress, self.task = progress, None
        self.name, self.cached = "", 0

    def phase(self, name: str, total: int | None = None) -> None:
        if self.task is not None:
            self.progress.update(self.task, completed=self.progress.tasks[self.task].total)
            self.task = None
        if total:
            self.task = self.progress.add_task(name, total=total)
            self.name, self.cached = name, 0
        else:
            self.progress.console.print(f"[dim]- {name}[/dim]")

    def advance(self, n: int = 1, cached: int = 0) -> None:
        if self.task is not None:
            self.cached += cached
            label = f"{self.name} ({self.cached} from cache)" if self.cached else self.name
            self.progress.update(self.task, advance=n, description=label)


@contextmanager
def progress_bar(unit: str, enabled: bool = True) -> Iterator[None]:
    """Show a bar on stderr over what the flows run inside the block (``unit``: "folds", ...)."""
    if not enabled:
        yield
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from flows import progress as events

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn(unit), TimeElapsedColumn(), console=Console(stderr=True)) as bar:
        unsubscribe = events.subscribe(BarListener(bar))
        try:
            yield
        finally:
            unsubscribe()
