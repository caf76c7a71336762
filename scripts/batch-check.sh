#!/usr/bin/env bash
# A large `tollgate run --via batch` as a new user runs it, through each provider's batch
# endpoint on a third-party server (llmock 0.2.2, a private instance started by
# scripts/peers.sh), interrupted with Ctrl-C mid-poll and run again, its output compared
# line by line with a live run of the same file.
#
#   scripts/batch-check.sh [LINES] [PROVIDER...]     (default 5000; openai anthropic gemini mistral)
#
# Builds the `tollgate` binary (or uses $TOLLGATE_BIN), writes everything under
# target/batch-check/, prints one summary line per provider and exits non-zero if any
# comparison fails.
set -euo pipefail
cd "$(dirname "$0")/.."
lines=${1:-5000}
shift || true
providers=("$@")
[ ${#providers[@]} -eq 0 ] && providers=(openai anthropic gemini mistral)

bin=${TOLLGATE_BIN:-}
if [ -z "$bin" ]; then
  cargo build -q -p tollgate-cli
  bin=target/debug/tollgate
fi
root=target/batch-check
rm -rf "$root" && mkdir -p "$root"
export PEERS_RUN="batch-check-$$"
trap 'bash scripts/peers.sh stop >/dev/null 2>&1 || true' EXIT
url=$(bash scripts/peers.sh llmock batch-check --rpm 1000000 --tpm 1000000000)

python3 - "$root/input.jsonl" "$lines" <<'EOF'
import json, sys
path, n = sys.argv[1], int(sys.argv[2])
with open(path, "w") as f:
    for i in range(1, n + 1):
        f.write(json.dumps({"custom_id": f"q{i}", "method": "POST", "url": "/v1/chat/completions",
                            "body": {"messages": [{"role": "user", "content": f"Question {i}: what is {i} squared?"}],
                                     "max_tokens": 64}}) + "\n")
EOF
printf 'k = "sk-batch-check"\n' > "$root/keys.toml"

status=0
for p in "${providers[@]}"; do
  case $p in
    openai) key=openai name=gpt-4o-mini prefix="" tpm=tpm extra="" ;;
    anthropic) key=anthropic-direct name=claude-sonnet-4-5 prefix=/anthropic tpm=tpm extra="" ;;
    gemini) key=gemini name=gemini-2.0-flash prefix=/gemini tpm=input_tpm extra='batch_body = "llmock"' ;;
    mistral) key=mistral name=mistral-large-latest prefix=/mistral tpm=tpm extra="" ;;
    *) echo "unknown provider $p" >&2; exit 2 ;;
  esac
  dir=$root/$p && mkdir -p "$dir"
  cat > "$dir/models.toml" <<EOF
[models.m]
provider = "$key"
name = "$name"
credential = "k"
rpm = 1000000
$tpm = 1000000000
max_output_tokens = 4096
[models.m.options]
base_url = "$url$prefix"
$extra
[models.m.price]
input = 1.0
output = 4.0
[models.m.batch]
max_requests = 1000
EOF
  run() { "$bin" --catalog "$dir/models.toml" --credentials "$root/keys.toml" run "$root/input.jsonl" -m m --quiet "$@"; }
  run -o "$dir/live.jsonl" > "$dir/live.txt"
  # Batch, Ctrl-C once every batch is submitted, then the same command again.
  run -o "$dir/batch.jsonl" --via batch --poll-every 1s > "$dir/batch-1.txt" &
  pid=$!
  state=$dir/batch.jsonl.batches.json
  until [ -f "$state" ] && python3 -c "import json,sys; b=json.load(open('$state'))['batches']; sys.exit(0 if len(b)==-(-$lines//1000) and all(x['handle'] for x in b) else 1)" 2>/dev/null; do
    sleep 0.05
  done
  kill -INT $pid; wait $pid || true
  run -o "$dir/batch.jsonl" --via batch --poll-every 1s > "$dir/batch-2.txt"
  if python3 - "$dir" "$p" <<'EOF'
import json, sys
d, p = sys.argv[1], sys.argv[2]
def read(name):
    out = {}
    for line in open(f"{d}/{name}"):
        l = json.loads(line)
        assert l["custom_id"] not in out, f"{name}: {l['custom_id']} twice"
        out[l["custom_id"]] = l
    return out
live, batch = read("live.jsonl"), read("batch.jsonl")
assert live.keys() == batch.keys(), "the same ids"
cost = {"live": 0.0, "batch": 0.0}
for i, b in batch.items():
    l = live[i]
    assert l["error"] is None and b["error"] is None, (i, l["error"], b["error"])
    lb, bb = l["response"]["body"], b["response"]["body"]
    assert bb["object"] == lb["object"] == "chat.completion", i
    assert bb["usage"]["prompt_tokens"] == lb["usage"]["prompt_tokens"], i
    assert bb["choices"][0]["finish_reason"] == lb["choices"][0]["finish_reason"], i
    assert b["tollgate"]["via"].startswith("batch:"), i
    cost["live"] += l["tollgate"]["cost_usd"]
    cost["batch"] += b["tollgate"]["cost_usd"]
second = open(f"{d}/batch-2.txt").read()
assert " 0 submitted" in second, second
print(f"{p}: {len(batch)} ids, one line each, identical to the live run in shape, prompt tokens and "
      f"finish reason; resumed with 0 batches submitted twice; cost live ${cost['live']:.4f}, "
      f"batch ${cost['batch']:.4f}")
EOF
  then :; else status=1; fi
done
exit $status
