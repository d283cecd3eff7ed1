"""An MkDocs hook: the pictures of the guides, drawn from their code at build time.

A fenced block opened with ```` ```python picture ```` runs after the page's blocks above
it (every ```` ```python ```` block of the page runs in one namespace, in order, as a
reader's session would; output is not shown) and the value of its last line is drawn
under the code: a tensor or a plan by its HTML repr, a matplotlib figure
(``ax.show_layout``) as SVG, an SVG string as itself. Nothing drawn is committed: the
pictures exist only in the built site. The block's code stays on the page and still runs
in ``tests/test_docs.py`` like every other ```` ```python ```` block.
"""

from __future__ import annotations

import ast
import contextlib
import io
import os
import re
import tempfile

BLOCK = re.compile(r"^```python[ \t]*(?P<info>[^\n]*)\n(?P<code>.*?)^```[ \t]*$", re.S | re.M)
SKIP = re.compile(r"#\s*doc-test:\s*skip\b")  # as tests/test_docs.py: a block CI cannot run


def on_page_markdown(markdown: str, page, config, files) -> str:
    if "```python picture" not in markdown:
        return markdown
    namespace: dict = {"__name__": "__docs_picture__"}
    # Pages' examples write files (ax.save): in a scratch directory, not the checkout.
    scratch = tempfile.TemporaryDirectory()
    here = os.getcwd()

    def draw(m: re.Match) -> str:
        info, code = m.group("info").split(), m.group("code")
        if "notest" in info or SKIP.match(code.lstrip()):
            return m.group(0)
        os.chdir(scratch.name)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                value = run(code, namespace, page.file.src_path)
        finally:
            os.chdir(here)
        if "picture" not in info:
            return m.group(0)
        return f"```python\n{code}```\n\n{picture(value)}\n"

    with scratch:
        return BLOCK.sub(draw, markdown)


def run(code: str, namespace: dict, where: str):
    """Run ``code``; the value of its last line when that is an expression."""
    tree = ast.parse(code, where)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, where, "exec"), namespace)
    if last is None:
        return None
    return eval(compile(ast.Expression(last.value), where, "eval"), namespace)


def picture(value) -> str:
    """One line of raw HTML (Markdown passes a one-line block through untouched)."""
    if value is None:
        return ""
    if hasattr(value, "savefig"):  # a matplotlib figure
        import matplotlib

        buf = io.StringIO()
        with matplotlib.rc_context({"svg.fonttype": "none"}):  # text stays text
            value.savefig(buf, format="svg", bbox_inches="tight")
        body = buf.getvalue()
        body = body[body.index("<svg") :]
        # The figure keeps its white background: matplotlib draws black text.
        body = f'<div style="background:#fff;display:inline-block;padding:4px">{body}</div>'
    elif hasattr(value, "_repr_html_"):
        body = value._repr_html_()
    elif isinstance(value, str) and value.lstrip().startswith("<svg"):
        body = value
    else:
        raise TypeError(f"a picture block ends in {type(value).__name__}, which draws nothing")
    # Newlines inside <pre> become entities, the rest spaces: one line of HTML.
    body = re.sub(
        r"<pre[^>]*>.*?</pre>", lambda m: m.group(0).replace("\n", "&#10;"), body, flags=re.S
    )
    body = body.replace("\n", " ")
    return f'<div class="axa-picture" style="overflow-x:auto;margin:0 0 1em">{body}</div>'
