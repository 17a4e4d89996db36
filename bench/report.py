"""Plain-text tables of load results, with ratios to a named baseline measured in the same run."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bench.loadgen import LoadResult


@dataclass(frozen=True)
class Row:
    """One measured configuration at one connection count."""

    name: str
    result: LoadResult


def _fmt_rate(value: float) -> str:
    return f"{value:,.0f}"


def _fmt_ms(value: float) -> str:
    return f"{value:.2f}" if value < 100 else f"{value:.0f}"


def _fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def ratio(rows: Iterable[Row], name: str, baseline: str, connections: int) -> float | None:
    """req/s of `name` divided by req/s of `baseline` at `connections`, when both were measured."""
    by_key = {(row.name, row.result.connections): row.result for row in rows}
    num = by_key.get((name, connections))
    den = by_key.get((baseline, connections))
    if num is None or den is None or den.rps <= 0:
        return None
    return num.rps / den.rps


def format_table(rows: Sequence[Row], baseline: str | None = None) -> str:
    """A fixed-width table: configuration, connections, req/s, p50, p99, errors, CPU, ratio.

    The ratio is req/s against the `baseline` row with the same connection count.
    """
    headers = [
        "configuration",
        "conn",
        "client",
        "req/s",
        "p50 ms",
        "p99 ms",
        "count",
        "errors",
        "client ms/req",
        "server ms/req",
        f"vs {baseline}" if baseline else "ratio",
    ]
    lines: list[list[str]] = []
    for row in rows:
        res = row.result
        lines.append(
            [
                row.name,
                str(res.connections),
                res.backend,
                _fmt_rate(res.rps),
                _fmt_ms(res.p50_ms),
                _fmt_ms(res.p99_ms),
                str(res.count),
                ",".join(f"{k}:{v}" for k, v in sorted(res.errors.items())) or "0",
                f"{res.client_cpu_ms_per_req:.3f}",
                "-" if res.server_cpu_ms_per_req is None else f"{res.server_cpu_ms_per_req:.3f}",
                _fmt_ratio(ratio(rows, row.name, baseline, res.connections)) if baseline else "-",
            ]
        )
    widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h) for i, h in enumerate(headers)]
    numeric = {i for i in range(1, len(headers)) if i not in (2, 7)}

    def render(cells: Sequence[str]) -> str:
        return "  ".join(
            cell.rjust(widths[i]) if i in numeric else cell.ljust(widths[i]) for i, cell in enumerate(cells)
        ).rstrip()

    out = [render(headers), render(["-" * w for w in widths])]
    out.extend(render(line) for line in lines)
    return "\n".join(out)


def format_ratios(rows: Sequence[Row], pairs: Iterable[tuple[str, str]]) -> str:
    """Lines like `gateway / forwarder @64: 0.412` for every pair and connection count measured."""
    connection_counts = sorted({row.result.connections for row in rows}, reverse=True)
    out: list[str] = []
    for name, baseline in pairs:
        for conns in connection_counts:
            value = ratio(rows, name, baseline, conns)
            if value is not None:
                out.append(f"{name} / {baseline} @{conns} conn: {value:.3f}")
    return "\n".join(out)


def print_report(rows: Sequence[Row], baseline: str | None = None, pairs: Iterable[tuple[str, str]] = ()) -> None:
    print(format_table(rows, baseline))
    ratios = format_ratios(rows, pairs)
    if ratios:
        print()
        print(ratios)
