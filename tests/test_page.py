"""``python -m ast_ad explain FILE:F ARGS --html page.html``: one self-contained page, checked in a
real browser."""

import html.parser
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

WORKED = "import numpy as np\n\n\ndef f(x1, x2):\n    return np.log(x1) + x1 * x2 - np.sin(x2)\n"
BROWSER = (
    shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
)


class Tables(html.parser.HTMLParser):
    """The rows of each table with an id, as text, and every URL the page would load."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.loads: list[str] = []
        self.current: str | None = None
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table" and attrs.get("id"):
            self.current = attrs["id"]
            self.tables[self.current] = []
        elif tag == "tr" and self.current:
            self.tables[self.current].append([])
        elif tag in ("td", "th") and self.current:
            self.cell = []
        for key in ("src", "href"):
            if key in attrs:
                self.loads.append(attrs[key])

    def handle_endtag(self, tag):
        if tag == "table":
            self.current = None
        elif tag in ("td", "th") and self.cell is not None and self.current:
            self.tables[self.current][-1].append("".join(self.cell).strip())
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def _write_page(tmp_path):
    model = tmp_path / "model.py"
    model.write_text(WORKED)
    page = tmp_path / "page.html"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ast_ad",
            "explain",
            f"{model}:f",
            "2.0",
            "3.0",
            "--html",
            str(page),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f"wrote {page}" in done.stdout
    return page


def _check_worked_example(text: str) -> None:
    tables = Tables()
    tables.feed(text)
    assert set(tables.tables) == {"forward", "reverse", "meet"}
    forward = {row[0]: row for row in tables.tables["forward"][1:]}
    assert float(forward["y"][2]) == pytest.approx(6.552027172500, abs=1e-12)
    assert float(forward["v1"][2]) == pytest.approx(np.log(2.0), abs=1e-12)
    reverse = tables.tables["reverse"]
    # one row per edge
    assert reverse[0][:3] == ["step", "operation", "input"] and len(reverse) == 1 + 8
    meet = {row[0]: row for row in tables.tables["meet"][1:]}
    assert float(meet["x1"][2]) == pytest.approx(3.5, abs=1e-12)
    assert float(meet["x2"][2]) == pytest.approx(2.989992496600, abs=1e-12)
    parts = [float(v) for v in re.findall(r"(-?\d+\.\d+) \(from", meet["x2"][1])]
    assert sorted(parts) == pytest.approx([0.9899924966, 2.0], abs=1e-10) and sum(
        parts
    ) == pytest.approx(2.989992496600, abs=1e-12)
    assert all(url.startswith("#") for url in tables.loads)  # self-contained: nothing to fetch


def test_the_page_has_the_graph_traces_meeting_points_and_code(tmp_path) -> None:
    text = _write_page(tmp_path).read_text()
    _check_worked_example(text)
    assert text.count("<svg") == 1 and text.count("<rect") == 2 + 5  # two inputs, five steps
    assert "x2 reaches y by 2 paths" in text
    assert "def f_vjp(x1, x2, out_bar=1.0):" in text and "<script" not in text


@pytest.mark.skipif(
    BROWSER is None, reason="no Chromium here (Debian's chromium package provides it)"
)
def test_the_page_in_a_headless_browser(tmp_path) -> None:
    page = _write_page(tmp_path)
    flags = [
        BROWSER,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    env = {**os.environ, "HOME": str(tmp_path)}
    dom = subprocess.run(
        [*flags, "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    _check_worked_example(dom.stdout)  # the tables as the browser parsed them
    shot = tmp_path / "page.png"
    subprocess.run([*flags, f"--screenshot={shot}", "--window-size=1200,1400", "--hide-scrollbars",
                    page.as_uri()], capture_output=True, timeout=120, env=env, check=False)
    # a picture, not blank
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


LOOP = (
    "def leapfrog(x0, v0):\n    x, v = x0, v0\n    for _ in range(3):\n        v = v - 0.1 * x\n   "
    "     x = x + 0.1 * v\n    return x * x + v * v\n"
)


@pytest.mark.skipif(
    BROWSER is None, reason="no Chromium here (Debian's chromium package provides it)"
)
def test_a_loops_page_fits_the_window_and_draws_every_run(tmp_path) -> None:
    """A 3-run loop: each run's steps are boxes with their edges (the input's too), the picture
    wraps into bands rather than running off the page, and in a 1,200 px window the browser lays the
    page out without a sideways scroll; the screenshot is a picture."""
    model = tmp_path / "loop.py"
    model.write_text(LOOP)
    page = tmp_path / "page.html"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ast_ad",
            "explain",
            f"{model}:leapfrog",
            "1.0",
            "0.5",
            "--html",
            str(page),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    assert text.count("<rect") == 2 + 15 and "<polyline" in text  # the inputs, 14 steps and y
    svg_width = int(re.search(r'<svg [^>]*width="(\d+)"', text).group(1))
    assert svg_width <= 1100
    # the page, with a script that writes what the browser laid out into the DOM
    probe = tmp_path / "probe.html"
    probe.write_text(text.replace("</body>", "<script>document.body.setAttribute('data-scroll', "
                                  "document.documentElement.scrollWidth)</script></body>"))
    flags = [
        BROWSER,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--window-size=1200,1400",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    env = {**os.environ, "HOME": str(tmp_path)}
    dom = subprocess.run(
        [*flags, "--dump-dom", probe.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    scroll = re.search(r'data-scroll="(\d+)"', dom.stdout)
    assert scroll is not None, dom.stderr[-2000:]
    assert int(scroll.group(1)) <= 1200
    shot = tmp_path / "page.png"
    subprocess.run(
        [*flags, f"--screenshot={shot}", "--hide-scrollbars", page.as_uri()],
        capture_output=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
