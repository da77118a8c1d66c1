"""Checks testdata/lfm25/*.golden against Python Jinja2, independently of
the Go code: each request is converted as engine/chat documents it (text
parts joined with "\n", null content as "", reasoning_content or reasoning
as thinking, arguments parsed, id/type/function order) and rendered with
the Hugging Face-style environment of gen_jinja2_cases.py on the same pinned
clock. Run after go test -update: python3 check_lfm25_golden.py (make
check-goldens and CI run it); it exits 1 when a prompt differs and prints
where.
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


def first_difference(got, want):
    """Names the first line where Jinja2's prompt and the golden part."""
    g, w = got.splitlines(keepends=True), want.splitlines(keepends=True)
    for i, (a, b) in enumerate(zip(g, w)):
        if a != b:
            return "  line %d: Jinja2 %r, golden %r" % (i + 1, a, b)
    return "  Jinja2 has %d lines, the golden %d" % (len(g), len(w))


def main():
    # The paths are relative to this file, so it runs from any directory.
    os.chdir(os.path.dirname(os.path.abspath(__file__)))
    tmpl = env.from_string(open("lfm25_v2.jinja", encoding="utf-8").read())
    ok = True
    paths = sorted(glob.glob("lfm25/*.json"))
    if not paths:
        print("no requests in lfm25/*.json", file=sys.stderr)
        sys.exit(1)
    for path in paths:
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
        if not same:
            print(first_difference(got, want), file=sys.stderr)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
