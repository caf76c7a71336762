//! `tollgate usage`: what a records file (the JSON-lines recorder's, or `--record` of
//! `tollgate run`/`chat`/`embed`) says: calls, tokens by kind, cost, 429s, retries and
//! latency per model and per day, and a terminal chart of tokens per minute against the
//! model's limit.
//!
//! Records written by the `tollgate` command carry `at_ms` (when they were made); records
//! from the library's `JsonLinesRecorder` do not, and are counted under the day
//! `unknown`, without a chart.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use serde_json::Value;

use crate::CliResult;
use crate::setup::Source;

/// Summarize a records file: calls, tokens by kind, cost, 429s, retries, latency p50/p99,
/// per model and per day, and tokens per minute against the limit.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    tollgate run examples/batch.jsonl -m demo -o out.jsonl --record calls.jsonl\n  \
    tollgate usage calls.jsonl\n  \
    tollgate usage calls.jsonl --model demo --width 40")]
pub(crate) struct UsageArgs {
    /// The records file (JSON lines of `call` and `attempt` records).
    file: PathBuf,
    /// Chart this model (default: the one with the most tokens).
    #[arg(long)]
    model: Option<String>,
    /// Width of the chart's bars, in characters.
    #[arg(long, default_value_t = 50)]
    width: usize,
}

#[derive(Debug, Default)]
struct ModelStats {
    calls: u64,
    failed: u64,
    input: u64,
    cache_read: u64,
    cache_write: u64,
    output: u64,
    cost: f64,
    rate_limited: u64,
    retries: u64,
    latencies: Vec<f64>,
}

#[derive(Debug, Default)]
struct DayStats {
    calls: u64,
    tokens: u64,
    cost: f64,
}

fn u(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or(0)
}

fn seconds(v: &Value) -> f64 {
    match v {
        Value::Object(_) => u(v, "secs") as f64 + u(v, "nanos") as f64 / 1e9,
        Value::Number(n) => n.as_f64().unwrap_or(0.0),
        _ => 0.0,
    }
}

/// The civil date (UTC) of a day count since 1970-01-01 (Howard Hinnant's algorithm).
pub(crate) fn civil_date(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

pub(crate) fn usage(source: &Source, args: &UsageArgs) -> CliResult {
    let file = std::fs::File::open(&args.file)
        .map_err(|e| format!("cannot read `{}`: {e}", args.file.display()))?;
    let mut models: BTreeMap<String, ModelStats> = BTreeMap::new();
    let mut days: BTreeMap<String, DayStats> = BTreeMap::new();
    // (model, minute since epoch) -> tokens
    let mut minutes: BTreeMap<(String, u64), u64> = BTreeMap::new();
    let mut skipped = 0;
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            eprintln!(
                "tollgate: {}: line {}: not JSON; skipped",
                args.file.display(),
                i + 1
            );
            skipped += 1;
            continue;
        };
        let model = v["model_id"].as_str().unwrap_or("?").to_owned();
        let failed = v["outcome"]["kind"].as_str() == Some("failed");
        let at_ms = v["at_ms"].as_u64();
        match v["type"].as_str() {
            Some("attempt") => {
                let s = models.entry(model).or_default();
                if failed && v["outcome"]["error"].as_str() == Some("rate_limited") {
                    s.rate_limited += 1;
                }
                if !v["retry_in"].is_null() {
                    s.retries += 1;
                }
            }
            Some("call") => {
                let usage = &v["usage"];
                let tokens = u(usage, "input_tokens")
                    + u(usage, "cache_read_tokens")
                    + u(usage, "cache_write_tokens")
                    + u(usage, "cache_write_1h_tokens")
                    + u(usage, "output_tokens");
                let cost = v["cost_usd"].as_f64().unwrap_or(0.0);
                let s = models.entry(model.clone()).or_default();
                s.calls += 1;
                s.failed += u64::from(failed);
                s.input += u(usage, "input_tokens");
                s.cache_read += u(usage, "cache_read_tokens");
                s.cache_write += u(usage, "cache_write_tokens") + u(usage, "cache_write_1h_tokens");
                s.output += u(usage, "output_tokens");
                s.cost += cost;
                s.latencies.push(seconds(&v["latency"]));
                let day = match at_ms {
                    Some(ms) => {
                        let (y, m, d) = civil_date((ms / 86_400_000) as i64);
                        format!("{y:04}-{m:02}-{d:02}")
                    }
                    None => "unknown".into(),
                };
                let d = days.entry(day).or_default();
                d.calls += 1;
                d.tokens += tokens;
                d.cost += cost;
                if let Some(ms) = at_ms {
                    *minutes.entry((model, ms / 60_000)).or_default() += tokens;
                }
            }
            _ => skipped += 1,
        }
    }
    let total_calls: u64 = models.values().map(|s| s.calls).sum();
    println!(
        "tollgate usage: {}: {total_calls} calls{}",
        args.file.display(),
        if skipped > 0 {
            format!(", {skipped} lines skipped")
        } else {
            String::new()
        }
    );
    let mut rows = vec![vec![
        "model".to_owned(),
        "calls".into(),
        "failed".into(),
        "input".into(),
        "cache read".into(),
        "cache write".into(),
        "output".into(),
        "cost $".into(),
        "429s".into(),
        "retries".into(),
        "p50 s".into(),
        "p99 s".into(),
    ]];
    for (id, s) in &mut models {
        s.latencies.sort_by(f64::total_cmp);
        rows.push(vec![
            id.clone(),
            s.calls.to_string(),
            s.failed.to_string(),
            s.input.to_string(),
            s.cache_read.to_string(),
            s.cache_write.to_string(),
            s.output.to_string(),
            format!("{:.6}", s.cost),
            s.rate_limited.to_string(),
            s.retries.to_string(),
            format!("{:.3}", percentile(&s.latencies, 0.50)),
            format!("{:.3}", percentile(&s.latencies, 0.99)),
        ]);
    }
    print_table(&rows);
    println!();
    let mut rows = vec![vec![
        "day".to_owned(),
        "calls".into(),
        "tokens".into(),
        "cost $".into(),
    ]];
    for (day, d) in &days {
        rows.push(vec![
            day.clone(),
            d.calls.to_string(),
            d.tokens.to_string(),
            format!("{:.6}", d.cost),
        ]);
    }
    print_table(&rows);

    let charted = args.model.clone().or_else(|| {
        let mut totals: BTreeMap<&str, u64> = BTreeMap::new();
        for ((m, _), t) in &minutes {
            *totals.entry(m).or_default() += t;
        }
        totals
            .into_iter()
            .max_by_key(|(_, t)| *t)
            .map(|(m, _)| m.to_owned())
    });
    if let Some(model) = charted {
        let per_minute: Vec<(u64, u64)> = minutes
            .iter()
            .filter(|((m, _), _)| *m == model)
            .map(|((_, minute), t)| (*minute, *t))
            .collect();
        let limit = source.catalog().ok().and_then(|(c, _)| {
            c.model(&model).map(|m| {
                let l = m.limits;
                if l.tpm > 0 {
                    l.tpm
                } else {
                    l.input_tpm + l.output_tpm
                }
            })
        });
        println!();
        print!(
            "{}",
            chart(&model, &per_minute, limit.filter(|l| *l > 0), args.width)
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn print_table(rows: &[Vec<String>]) {
    let cols = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..cols)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (cell, w))| {
                if i == 0 {
                    format!("{cell:<w$}")
                } else {
                    format!("{cell:>w$}")
                }
            })
            .collect();
        println!("{}", cells.join("  "));
    }
}

