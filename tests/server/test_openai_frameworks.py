#!/usr/bin/env python3
"""`hone serve` under the frameworks agents and evals use: litellm (completion with logprobs,
text_completion with echo, embedding) and langchain-openai (ChatOpenAI with logprobs and n,
OpenAIEmbeddings). Each part skips with a message when its package is absent; the test skips
(77) when both are."""
import os
import sys

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch at import

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverlib as sl  # noqa: E402
from serverlib import Server  # noqa: E402

try:
    import litellm
except ImportError:
    litellm = None
try:
    import langchain_openai
    from langchain_core.messages import HumanMessage
except ImportError:
    langchain_openai = None

MODEL = "tiny-llama-f32"


def test_litellm(t):
    if litellm is None:
        print("litellm not installed: skipped", file=sys.stderr)
        return
    with Server(sl.TINY) as s:
        base = s.url + "/v1"
        r = litellm.completion(model="openai/" + MODEL, api_base=base, api_key="x", max_tokens=4, temperature=0,
                               messages=[{"role": "user", "content": "Hi"}], logprobs=True, top_logprobs=2)
        content = r.choices[0].logprobs["content"] if isinstance(r.choices[0].logprobs, dict) \
            else r.choices[0].logprobs.content
        t.check(len(content) >= 1 and all(len(x["top_logprobs"] if isinstance(x, dict) else x.top_logprobs) == 2
                                          for x in content), "litellm chat logprobs")
        t.check(r.usage.completion_tokens == len(content), "litellm usage")
        e = litellm.embedding(model="openai/" + MODEL, api_base=base, api_key="x", input=["one", "two words"])
        vecs = [d["embedding"] for d in e.data]
        t.check(len(vecs) == 2 and len(vecs[0]) == len(vecs[1]) > 0 and vecs[0] != vecs[1], "litellm embedding")
        tc = litellm.text_completion(model="openai/" + MODEL, api_base=base, api_key="x", prompt="Once upon",
                                     max_tokens=0, echo=True, logprobs=1, temperature=0)
        lp = tc.choices[0].logprobs
        lps = lp["token_logprobs"] if isinstance(lp, dict) else lp.token_logprobs
        t.check(tc.choices[0].text == "Once upon" and lps[0] is None and all(x <= 0 for x in lps[1:]),
                "litellm echo logprobs: %r" % lps)


def test_langchain(t):
    if langchain_openai is None:
        print("langchain-openai not installed: skipped", file=sys.stderr)
        return
    with Server(sl.TINY) as s:
        base = s.url + "/v1"
        llm = langchain_openai.ChatOpenAI(model=MODEL, base_url=base, api_key="x", max_tokens=4, temperature=0,
                                          max_retries=0)
        msg = llm.bind(logprobs=True, top_logprobs=2).invoke("Hello")
        lps = msg.response_metadata.get("logprobs", {}).get("content") or []
        t.check(isinstance(msg.content, str) and len(lps) >= 1 and len(lps[0]["top_logprobs"]) == 2,
                "ChatOpenAI with logprobs: %r" % msg.response_metadata)
        res = langchain_openai.ChatOpenAI(model=MODEL, base_url=base, api_key="x", max_tokens=4, temperature=1,
                                          n=3, seed=3, max_retries=0).generate([[HumanMessage("Tell a story")]])
        t.check(len(res.generations[0]) == 3, "ChatOpenAI n=3 gives three generations")
        emb = langchain_openai.OpenAIEmbeddings(model=MODEL, base_url=base, api_key="x",
                                                check_embedding_ctx_length=False, max_retries=0)
        docs = emb.embed_documents(["first text", "second one"])
        q = emb.embed_query("first text")
        t.check(len(docs) == 2 and len(docs[0]) > 0 and max(abs(a - b) for a, b in zip(q, docs[0])) < 1e-6,
                "OpenAIEmbeddings: a query equals the same document")


def main():
    if litellm is None and langchain_openai is None:
        print("neither litellm nor langchain-openai is installed: skipped", file=sys.stderr)
        return sl.SKIP
    if not os.path.isfile(sl.TINY) or not os.path.isfile(sl.BIN):
        return sl.SKIP
    return sl.Checks().run([test_litellm, test_langchain])


if __name__ == "__main__":
    sys.exit(main())
