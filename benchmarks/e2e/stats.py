"""From per-request timings to the reported figures, and from repetitions to best / median / spread.

Definitions (all requests of one sample are submitted together, so `conc` requests run concurrently):
- output tok/s = all generated tokens / wall time of the whole batch (submit → last request done);
- decode tok/s = tokens generated after each request's first / (last token of any request − first token of
  any request): the steady decode rate, prefill excluded as far as the batch allows (at conc 1 it is 1/TPOT);
- TTFT = time from a request's arrival to its first token (frontend clock), median over requests;
- TPOT = (last token − first token) / (tokens − 1) per request (engine clock), median over requests.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class RequestTiming:
    num_output_tokens: int
    ttft_s: float  # arrival → first token
    first_token_ts: float  # engine-core monotonic clock
    last_token_ts: float


@dataclass(frozen=True)
class Sample:
    """One repetition of one workload."""

    output_tps: float
    decode_tps: float
    ttft_ms: float
    tpot_ms: float


def summarize_batch(requests: Sequence[RequestTiming], wall_s: float) -> Sample:
    if not requests:
        raise ValueError("summarize_batch: no requests")
    if wall_s <= 0:
        raise ValueError(f"summarize_batch: wall_s={wall_s} must be > 0")
    total_out = sum(r.num_output_tokens for r in requests)
    decode_tokens = sum(r.num_output_tokens - 1 for r in requests)
    decode_span = max(r.last_token_ts for r in requests) - min(r.first_token_ts for r in requests)
    tpots = [
        (r.last_token_ts - r.first_token_ts) / (r.num_output_tokens - 1) for r in requests if r.num_output_tokens > 1
    ]
    return Sample(
        output_tps=total_out / wall_s,
        decode_tps=decode_tokens / decode_span if decode_span > 0 else float("nan"),
        ttft_ms=1000 * statistics.median(r.ttft_s for r in requests),
        tpot_ms=1000 * statistics.median(tpots) if tpots else float("nan"),
    )


@dataclass(frozen=True)
class Aggregate:
    reps: int
    decode_tps_best: float
    decode_tps_median: float
    output_tps_best: float
    output_tps_median: float
    ttft_ms_best: float
    ttft_ms_median: float
    tpot_ms_best: float
    tpot_ms_median: float
    spread_pct: float  # (max − min) / median of decode tok/s over the repetitions


def spread_pct(values: Sequence[float]) -> float:
    """How far apart repetitions were: (max − min) ÷ median, in %; NaN where the median is not positive."""
    median = statistics.median(values)
    return 100 * (max(values) - min(values)) / median if median > 0 else float("nan")


def aggregate(samples: Sequence[Sample]) -> Aggregate:
    """Best = highest rate / lowest latency over repetitions; spread says how far apart they were."""
    if not samples:
        raise ValueError("aggregate: no samples")
    decode = [s.decode_tps for s in samples]
    median_decode = statistics.median(decode)
    return Aggregate(
        reps=len(samples),
        decode_tps_best=max(decode),
        decode_tps_median=median_decode,
        output_tps_best=max(s.output_tps for s in samples),
        output_tps_median=statistics.median(s.output_tps for s in samples),
        ttft_ms_best=min(s.ttft_ms for s in samples),
        ttft_ms_median=statistics.median(s.ttft_ms for s in samples),
        tpot_ms_best=min(s.tpot_ms for s in samples),
        tpot_ms_median=statistics.median(s.tpot_ms for s in samples),
        spread_pct=spread_pct(decode),
    )


def ratio(value: float | None, baseline: float | None) -> float | None:
    """value / baseline, or None when either side is missing (a row that did not run is not a 0)."""
    if value is None or baseline is None or baseline <= 0:
        return None
    return value / baseline


def verdict(ratio_value: float | None, spread_pct_a: float, spread_pct_b: float) -> str:
    """'faster' / 'slower' only when the gap exceeds both rows' run-to-run spread; else 'noise'."""
    if ratio_value is None:
        return ""
    gap_pct = 100 * abs(ratio_value - 1)
    if gap_pct <= max(spread_pct_a, spread_pct_b):
        return "noise"
    return "faster" if ratio_value > 1 else "slower"
