"""The key footer every screen shows: Textual's Footer, rebuilt only when what it shows has changed."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer


class KeyFooter(Footer):
    """A Footer that skips a rebuild when the keys, labels and enabled states it would show are unchanged.

    Textual's Footer recomposes (a dozen new widgets, each restyled) on every bindings signal: focus moves,
    screen resumes, `refresh_bindings()`. Showing a screen fired it five times in a row, which cost more than
    the rest of a group switch together. Only public parts of Footer are used: the screen's bindings signal
    (through `bindings_changed`), `active_bindings`, `compose` and `recompose`.
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._shown: tuple[tuple[object, ...], ...] | None = None
        self._signalled = False  # the screen's bindings signal has fired: its bindings are ready to show

    def shown_keys(self) -> tuple[tuple[object, ...], ...]:
        """What compose() would draw now: (key, label, description, action, enabled, tooltip) per binding."""
        active = self.screen.active_bindings
        out: list[tuple[object, ...]] = [
            (binding.key, self.app.get_key_display(binding), binding.description, binding.action, enabled, tooltip)
            for (_, binding, enabled, tooltip) in active.values()
            if binding.show
        ]
        palette = active.get(self.app.COMMAND_PALETTE_BINDING)
        if self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE and palette is not None:
            out.append(("palette", palette[1].key, palette[2]))
        return tuple(out)

    def bindings_changed(self, screen: Screen[object]) -> None:
        self._signalled = True
        super().bindings_changed(screen)

    def compose(self) -> ComposeResult:
        if self._signalled:
            self._shown = self.shown_keys()
        yield from super().compose()

    async def recompose(self) -> None:
        if not self.is_attached or (self._shown is not None and self.shown_keys() == self._shown):
            return
        await super().recompose()
