"""Where a saturated ingress replica's time goes, from py-spy's samples (``bench.metered --profile``).

Each sample's time is put on the layer of its innermost Python frame with a source file (its own
time), so the shares add up to what the replica spent between HAProxy's socket and the app and back.
py-spy samples the wall clock while a thread is not idle, so time the kernel spends in a socket call
counts on the frame that made it (uvicorn's or aiohttp's transport writes).

Two frames are not what they seem. ``Thread.run`` (threading.py) is the replica's event-loop thread
(Ray's "AsyncIO Thread") inside uvloop's own C code: the loop's polling and the C parts of its
callbacks, real work of every request. ``Worker.main_loop`` is Ray's main thread waiting in its C++
task loop, which py-spy takes for busy: its samples are left out (:data:`NOT_BUSY`), since the thread's
own counters in /proc put it at 6-8 ms of CPU a second under 3,000 requests a second, where py-spy gave
it 19-33 µs a request (bench/README.md, 2026-11-27 10:16 UTC).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

#: (path substring, layer), the first match of a frame's file wins.
LAYERS: tuple[tuple[str, str], ...] = (
    ("gateway/transports/ray_edge.py", "ray edge (control headers, client address)"),
    ("gateway/runtime/lean_ingress.py", "Serve request wrapping (replica, metrics, logging)"),  # its lean path
    ("gateway/transports/deadline.py", "body deadline"),
    ("gateway/pipeline/http.py", "HTTP transport (RpcFirst: body, Call, reply)"),
    ("gateway/base/metrics.py", "gateway metrics"),
    ("actors/metrics.py", "gateway metrics"),
    ("gateway/pipeline/stages.py", "pipeline (error boundary, compose)"),
    ("gateway/auth/", "auth"),
    ("gateway/core/credentials.py", "auth"),
    ("gateway/credits/", "metering (limits, credits, headers)"),
    ("gateway/limits/rules.py", "metering (limits, credits, headers)"),
    ("gateway/core/jsonrpc.py", "JSON-RPC parse and serialise"),
    ("gateway/rpc/", "JSON-RPC parse, plan, forward"),
    ("gateway/node/", "upstream client (gateway side)"),
    ("aiohttp/", "upstream client (aiohttp)"),
    ("yarl/", "upstream client (aiohttp)"),
    ("multidict/", "upstream client (aiohttp)"),
    ("uvicorn/", "uvicorn (HTTP parse, ASGI cycle, writes)"),
    ("httptools/", "uvicorn (HTTP parse, ASGI cycle, writes)"),
    ("starlette/", "starlette"),
    ("ray/serve/", "Serve request wrapping (replica, metrics, logging)"),
    ("ray/util/metrics", "Ray metrics"),
    ("threading.py", "event loop (uvloop's C code, on Ray's AsyncIO thread)"),
    ("ray/", "Ray (other)"),
    ("asyncio/", "asyncio event loop"),
    ("gateway/", "gateway (other)"),
)
#: Innermost frames whose samples are a thread waiting, not working (the module docstring).
NOT_BUSY = frozenset({"Worker.main_loop"})
_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*):(?P<line>\d+)\)$")
_SHORT = re.compile(r"^.*/(site-packages|lib/python3\.\d+)/|^.*/(?=gateway/)")


def start(pid: int, seconds: float, output: Path) -> subprocess.Popen[bytes] | None:
    """py-spy recording ``pid`` for ``seconds`` into ``output`` (collapsed stacks); None without py-spy."""
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(py_spy).exists():
        print("py-spy not found (pip install py-spy): no profile", file=sys.stderr)
        return None
    command = [py_spy, "record", "--pid", str(pid), "--duration", str(max(1, round(seconds))), "--rate", "250"]
    command += ["--nonblocking", "--full-filenames", "--format", "raw", "--output", str(output)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _frames(stack: str) -> list[tuple[str, str]]:
    out = []
    for frame in stack.split(";"):
        match = _FRAME.match(frame)
        if match is not None and not match["file"].startswith("<"):
            out.append((match["func"], match["file"]))
    return out


def layer_of(file: str) -> str:
    for needle, name in LAYERS:
        if needle in file:
            return name
    return "other"


def summarize(path: Path, us_per_call: float | None = None, top: int = 20) -> str:
    """The samples by layer (own time) and the hottest functions; with ``us_per_call`` (the replica's
    CPU per request in the same run), each share also in µs per call."""
    layers: Counter[str] = Counter()
    functions: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        frames = _frames(stack)
        if not frames:
            continue
        func, file = frames[-1]
        if func in NOT_BUSY:
            continue
        count = int(count_text)
        total += count
        layers[layer_of(file)] += count
        functions[f"{func} ({_SHORT.sub('', file)})"] += count
    if not total:
        return "no samples"

    def share(n: int) -> str:
        text = f"{100 * n / total:5.1f}%"
        return text + (f" {us_per_call * n / total:6.1f} µs" if us_per_call is not None else "")

    out = [f"{total} samples, own time by layer:"]
    out += [f"  {share(n)}  {name}" for name, n in layers.most_common()]
    out.append("hottest functions (own time):")
    out += [f"  {share(n)}  {name}" for name, n in functions.most_common(top)]
    return "\n".join(out)
