#!/usr/bin/env python3
"""A scripted OpenAI-compatible /v1/chat/completions endpoint on loopback, standing in for
a remote LLM in tests. It answers requests in order from a script (a JSON list of steps):
  {"reply": "text"}             200 with a chat completion whose content is text
  {"reply_file": "path"}        the same, content read from a file
  "finish_reason": "length"     (with reply / reply_file) a reply cut at the token limit
  {"status": 500, "body": "…"}  an HTTP error
  {"sleep": 5}                  waits before answering the next step (a timeout)
  {"garbage": "…"}              200 with a body that is not a chat completion
After the script runs out, the last step repeats. Prints the port on stdout, then serves
until killed or until --max-requests (bounded, so a stray loop cannot run forever).
Every request body is appended to --log (JSON lines) so tests can inspect prompts."""
import argparse
import http.server
import json
import sys
import threading
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--script", required=True)
    ap.add_argument("--log")
    ap.add_argument("--max-requests", type=int, default=200)
    ap.add_argument("--api-key")
    args = ap.parse_args()
    with open(args.script) as f:
        steps = json.load(f)
    state = {"i": 0}
    lock = threading.Lock()

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def send(self, status, body):
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                self.wfile.write(data)
            except BrokenPipeError:
                pass

        def do_POST(self):
            n = int(self.headers.get("Content-Length", 0))
            req = self.rfile.read(n).decode("utf-8", "replace")
            with lock:
                i = state["i"]
                state["i"] += 1
                if state["i"] > args.max_requests:
                    threading.Thread(target=self.server.shutdown).start()
            if args.log:
                with open(args.log, "a") as f:
                    f.write(json.dumps({"path": self.path,
                                        "auth": self.headers.get("Authorization"),
                                        "body": json.loads(req) if req else None}) + "\n")
            if args.api_key and self.headers.get("Authorization") != "Bearer " + args.api_key:
                return self.send(401, json.dumps({"error": {"message": "bad key"}}))
            step = steps[min(i, len(steps) - 1)]
            if "sleep" in step:
                time.sleep(step["sleep"])
            if "status" in step:
                return self.send(step["status"], step.get("body", json.dumps(
                    {"error": {"message": "scripted failure %d" % step["status"]}})))
            if "garbage" in step:
                return self.send(200, step["garbage"])
            text = step.get("reply", "")
            if "reply_file" in step:
                with open(step["reply_file"]) as f:
                    text = f.read()
            self.send(200, json.dumps({
                "id": "chatcmpl-%d" % i, "object": "chat.completion", "model": "fake",
                "choices": [{"index": 0, "finish_reason": step.get("finish_reason", "stop"),
                             "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": len(req) // 4, "completion_tokens": len(text) // 4,
                          "total_tokens": len(req) // 4 + len(text) // 4}}))

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    sys.stdout.write("%d\n" % srv.server_address[1])
    sys.stdout.flush()
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
