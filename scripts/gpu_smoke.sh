#!/usr/bin/env bash
# GPU smoke test of the in-process vLLM backend (vllm/<model-path>). Run it on a CUDA machine:
#
#   pip install -e ".[llm,vllm]"            # vLLM brings its own torch; CUDA only
#   scripts/gpu_smoke.sh /path/to/Qwen2.5-0.5B-Instruct [tensor_parallel_size]
#
# The model folder must already be on disk (nothing is downloaded). The script runs a small grid
# (2 dev templates x 2 variants x 1 seed x R1/B4/ALL/EMPTY/R1-rel at r = 0.6) in each decision
# mode, checks that every row has a decision and no error, that score and grammar answers are
# all valid, and that a rerun makes zero model calls; then it starts a vLLM server of the same folder and checks that
# one decision prompt reaches vLLM as the same token ids over HTTP and in process, with one BOS
# (scripts/same_prompt_tokens.py). A few minutes on one GPU for a small model.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${1:?usage: scripts/gpu_smoke.sh MODEL_FOLDER [TENSOR_PARALLEL_SIZE]}"
TP="${2:-1}"
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
OUT="${OUT:-runs/gpu-smoke}"
export CROSSPROFILE_CACHE="${CROSSPROFILE_CACHE:-$OUT/cache}"

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || \
  echo "warning: nvidia-smi not found"
"$PY" -c "import vllm; print('vllm', vllm.__version__)"
[ -d "$MODEL" ] || { echo "error: model folder $MODEL not found"; exit 2; }

GRID=(--templates templates/dev/dev-hospital-01.yaml templates/dev/dev-bus-route-01.yaml --seeds 0
      --budgets 0.6 --variants PSP,SPS --policies R1,B4,ALL,EMPTY,R1-rel --no-progress)
for MODE in generate grammar score; do
  echo "== vllm/$MODEL, decision mode $MODE, tensor_parallel_size $TP"
  "$PY" -m crossprofile_lib.cli run --backend "vllm/$MODEL" --decision-mode "$MODE" \
      --backend-option tensor_parallel_size="$TP" --out "$OUT/$MODE" "${GRID[@]}"
  "$PY" - "$OUT/$MODE" "$MODE" <<'EOF'
import sys
from crossprofile_lib.run.results import read_results
df = read_results(sys.argv[1])
mode = sys.argv[2]
assert (df.error == "").all(), df[df.error != ""].error.head()
if mode in ("grammar", "score"):
    assert not df.invalid.any(), f"{mode} mode gave invalid answers"
print(f"{len(df)} rows; invalid {df.invalid.mean():.0%}; accuracy {df.correct.mean():.0%}; "
      f"tokenizer {df.tokenizer.iloc[0]}")
EOF
done
echo "== rerun (must make zero model calls)"
"$PY" -m crossprofile_lib.cli run --backend "vllm/$MODEL" --decision-mode score \
    --backend-option tensor_parallel_size="$TP" --out "$OUT/score-rerun" "${GRID[@]}" | tee "$OUT/rerun.txt"
grep -q ": 0 model calls" "$OUT/rerun.txt" || { echo "error: the rerun called the model"; exit 1; }

echo "== the same prompt tokens over HTTP and in process"
PORT="${PORT:-8765}"
"$PY" -m vllm.entrypoints.openai.api_server --model "$MODEL" --served-model-name smoke --port "$PORT" \
    --host 127.0.0.1 --max-model-len 8192 --seed 0 --gpu-memory-utilization 0.4 > "$OUT/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 600); do
  curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null && break
  kill -0 $SERVER 2>/dev/null || { echo "error: the vLLM server stopped (see $OUT/server.log)"; exit 1; }
  sleep 1
done
"$PY" scripts/same_prompt_tokens.py "$MODEL" "http://127.0.0.1:$PORT/v1" smoke gpu_memory_utilization=0.4 \
    tensor_parallel_size="$TP"
echo "gpu smoke test passed"
