"""A local fake OpenAI-compatible server for fault tests and the runner benchmark.

Answers ``POST /v1/chat/completions`` and ``POST /v1/completions`` instantly (no model) with
deterministic content derived from the prompt: a decision prompt gets ``... Decision: X``
(X from a hash of the prompt), a relevance prompt ``{"relevant": [...]}``, anything else a
short summary; a completion request with ``logprobs`` gets top log-probabilities for A, B, C.

Faults (per distinct request body, counted by attempts):

* ``fail_first=N, fail_status=429`` -- the first N attempts of every request get that status;
* ``burst_500=K`` -- the first K requests the server receives get 500;
* ``delay_first=N, delay_s=S`` -- the first N attempts of every request sleep S seconds (timeouts);
* ``malformed_first=N`` -- the first N attempts of every request get a body that is not JSON;
* ``latency_s=S`` -- every answer waits S seconds (to kill a run mid-way);
* ``api_key=K`` -- requests without ``Authorization: Bearer K`` get ``key_status`` (401, or 403 for a key
  that may not use the model); ``models_open`` lets ``GET /v1/models`` through without the key (as
  llama.cpp's server does: the probe passes and only the completions are refused);
* ``served_model=NAME[,NAME2]`` -- ``/v1/models`` lists these (else ``fake``) and a completion for
  another model gets 404 ``model ... does not exist`` (as vLLM answers); ``root=PATH`` adds vLLM's
  ``root`` to the listed model; ``aliases=A,B`` lists other names of it as llama.cpp does (``aliases``);
  ``owned_by=KIND`` is what ``/v1/models`` says owns it (``vllm``, ``llamacpp``; default ``fake``); ``any_model``
  answers a completion for any model name, as llama.cpp's server does; ``chat_text=T`` answers every chat completion
  with T (free text where a constraint was asked for); ``top_letters=AB`` returns only those letters among a text
  completion's top log-probabilities (a letter outside a server's top 20);
* ``capacity=K`` -- at most K requests are worked on at once (each for ``latency_s``), the others
  wait in a queue, as a busy model server does; ``queue_limit=Q`` answers 429 beyond Q waiting.
* ``empty_first=N`` -- the first N attempts of every request get 200 with empty content (``empty_text``,
  default ``" "``: any blank text, ``""``, ``"\\n\\t"`` or a zero-width space); a text completion gets empty
  text and empty top log-probabilities;
* ``empty_body_first=N`` -- the first N attempts of every request get 200 with an empty body;
* ``bad_utf8_first=N`` -- the first N attempts of every request get 200 with a body that is not UTF-8 (a
  byte 0xff inside the answer's text);
* ``drip_s=S`` -- answers on the paths ending in one of ``drip_paths`` (default ``/completions``) are sent one
  byte every S seconds, status line and headers included (a server that keeps each read alive); ``dripped``
  counts the bytes sent, ``hung_up`` the answers the client closed before their end;
* ``echo_key`` -- a chat answer quotes the ``Authorization`` header it was sent (a server echoing the key);
* ``reset_first=N`` -- the first N attempts of every request are read, then the connection is
  closed without an answer (a reset after the server accepted it);
* ``retry_after=S`` -- the ``fail_first`` answers carry ``Retry-After: S``;
* ``attempt_log=FILE`` -- one line per completion attempt: the request body's SHA-256 and the time.

Tokenize endpoint (``tokenize=KIND``, off by default: then those paths get 404): ``vllm``
(``POST /tokenize`` with ``prompt``), ``llama.cpp`` (``POST /tokenize`` with ``content``) or
``llama-cpp-python`` (``POST /extras/tokenize`` with ``input``; adds a BOS token, as that server
does). Its tokenizer is :func:`fake_tokens` -- a word, a digit or a punctuation mark per token --
deliberately unlike the offline approximation, so a test can tell which one priced a budget.

``keep_bodies`` keeps every answered request (path, authorization header, parsed body) in
``bodies``. ``log`` names a file that gets one line per successful answer: the SHA-256 of the request
body (to count duplicates). Run as a script (``python tests/fake_openai_server.py --port P``)
or in-process with :func:`start`.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import threading
import time
from collections import Counter

_FAKE_TOKEN = re.compile(r"[A-Za-z]+|\d|[^\sA-Za-z\d]")
TOKENIZE_KINDS = {"vllm": ("/tokenize", "prompt", False), "llama.cpp": ("/tokenize", "content", False),
                  "llama-cpp-python": ("/extras/tokenize", "input", True)}


def fake_tokens(text: str) -> list[int]:
    """The fake server's tokenizer: one token per run of letters, digit or punctuation mark."""
    return [int(hashlib.sha256(t.encode()).hexdigest()[:6], 16) for t in _FAKE_TOKEN.findall(text)]


