#!/usr/bin/env python3
"""Renders the official chat templates with Jinja2 (as transformers does) for the
conversations in tests/engine/test_chat.c, and prints the templates and expected outputs
as C string literals; used to write (and to re-check) that test's constants."""
import json
import os
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from make_tiny_model import LLAMA2_CHAT_TEMPLATE, MISTRAL_CHAT_TEMPLATE  # noqa: E402

SMOLLM2 = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
           "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
           "<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
           "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
           "{% endif %}")
CHATML_PLAIN = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content']"
                " + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
                "{{ '<|im_start|>assistant\\n' }}{% endif %}")
LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
          "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
          "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
          "{{ content }}{% endfor %}{% if add_generation_prompt %}"
          "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")

TEMPLATES = dict(smollm2=SMOLLM2, chatml_plain=CHATML_PLAIN, llama2=LLAMA2_CHAT_TEMPLATE,
                 llama3=LLAMA3, mistral=MISTRAL_CHAT_TEMPLATE)
BOS_EOS = dict(smollm2=("<|im_start|>", "<|im_end|>"), chatml_plain=("<s>", "</s>"),
               llama2=("<s>", "</s>"), llama3=("<|begin_of_text|>", "<|eot_id|>"),
               mistral=("<s>", "</s>"))

CONVS = {
    "one": ([("user", "Hi")], True),
    "sys": ([("system", "You are terse."), ("user", "What is 2+2?"), ("assistant", "4"),
             ("user", "And 3+3?")], True),
    "pad": ([("user", "  padded question \n"), ("assistant", " padded answer\t\u3000"),
             ("user", "next")], False),
    "empty": ([], True),
}


def render(name, conv):
    msgs, gen = CONVS[conv]

    def raise_exception(m):
        raise jinja2.exceptions.TemplateError(m)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    bos, eos = BOS_EOS[name]
    try:
        return env.from_string(TEMPLATES[name]).render(
            messages=[dict(role=r, content=c) for r, c in msgs], add_generation_prompt=gen,
            bos_token=bos, eos_token=eos)
    except jinja2.exceptions.TemplateError:
        return None


def c_lit(s):
    return json.dumps(s, ensure_ascii=False)


if __name__ == "__main__":
    for name, t in TEMPLATES.items():
        print(f"static const char T_{name.upper()}[] = {c_lit(t)};")
    for name in TEMPLATES:
        for conv in CONVS:
            out = render(name, conv)
            print(f"/* {name} {conv} */ {c_lit(out) if out is not None else 'NULL'},")
