"""Checks testdata/lfm25/*.golden against Python Jinja2, independently of
the Go code: each request is converted as engine/chat documents it (text
parts joined with "\n", null content as "", reasoning_content or reasoning
as thinking, arguments parsed, id/type/function order) and rendered with
the Hugging Face-style environment of gen_jinja2_cases.py on the same pinned
clock. Run from this directory after go test -update: python3 check_lfm25_golden.py
"""
import glob
import json
import os
import sys

from gen_jinja2_cases import env


def convert(m):
    out = {"role": m["role"]}
    c = m.get("content")
    if c is None:
        c = ""
    elif isinstance(c, list):
        c = "\n".join(p["text"] for p in c)
    out["content"] = c
    thinking = m.get("reasoning_content", m.get("reasoning"))
    if thinking:
        out["thinking"] = thinking
    if m.get("tool_calls"):
        calls = []
        for tc in m["tool_calls"]:
            call = {}
            if tc.get("id"):
                call["id"] = tc["id"]
            call["type"] = tc.get("type") or "function"
            args = tc["function"].get("arguments")
            if isinstance(args, str):
                args = json.loads(args) if args.strip() else {}
            call["function"] = {"name": tc["function"]["name"], "arguments": args or {}}
            calls.append(call)
        out["tool_calls"] = calls
    for key in ("tool_call_id", "name"):
        if m.get(key):
            out[key] = m[key]
    return out


def main():
    tmpl = env.from_string(open("lfm25_v2.jinja", encoding="utf-8").read())
    ok = True
    for path in sorted(glob.glob("lfm25/*.json")):
        req = json.load(open(path, encoding="utf-8"))
        got = tmpl.render(
            messages=[convert(m) for m in req["messages"]],
            tools=req.get("tools"),
            add_generation_prompt=req.get("add_generation_prompt", False),
            bos_token="<|startoftext|>",
            eos_token="<|im_end|>",
            **req.get("chat_template_kwargs", {}),
        )
        want = open(path[:-len(".json")] + ".golden", encoding="utf-8").read()
        same = got == want
        ok = ok and same
        print(os.path.basename(path), "ok" if same else "DIFFERS")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
