-- wrk script for the pinned gateway benchmark by hand (see peers.sh nginx/wrk): WRK_MODEL, WRK_STREAM=1.
-- POST a small chat request; print a machine-readable summary at the end.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer bench"
local model = os.getenv("WRK_MODEL") or "fast"
local stream = os.getenv("WRK_STREAM") == "1"
wrk.body = '{"model":"' .. model .. '","messages":[{"role":"user","content":"Say hello to the benchmark, briefly, in one short line."}],"max_tokens":16,"stream":' .. (stream and "true" or "false") .. '}'
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("WRK requests=%d duration_us=%d non2xx=%d connect=%d read=%d write=%d timeout=%d p50_us=%d p99_us=%d p999_us=%d\n",
    summary.requests, summary.duration, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9)))
end
