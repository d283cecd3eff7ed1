"""HTML building blocks the reprs share: inline styles that read on light and dark
notebook themes, pills, tables, collapsible sections, and byte counts as text.

Inline styles only (no <style>, no scripts): colours inherit the notebook's text colour;
backgrounds are translucent greys and tints that read on light and dark themes alike.
"""

from __future__ import annotations

import html

__all__ = ["nbytes_text", "BOX", "MUTED", "PRE", "e", "pill", "table", "details"]


def nbytes_text(n: int) -> str:
    """``48 B``, ``1.5 KiB``, ``12.3 MiB``..."""
    if n < 1024:
        return f"{n} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}"
    raise AssertionError  # pragma: no cover


_BOX = (
    "font-family:var(--jp-code-font-family,ui-monospace,SFMono-Regular,Menlo,Consolas,"
    "monospace);font-size:var(--jp-code-font-size,12px);line-height:1.45;color:inherit;"
    "max-width:100%;overflow-x:auto;margin:2px 0"
)
_TINTS = {
    "grey": "rgba(127,127,127,0.18)",
    "l": "rgba(46,160,67,0.22)",
    "r": "rgba(163,113,247,0.25)",
    "layout": "rgba(56,139,253,0.22)",
    "warn": "rgba(210,153,34,0.25)",
}
_TABLE = "border-collapse:collapse;margin:4px 0;color:inherit;font-size:inherit"
_TH = (
    "padding:2px 10px;text-align:left;font-weight:600;background:rgba(127,127,127,0.14);"
    "border-bottom:1px solid rgba(127,127,127,0.45);color:inherit"
)
_TD = (
    "padding:2px 10px;text-align:left;vertical-align:top;"
    "border-bottom:1px solid rgba(127,127,127,0.2);color:inherit;background:transparent"
)
_MUTED = "opacity:0.72"
_SUMMARY = "cursor:pointer;font-weight:600;margin:4px 0 2px"
_PRE = (
    "margin:2px 0 4px;padding:6px 8px;background:rgba(127,127,127,0.09);border-radius:4px;"
    "color:inherit;font-family:inherit;font-size:inherit;line-height:1.35;overflow:auto;"
    "max-height:28em"
)


def _e(text) -> str:
    return html.escape(str(text))


def _pill(text: str, tint: str = "grey") -> str:
    return (
        f'<span style="display:inline-block;padding:0 7px;margin:0 4px 0 0;border-radius:9px;'
        f'background:{_TINTS[tint]};color:inherit">{_e(text)}</span>'
    )


def _table(head: list[str], rows: list[list[str]]) -> str:
    """A table; ``rows`` hold ready HTML (a cell that is a whole ``<td ...>`` is used as
    it is: a row spanning the columns), ``head`` plain text."""
    out = [f'<table style="{_TABLE}"><thead><tr>']
    out += [f'<th style="{_TH}">{_e(h)}</th>' for h in head]
    out.append("</tr></thead><tbody>")
    for row in rows:
        cells = (c if c.startswith("<td") else f'<td style="{_TD}">{c}</td>' for c in row)
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _details(title: str, body: str, open_: bool = True) -> str:
    flag = " open" if open_ else ""
    return (
        f'<details{flag} style="margin:2px 0"><summary style="{_SUMMARY}">{_e(title)}</summary>'
        f"{body}</details>"
    )


# Public names for the other display modules.
BOX, MUTED, PRE = _BOX, _MUTED, _PRE
e, pill, table, details = _e, _pill, _table, _details