/// The most minutes the chart draws (the latest ones).
const CHART_MINUTES: usize = 120;

/// Tokens per minute as horizontal bars, the limit drawn as `|` on every row.
pub(crate) fn chart(
    model: &str,
    per_minute: &[(u64, u64)],
    limit: Option<u64>,
    width: usize,
) -> String {
    let mut out = String::new();
    let Some((&(first, _), &(last, _))) = per_minute.first().zip(per_minute.last()) else {
        return out;
    };
    let first = first.max(last.saturating_sub(CHART_MINUTES as u64 - 1));
    let peak = per_minute.iter().map(|(_, t)| *t).max().unwrap_or(0);
    let scale = limit.unwrap_or(0).max(peak).max(1) as f64;
    let width = width.max(10);
    out.push_str(&match limit {
        Some(l) => format!("tokens per minute, {model} (| = limit {l} tpm)\n"),
        None => format!("tokens per minute, {model} (no limit in the catalog)\n"),
    });
    let by_minute: BTreeMap<u64, u64> = per_minute.iter().copied().collect();
    for minute in first..=last {
        let tokens = by_minute.get(&minute).copied().unwrap_or(0);
        let filled = ((tokens as f64 / scale) * width as f64).round() as usize;
        let mark = limit.map(|l| ((l as f64 / scale) * width as f64).round() as usize);
        let mut bar: Vec<char> = (0..=width)
            .map(|i| if i < filled { '#' } else { ' ' })
            .collect();
        if let Some(m) = mark {
            bar[m.min(width)] = '|';
        }
        let hh = (minute / 60) % 24;
        let mm = minute % 60;
        let bar: String = bar.into_iter().collect();
        out.push_str(&format!("{hh:02}:{mm:02} {} {tokens}\n", bar.trim_end()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_date_of_known_days() {
        assert_eq!(civil_date(0), (1970, 1, 1));
        assert_eq!(civil_date(20_422), (2025, 11, 30));
        assert_eq!(civil_date(11_016), (2000, 2, 29));
    }

    #[test]
    fn chart_draws_a_row_per_minute_with_the_limit_mark() {
        let chart = chart("demo", &[(600, 50), (602, 100)], Some(100), 10);
        let rows: Vec<&str> = chart.lines().collect();
        assert_eq!(rows.len(), 4, "{chart}");
        assert_eq!(rows[1], "10:00 #####     | 50");
        assert_eq!(rows[2], "10:01           | 0");
        assert_eq!(rows[3], "10:02 ##########| 100");
    }
}