class FakeTokenizer:
    """:func:`fake_tokens` as a local tokenizer (what the server's budgets must equal)."""

    name = "fake-tokens"

    def count(self, text: str) -> int:
        return len(fake_tokens(text))


class FakeServer:
    def __init__(self, fail_first=0, fail_status=429, burst_500=0, delay_first=0, delay_s=0.0,
                 malformed_first=0, latency_s=0.0, api_key=None, log=None, keep_bodies=False, tokenize=None,
                 served_model=None, root=None, capacity=0, queue_limit=0, aliases=None, owned_by="fake",
                 any_model=False, chat_text=None, top_letters="ABC",
                 empty_first=0, reset_first=0, retry_after=None, attempt_log=None, key_status=401,
                 models_open=False, empty_text=" ", empty_body_first=0, bad_utf8_first=0, drip_s=0.0,
                 drip_paths=("/completions",), echo_key=False):
        self.bad_utf8_first, self.drip_s, self.drip_paths, self.echo_key = bad_utf8_first, drip_s, drip_paths, echo_key
        self.dripped = self.hung_up = 0
        self.empty_first, self.reset_first, self.retry_after = empty_first, reset_first, retry_after
        if key_status not in (401, 403):
            raise ValueError(f"key_status={key_status!r}: use 401 or 403")
        self.key_status, self.models_open, self.empty_text = key_status, models_open, empty_text
        self.empty_body_first = empty_body_first
        self.attempt_log = open(attempt_log, "a", buffering=1) if attempt_log else None
        self.times: list = []  # (request sha, monotonic time) of every completion attempt
        if tokenize is not None and tokenize not in TOKENIZE_KINDS:
            raise ValueError(f"tokenize={tokenize!r}: use one of {', '.join(TOKENIZE_KINDS)}")
        self.tokenize, self.tokenized = tokenize, 0
        self.fail_first, self.fail_status, self.burst_500 = fail_first, fail_status, burst_500
        self.delay_first, self.delay_s, self.malformed_first = delay_first, delay_s, malformed_first
        self.latency_s, self.api_key = latency_s, api_key
        self.log = open(log, "a", buffering=1) if log else None
        self.attempts: Counter = Counter()
        self.bodies: list = [] if keep_bodies else None  # parsed request bodies, with the auth header
        self.received = 0
        self.answered = 0
        self.served = [m.strip() for m in served_model.split(",")] if served_model else None
        self.root, self.capacity, self.queue_limit = root, int(capacity or 0), int(queue_limit or 0)
        self.aliases = [a.strip() for a in aliases.split(",")] if aliases else None
        self.owned_by, self.any_model = owned_by, any_model
        self.chat_text, self.top_letters = chat_text, top_letters
        self._slots = None
        self.waiting = self.max_inflight = self._inflight = 0

    # -- content --
    @staticmethod
    def _answer_chat(body: dict) -> str:
        msgs = body.get("messages", [])
        text = "\n".join(str(m.get("content", "")) for m in msgs)
        h = int(hashlib.sha256(text.encode()).hexdigest(), 16)
        last = str(msgs[-1].get("content", "")) if msgs else ""
        if '"relevant"' in last:
            n = len(re.findall(r"^\d+\. ", last, re.MULTILINE))
            return json.dumps({"relevant": [i for i in range(1, n + 1) if (h >> i) % 3]})
        if "Decision" in last:
            return f"The notes favour one option over the others.\nDecision: {'ABC'[h % 3]}"
        return "A1 and A3 reported the main points about each option. " * 2

    def _answer_completion(self, body: dict) -> dict:
        h = int(hashlib.sha256(str(body.get("prompt", "")).encode()).hexdigest(), 16)
        lps = {f" {c}": -1.0 - ((h >> (4 * i)) % 16) / 8 for i, c in enumerate("ABC") if c in self.top_letters}
        best = max(lps, key=lps.get)
        return {"text": best, "index": 0, "finish_reason": "length",
                "logprobs": {"tokens": [best], "token_logprobs": [lps[best]], "top_logprobs": [lps],
                             "text_offset": [0]}}

    def respond(self, path: str, headers: dict, raw: bytes) -> tuple[int, bytes, float]:
        """(status, body, delay seconds) for one request; delay -1 marks a malformed answer."""
        self.received += 1
        if (self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}"
                and not (self.models_open and path.endswith("/models"))):
            msg = "invalid api key" if self.key_status == 401 else "this key may not use this model"
            return self.key_status, json.dumps({"error": {"message": msg}}).encode(), 0.0
        if path.endswith("/models"):
            data = [dict({"id": m, "object": "model", "owned_by": self.owned_by}, **({"root": self.root} if self.root else {}),
                         **({"aliases": [m] + self.aliases} if self.aliases else {}))
                    for m in (self.served or ["fake"])]
            return 200, json.dumps({"object": "list", "data": data}).encode(), 0.0
        if path.endswith("/tokenize"):
            return self._tokenize(path, raw)
        if not path.endswith("/completions"):
            return 404, b'{"error": {"message": "not found"}}', 0.0
        key = hashlib.sha256(raw).hexdigest()
        self.attempts[key] += 1
        n = self.attempts[key]
        self.times.append((key, time.monotonic()))
        if self.attempt_log:
            self.attempt_log.write(f"{key} {time.time():.3f}\n")
        if n <= self.reset_first:
            return 0, b"", -2.0  # close the connection without an answer
        if self.received <= self.burst_500:
            return 500, b'{"error": {"message": "burst"}}', 0.0
        if n <= self.fail_first:
            return self.fail_status, b'{"error": {"message": "try again"}}', 0.0
        if n <= self.malformed_first:
            return 200, b'{"id": "x", "choices": [ this is not json', -1.0
        if n <= self.empty_body_first:
            return 200, b"", -1.0
        bad_utf8 = n <= self.bad_utf8_first
        empty = n <= self.empty_first
        delay = self.delay_s if n <= self.delay_first else self.latency_s
        body = json.loads(raw or b"{}")
        if self.bodies is not None:
            self.bodies.append((path, headers.get("authorization", ""), body))
        model = body.get("model", "fake")
        if self.served is not None and model not in self.served and not self.any_model:
            msg = {"object": "error", "message": f"The model `{model}` does not exist.", "type": "NotFoundError",
                   "code": 404}
            return 404, json.dumps(msg).encode(), 0.0
        if path.endswith("/chat/completions"):
            text = self.empty_text if empty else self.chat_text if self.chat_text is not None else self._answer_chat(body)
            if self.echo_key:
                text = f"(you sent {headers.get('authorization', '')})\n{text}"
            if bad_utf8:
                text = "BADBYTE" + text
            out = {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": model,
                   "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
        elif path.endswith("/completions"):
            choice = self._answer_completion(body)
            if empty:
                choice.update(text="", logprobs={"tokens": [], "token_logprobs": [], "top_logprobs": [{}],
                                                 "text_offset": []})
            out = {"id": "cmpl-fake", "object": "text_completion", "created": 0, "model": model,
                   "choices": [choice],
                   "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}}
        else:
            return 404, b'{"error": {"message": "not found"}}', 0.0
        raw_out = json.dumps(out).encode()
        return 200, (raw_out.replace(b"BADBYTE", b"\xff\xfe", 1) if bad_utf8 else raw_out), delay

    def _tokenize(self, path: str, raw: bytes) -> tuple[int, bytes, float]:
        if self.tokenize is None or path != TOKENIZE_KINDS[self.tokenize][0]:
            return 404, b'{"detail": "Not Found"}', 0.0
        body = json.loads(raw or b"{}")
        field, bos = TOKENIZE_KINDS[self.tokenize][1:]
        if field not in body:  # llama.cpp answers a body without 'content' with no tokens
            return 200, b'{"tokens": []}', 0.0
        self.tokenized += 1
        toks = ([1] if bos else []) + fake_tokens(str(body[field]))
        out = {"tokens": toks}
        if self.tokenize == "vllm":
            out.update(count=len(toks), max_model_len=8192)
        return 200, json.dumps(out).encode(), 0.0

    async def _work(self, delay: float, status: int, body: bytes) -> tuple[int, bytes]:
        """At most ``capacity`` answers in the works at once; the others queue (429 beyond ``queue_limit``)."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.capacity)
        if self.queue_limit and self.waiting >= self.queue_limit and self._slots.locked():
            return 429, b'{"error": {"message": "queue full"}}'
        self.waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self.waiting -= 1
        self._inflight += 1
        self.max_inflight = max(self.max_inflight, self._inflight)
        try:
            await asyncio.sleep(delay)
        finally:
            self._inflight -= 1
            self._slots.release()
        return status, body

    async def _drip(self, writer, payload: bytes) -> None:
        """``payload`` one byte every ``drip_s`` seconds; a client that hangs up is counted (``hung_up``)."""
        try:
            for i in range(len(payload)):
                if writer.is_closing():
                    raise ConnectionResetError
                writer.write(payload[i:i + 1])
                await writer.drain()
                self.dripped += 1
                await asyncio.sleep(self.drip_s)
        except ConnectionError:
            self.hung_up += 1
            raise

    def answered_ok(self, raw: bytes) -> None:
        self.answered += 1
        if self.log:
            self.log.write(hashlib.sha256(raw).hexdigest() + "\n")

    # -- HTTP/1.1 with keep-alive --
    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for ln in lines[1:]:
                    if ":" in ln:
                        k, v = ln.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                raw = await reader.readexactly(int(headers.get("content-length", 0) or 0))
                status, body, delay = self.respond(path.split("?")[0], headers, raw)
                if delay == -2.0:  # reset: drop the connection unanswered
                    writer.transport.abort()
                    return
                if self.capacity and status == 200 and delay >= 0 and path.endswith("/completions"):
                    status, body = await self._work(delay, status, body)
                elif delay > 0:
                    await asyncio.sleep(delay)
                reason = {200: "OK", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 429: "Too Many Requests",
                          500: "Internal Server Error", 503: "Service Unavailable"}.get(status, "Error")
                extra = (f"retry-after: {self.retry_after}\r\n" if self.retry_after is not None and status in (429, 503)
                         else "")
                payload = (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n{extra}"
                           f"content-length: {len(body)}\r\n\r\n".encode() + body)
                if self.drip_s and any(path.split("?")[0].endswith(p) for p in self.drip_paths):
                    await self._drip(writer, payload)
                else:
                    writer.write(payload)
                await writer.drain()
                if (status == 200 and delay >= 0 and method == "POST" and not path.endswith("/models")
                        and not path.endswith("/tokenize")):
                    self.answered_ok(raw)
        except (asyncio.IncompleteReadError, ConnectionError, ValueError, asyncio.CancelledError):
            pass
        finally:
            writer.close()


def start(port: int = 0, host: str = "127.0.0.1", **faults):
    """Start a fake server in a background thread; returns ``(server, base_url, stop)``."""
    fake = FakeServer(**faults)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    box = {}

    async def main():
        box["stop"] = asyncio.Event()
        srv = await asyncio.start_server(fake.handle, host, port)
        box["port"] = srv.sockets[0].getsockname()[1]
        ready.set()
        await box["stop"].wait()
        srv.close()
        handlers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in handlers:
            t.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        await srv.wait_closed()

    def runner():
        loop.run_until_complete(main())
        loop.close()
    t = threading.Thread(target=runner, daemon=True)
    t.start()
    ready.wait(10)

    def stop():
        loop.call_soon_threadsafe(box["stop"].set)
        t.join(10)
    return fake, f"http://{host}:{box['port']}/v1", stop


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--fail-first", type=int, default=0)
    p.add_argument("--fail-status", type=int, default=429)
    p.add_argument("--burst-500", type=int, default=0)
    p.add_argument("--delay-first", type=int, default=0)
    p.add_argument("--delay-s", type=float, default=0.0)
    p.add_argument("--malformed-first", type=int, default=0)
    p.add_argument("--latency-s", type=float, default=0.0)
    p.add_argument("--api-key", default=None)
    p.add_argument("--log", default=None)
    p.add_argument("--tokenize", default=None, choices=sorted(TOKENIZE_KINDS))
    p.add_argument("--served-model", default=None)
    p.add_argument("--capacity", type=int, default=0)
    p.add_argument("--queue-limit", type=int, default=0)
    p.add_argument("--empty-first", type=int, default=0)
    p.add_argument("--reset-first", type=int, default=0)
    p.add_argument("--retry-after", default=None)
    p.add_argument("--attempt-log", default=None)
    p.add_argument("--key-status", type=int, default=401, choices=(401, 403))
    p.add_argument("--models-open", action="store_true")
    p.add_argument("--empty-text", default=" ")
    p.add_argument("--empty-body-first", type=int, default=0)
    p.add_argument("--owned-by", default="fake")
    p.add_argument("--any-model", action="store_true")
    p.add_argument("--listen-when", default=None, help="start, then wait until this file exists before listening "
                   "(a restart that binds the moment the test says so, however slowly this machine starts a process)")
    a = p.parse_args(argv)
    fake = FakeServer(a.fail_first, a.fail_status, a.burst_500, a.delay_first, a.delay_s, a.malformed_first,
                      a.latency_s, a.api_key, a.log, tokenize=a.tokenize, served_model=a.served_model,
                      capacity=a.capacity, queue_limit=a.queue_limit, empty_first=a.empty_first,
                      reset_first=a.reset_first, retry_after=a.retry_after, attempt_log=a.attempt_log,
                      key_status=a.key_status, models_open=a.models_open,
                      empty_text=a.empty_text.encode().decode("unicode_escape"), empty_body_first=a.empty_body_first,
                      owned_by=a.owned_by, any_model=a.any_model)

    async def serve():
        if a.listen_when:
            print("fake OpenAI server waiting for " + a.listen_when, flush=True)
            while not os.path.exists(a.listen_when):
                await asyncio.sleep(0.01)
        srv = await asyncio.start_server(fake.handle, "127.0.0.1", a.port)
        print(f"fake OpenAI server on http://127.0.0.1:{a.port}/v1", flush=True)
        async with srv:
            await srv.serve_forever()
    asyncio.run(serve())


if __name__ == "__main__":
    main()
