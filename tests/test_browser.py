"""The HTML reprs, an executed notebook and the documentation site in a real browser:
headless Chromium renders them (the reprs on a light and on a dark page, JupyterLab's two
themes); the screenshots must not be blank, the text must show, and the page must raise
no JavaScript error (the site's own scripts, material's, run: their errors are real).

Skipped only when no Chromium is installed (``.ci/run`` installs Debian's ``chromium``).
Set ``AXESARRAY_SCREENSHOTS=DIR`` to keep the screenshots in DIR (to look at them).
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

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
ROOT = Path(__file__).resolve().parent.parent
# Records any script error (and any rejected promise nobody handled) in the page itself,
# where --dump-dom can read it back.
WATCH = (
    "<script>(function(){var r=function(m){document.documentElement"
    ".setAttribute('data-error',String(m))};window.onerror=r;"
    "window.addEventListener('unhandledrejection',function(e){r(e.reason)});})();</script>"
)
DONE = "<script>document.documentElement.setAttribute('data-done','1')</script>"
# Records how many of the reprs' scrolling boxes are wider than the window lets them be
# (a plan line or a table that would need a horizontal scroll bar at 1200 px).
MEASURE = (
    "<script>window.addEventListener('load',function(){var n=0,w=[];"
    "document.querySelectorAll('div,pre,table').forEach(function(e){"
    "if(e.scrollWidth>e.clientWidth+2&&getComputedStyle(e).overflowX!='visible'){n++;"
    "w.push(e.scrollWidth)}});"
    "document.documentElement.setAttribute('data-overflow',n+':'+w.join(','))});</script>"
)


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
        f"<style>{THEMES[theme]}</style></head><body>{body}{MEASURE}{DONE}</body></html>"
    )


def pictures() -> dict[str, str]:
    """The pictures at real sizes (DESIGN §15): a big blocked tensor by its first blocks, a
    small padded one, a view starting mid-block, a chunked expression with its chunk grid
    and plan, and a function's plan."""
    big = ax.zeros((ax.Axis("N", 32), ax.Axis("C", 64), ax.Axis("H", 56), ax.Axis("W", 56)))
    small = ax.tensor(np.arange(192, dtype=np.float32).reshape(1, 3, 8, 8), "N C H W")
    blocked = ax.tensor(np.arange(256, dtype=np.float32).reshape(1, 64, 2, 2), "N C H W")
    chunked = ax.tensor(np.ones((64, 48, 30), np.float32), "N C W").chunk({"N": 16, "W": 10})
    N, F, K = ax.Axis("N", 32), ax.Axis("F", 8), ax.Axis("K", 4)
    x = ax.placeholder((N, F), "float32", name="x")
    y = ax.placeholder((N, K), "float32", name="y")
    w = ax.variable(np.zeros((8, 4), "float32"), (F, K), name="w")
    loss = ax.softmax_cross_entropy(ax.dot(x, w, over="F"), y, axis="K").mean()
    step = ax.function([loss, *ax.grad(loss, [w])], inputs=[x, y])
    return {
        "big_tensor": big.to_layout("NCHW32")._repr_html_(),
        "small_padded": small.to_layout("NCHW32")._repr_html_(),
        "mid_block_view": blocked.to_layout("NCHW32").isel(C=slice(1, 40, 3))._repr_html_(),
        "chunk_grid": (ax.sigmoid(chunked * 2) + 1)._repr_html_(),
        "function_plan": ax.explain(step)._repr_html_(),
    }


def overflowing(dom: str) -> str:
    found = re.search(r'data-overflow="([^"]*)"', dom)
    assert found, "the page did not measure its boxes"
    return found.group(1)


def run_browser(target, out, *mode) -> subprocess.CompletedProcess:
    url = target if isinstance(target, str) else target.as_uri()
    return subprocess.run(
        [BROWSER, *FLAGS, f"--user-data-dir={out / 'profile'}", *mode, url],
        capture_output=True,
        text=True,
        timeout=120,
    )


def render(html: str, out, name: str):
    """(screenshot as an RGB array, DOM after load, browser log) of a page."""

    path = out / f"{name}.html"
    path.write_text(html, encoding="utf-8")
    return render_url(path, out, name)


def render_url(target, out, name: str, size: str = "1200,2000"):
    """As ``render``, for a file or an http:// address."""
    from PIL import Image

    png = out / f"{name}.png"
    shot = run_browser(target, out, f"--screenshot={png}", f"--window-size={size}")
    assert png.exists(), shot.stderr[-2000:]
    if os.environ.get("AXESARRAY_SCREENSHOTS"):
        keep = Path(os.environ["AXESARRAY_SCREENSHOTS"])
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copy(png, keep / png.name)
    dom = run_browser(target, out, "--dump-dom", "--virtual-time-budget=5000")
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


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize(
    "name", ["big_tensor", "small_padded", "mid_block_view", "chunk_grid", "function_plan"]
)
def test_pictures_render(name, theme, tmp_path):
    """Each picture at its real size, on both themes: drawn (many colours, ink that contrasts
    with the page), no script error, and nothing wider than a 1200 px window."""
    html = pictures()[name]
    assert "<svg" in html or name == "function_plan"
    image, dom, log = render(page(html, theme), tmp_path, f"{name}_{theme}")
    assert script_errors(dom, log) == []
    assert overflowing(dom).startswith("0:"), f"{name}: boxes wider than the window"
    lum = luminance(image)
    background = np.bincount(lum.astype(int).ravel()).argmax()
    assert background > 240 if theme == "light" else background < 30
    assert (np.abs(lum - background) > 20).mean() > 0.01, f"{name}: almost blank"
    if name != "function_plan":
        assert colours(image) > 100, f"{name}: too few colours for a memory picture"


