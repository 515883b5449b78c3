"""Print, as one JSON line, the prompt token ids the in-process vLLM backend (``vllm/<folder>``, a real ``vllm.LLM``
of the CPU build) reads for each request given. Run with the vLLM environment's Python::

    .venv-vllm/bin/python tests/vllm_prompt_ids.py FOLDER '[{"messages": [...], "choices": ["A", "B", "C"]}, ...]'
"""

from __future__ import annotations

import json
import sys
import tempfile

from crossprofile_lib.backends import get_backend
from crossprofile_lib.backends.base import ChatRequest


def main() -> None:
    folder, reqs = sys.argv[1], json.loads(sys.argv[2])
    with tempfile.TemporaryDirectory() as cache:
        b = get_backend(f"vllm/{folder}", cache=cache, dtype="bfloat16", gpu_memory_utilization=0.08,
                        enforce_eager=True)
        try:
            ids = [b.prompt_token_ids(ChatRequest(tuple(r["messages"]), choices=tuple(r.get("choices") or ())))
                   for r in reqs]
        finally:
            b.close()
    print(json.dumps(ids), flush=True)


if __name__ == "__main__":
    main()
