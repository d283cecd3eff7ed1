"""The HTML reprs in a real browser: headless Chromium renders them on a light and on a dark
page (JupyterLab's two themes); the screenshots must not be blank, the text must show on
both backgrounds, and the page must raise no JavaScript error.

Skipped only when no Chromium is installed (``.ci/run`` installs Debian's ``chromium``).
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import axesarray as ax

BROWSER = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
pytestmark = pytest.mark.skipif(
    BROWSER is None,
    reason="chromium is not installed and cannot be installed from here "
    "(apt-get install -y chromium; .ci/run does it)",
)

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
]
THEMES = {
    "light": "body{background:#ffffff;color:#111111}",
    "dark": "body{background:#111111;color:#eeeeee}",  # JupyterLab dark, roughly
}
# Records any script error in the page itself, where --dump-dom can read it back.
WATCH = (
    "<script>window.onerror=function(m){document.documentElement"
    ".setAttribute('data-error',String(m))};</script>"
)
DONE = "<script>document.documentElement.setAttribute('data-done','1')</script>"


def reprs() -> list[str]:
    """The HTML of a plain, a transposed, a blocked (padded), a lazy and a big lazy tensor,
    and of a plan."""
    plain = ax.tensor(np.arange(6.0).reshape(2, 3), "N C")
    x = ax.tensor(np.arange(72, dtype=np.float32).reshape(2, 6, 2, 3), "N C H W")
    blocked = x.isel(N=slice(0, 1)).to_layout("NCHW4")  # C=6 pads to 8
    lazy = ax.sigmoid(x * ax.tensor(np.ones(6, np.float32), "C") - 1).sum("C")
    big = ax.tensor(np.ones(4096, np.float32), "N") * ax.tensor(np.ones(4096, np.float32), "C")
    tensors = [plain, plain.transpose("C N"), blocked, lazy, big]
    return [t._repr_html_() for t in tensors] + [ax.explain(lazy)._repr_html_()]


def page(body: str, theme: str) -> str:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'>{WATCH}"
        f"<style>{THEMES[theme]}</style></head><body>{body}{DONE}</body></html>"
    )


def run_browser(path, out, *mode) -> subprocess.CompletedProcess:
    return subprocess.run(
        [BROWSER, *FLAGS, f"--user-data-dir={out / 'profile'}", *mode, path.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )


def render(html: str, out, name: str):
    """(screenshot as an RGB array, DOM after load, browser log) of a page."""
    from PIL import Image

    path = out / f"{name}.html"
    path.write_text(html, encoding="utf-8")
    png = out / f"{name}.png"
    shot = run_browser(path, out, f"--screenshot={png}", "--window-size=1200,2000")
    assert png.exists(), shot.stderr[-2000:]
    dom = run_browser(path, out, "--dump-dom")
    image = np.asarray(Image.open(png).convert("RGB"), dtype=np.int32)
    return image, dom.stdout, shot.stderr + dom.stderr


def script_errors(dom: str, log: str) -> list[str]:
    errors = [line for line in log.splitlines() if "Uncaught" in line]
    if 'data-error="' in dom:
        errors.append(dom.split('data-error="', 1)[1].split('"', 1)[0])
    if 'data-done="1"' not in dom:
        errors.append("the page did not finish loading")
    return errors


def colours(image) -> int:
    return len(np.unique(image.reshape(-1, 3), axis=0))


def luminance(image):
    return image @ np.array([0.299, 0.587, 0.114])


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_reprs_render(theme, tmp_path):
    """Not blank, text visible against the theme's background, no script error."""
    image, dom, log = render(page("<hr>".join(reprs()), theme), tmp_path, theme)
    assert script_errors(dom, log) == []
    assert colours(image) > 200  # text, tints, the layout picture's colours
    lum = luminance(image)
    background = np.bincount(lum.astype(int).ravel()).argmax()  # the commonest: the page
    assert background > 240 if theme == "light" else background < 30
    assert (np.abs(lum - background) > 20).mean() > 0.03, "the page is almost blank"
    # The first repr's header and axes table hold only text on translucent tints: its ink
    # must contrast with the page (text that kept a fixed colour would vanish on one theme).
    top = lum[:120, :500]
    ink = (top < 110).mean() if theme == "light" else (top > 160).mean()
    assert ink > 0.01, f"too little visible text on the {theme} page ({ink:.4f})"


def test_checks_can_fail(tmp_path):
    """The detectors see a script error and a blank page."""
    image, dom, log = render(
        page("<script>undefined_function()</script>", "light"), tmp_path, "bad"
    )
    assert script_errors(dom, log)
    assert colours(image) < 5