def test_overflow_check_can_fail(tmp_path):
    wide = "<div style='overflow-x:auto'><pre>" + "x" * 400 + "</pre></div>"
    _, dom, _ = render(page(wide, "light"), tmp_path, "wide")
    assert not overflowing(dom).startswith("0:")


def test_checks_can_fail(tmp_path):
    """The detectors see a script error and a blank page."""
    image, dom, log = render(
        page("<script>undefined_function()</script>", "light"), tmp_path, "bad"
    )
    assert script_errors(dom, log)
    assert colours(image) < 5


def watched(html: str) -> str:
    """A whole HTML page with the error watch first in <head> and the done mark last."""
    html = re.sub(r"<head[^>]*>", lambda m: m.group(0) + WATCH, html, count=1)
    return html.replace("</body>", DONE + "</body>", 1)


def assert_not_blank(image, what: str):
    lum = luminance(image)
    background = np.bincount(lum.astype(int).ravel()).argmax()
    assert colours(image) > 100, f"{what}: too few colours for a rendered page"
    assert (np.abs(lum - background) > 20).mean() > 0.02, f"{what}: the page is almost blank"


def test_executed_notebook_renders(tmp_path):
    """A notebook executed by a real kernel and converted by nbconvert shows its outputs:
    the HTML reprs, the layout pictures (PNG), and no script error."""
    import nbformat
    from nbclient import NotebookClient
    from nbconvert import HTMLExporter

    nb = nbformat.read(ROOT / "notebooks" / "01_axes_and_views.ipynb", as_version=4)
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    ).execute()
    html, _ = HTMLExporter().from_notebook_node(nb)
    (tmp_path / "notebook_01.html").write_text(watched(html), encoding="utf-8")
    # Tall enough to hold the first layout pictures below the reprs.
    image, dom, log = render_url(
        tmp_path / "notebook_01.html", tmp_path, "notebook_01", "1200,5000"
    )
    assert script_errors(dom, log) == []
    assert_not_blank(image, "notebook")
    assert dom.count("data:image/png;base64") >= 3  # the three show_layout pictures
    assert "byte strides, outermost first" in dom or "stride" in dom  # the tensor repr


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The documentation site, built by mkdocs (strict) and served on the loopback, as
    ``mkdocs serve`` or any static host would (material's search runs in a web worker,
    which browsers refuse to start from file:// pages)."""
    out = tmp_path_factory.mktemp("site")
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1"),
    )
    assert build.returncode == 0, build.stderr[-3000:]
    for page in (out / "index.html", out / "guide" / "layouts" / "index.html"):
        page.write_text(watched(page.read_text(encoding="utf-8")), encoding="utf-8")
    handler = functools.partial(_Quiet, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_docs_site_renders(site, tmp_path):
    """The site's index: material's scripts run without errors (its bundle turns the page's
    ``no-js`` class into ``js``), and the page is not blank."""
    image, dom, log = render_url(site, tmp_path, "docs_index")
    assert script_errors(dom, log) == []
    assert_not_blank(image, "docs index")
    html_tag = re.search(r"<html[^>]*>", dom).group(0)
    assert "no-js" not in html_tag and re.search(r'class="[^"]*\bjs\b', html_tag), (
        f"material's JavaScript did not run: {html_tag}"
    )
    assert "Named-axis arrays for Python" in dom


def test_docs_site_has_its_pictures(site, tmp_path):
    """The guides carry the pictures drawn at build time, the notebooks their outputs."""
    from urllib.request import urlopen

    def get(path: str) -> str:
        with urlopen(site + path) as page:
            return page.read().decode()

    layouts = get("guide/layouts/")
    assert layouts.count('class="axa-picture"') >= 3 and "first blocks:" in layouts
    views = get("guide/views/")
    assert "element 0 at address 1 (byte 4), inside its block" in views
    assert 'class="axa-picture"' in get("guide/fusion/")
    notebook = get("notebooks/03_fusion/")
    assert "Plan" in notebook and "kernels in execution order" in notebook  # an output
    image, dom, log = render_url(site + "guide/layouts/", tmp_path, "docs_layouts", "1200,3000")
    assert script_errors(dom, log) == []
    assert_not_blank(image, "layouts guide")
