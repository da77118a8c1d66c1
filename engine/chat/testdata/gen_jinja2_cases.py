"""Regenerates jinja2_cases.json: the expected output of each case under
Python Jinja2 configured as Hugging Face transformers configures it for chat
templates (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
loopcontrols, a {% generation %} extension, tojson = json.dumps with
ensure_ascii=False, raise_exception, strftime_now on a pinned clock).

Run with Jinja2 3.1: python3 gen_jinja2_cases.py
The Go test renders every case and compares byte for byte.
python3 gen_jinja2_cases.py --check writes nothing and exits 1 when the
committed file differs from what Jinja2 renders (make check-goldens, CI).
"""
import json
import os
import sys
from datetime import datetime

import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

NOW = datetime(2025, 3, 4, 5, 6, 7)


class Generation(Extension):
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = lambda fmt: NOW.strftime(fmt)

# Key order as engine/chat builds messages: role, content, thinking,
# tool_calls (id, type, function{name, arguments}), tool_call_id, name.
DATA = {
    "messages": [
        {"role": "system", "content": "Sys <&> \u00e9"},
        {"role": "user", "content": "  Hello world  "},
        {"role": "assistant", "content": "<think>hmm</think>\n\nAnswer", "thinking": "plan",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_w", "arguments": {
             "zeta": "it's", "alpha": 1, "b": [1, 2.5, True, None], "d": {"y": 1, "x": "q\"'"}, "f": 1.0, "big": 1e16}}}]},
        {"role": "tool", "content": "{\"r\": 1}", "tool_call_id": "c1", "name": "get_w"},
    ],
    "tools": [{"type": "function", "function": {"name": "get_w", "description": "Weather <b> & \u00fc \u2028 \U0001F600",
               "parameters": {"type": "object", "properties": {"loc": {"type": "string"}}, "required": ["loc"],
                              "z": 1.0, "a": 0.5, "e": [], "o": {}}}}],
    "add_generation_prompt": True,
    "bos_token": "<s>",
    "flag": False,
}

CASES = [
    # whitespace: trim_blocks, lstrip_blocks, markers, comments, raw
    ("ws_lstrip_indent", "  {% if true %}\n    x\n  {% endif %}\nend\n"),
    ("ws_plus", "  {%+ if true %}x{% endif +%}\n y"),
    ("ws_minus_var", "a  \n {{- 'b' -}} \n c"),
    ("ws_comment", "a\n  {# comment #}\nb {#- c -#} d\n{# x +#}\ne"),
    ("ws_raw", "{% raw %}\n{{ not evaluated }} {% if %}\n  {% endraw %}\nafter"),
    ("ws_line_starting", "{% if true %}\n  {% if true %}x{% endif %}\n{% endif %}"),
    ("ws_var_then_block", "{{ 'a' }}  {% if true %}b{% endif %}"),
    ("ws_trailing_newlines", "x\n\n"),
    ("ws_crlf", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc"),
    ("ws_first_line", "   {% if true %}x{% endif %}"),
    ("ws_nonadjacent_trim", "{% for m in messages %}{{ m.role }}\n{% endfor %}|"),
    ("ws_nonadjacent_minus", "a {{ 'x' }}{{- 'y' }} b"),
    ("ws_loop_indented", "{% for m in messages %}\n  {% if m.role == 'user' %}\n    U:{{ m.content }}\n  {% endif %}\n{% endfor %}\nEND\n"),
    ("ws_tab_lstrip", "x\n\t {% if true %}y{% endif %}"),
    # literals and lexing
    ("lit_escapes", "{{ \"\\u00e9\\x41\\101\\tq\\'\\\"\\\\d\" }}|{{ 'a\\nb' }}"),
    ("lit_nested_dict", "{{ {'a': {'b': 1}} | tojson }}|{{ {'k': [1, {'z': 2}]}['k'][1]['z'] }}"),
    ("lit_closers_in_strings", "{{ '}}' ~ \"%}\" ~ '{%' }}"),
    ("lit_numbers", "{{ 1_000 + 1 }}|{{ 1e3 }}|{{ 2.5e-3 }}|{{ 10 / 4 }}|{{ 10 / 5 }}|{{ 7 // 2 }}|{{ 0.1 + 0.2 }}"),
    # printing (Python str)
    ("print_values", "{{ messages[2].tool_calls[0].function.arguments.b }}|{{ messages[2].tool_calls[0].function.arguments.d }}|{{ 2.5 }}|{{ 1.0 }}|{{ True }}|{{ none }}|{{ nope }}|{{ messages[2].tool_calls[0].function.arguments.big }}"),
    ("string_filter", "{{ messages[2].tool_calls[0].function.arguments | string }}|{{ [1, 'a', True, None, 1.5] | string }}|{{ true | string }}|{{ none | string }}|{{ 3 | string }}"),
    ("str_repr_quotes", "{{ ['it\\'s', 'q\"', 'both\\'\"', 'nl\\n\\ttab', '\\\\'] | string }}"),
    # tojson
    ("tojson_tools", "{{ tools | tojson }}"),
    ("tojson_messages", "{% for m in messages %}{{ m | tojson }}\n{% endfor %}"),
    ("tojson_indent", "{{ tools[0] | tojson(indent=2) }}"),
    ("tojson_indent_str", "{{ [1, {'a': []}] | tojson(indent='\\t') }}"),
    ("tojson_options", "{{ {'b': 1, 'a': 'é'} | tojson(sort_keys=true) }}|{{ {'b': 1, 'a': 'é😀'} | tojson(ensure_ascii=true) }}|{{ [1, {'a': 2}] | tojson(separators=[',', ':']) }}"),
    ("tojson_scalars", "{{ 'a\"b\\\\c\\n\\t\\x01\\x7f' | tojson }}|{{ 1.0 | tojson }}|{{ 1e20 | tojson }}|{{ 0.1 | tojson }}|{{ none | tojson }}|{{ 123456789012 | tojson }}|{{ '\\u2028<>&' | tojson }}"),
    # the rest of the language as chat templates use it
    ("items_order", "{% for k, v in messages[2].tool_calls[0].function.arguments.items() %}{{ k }}={{ v }};{% endfor %}"),
    ("slicing", "{{ messages[1:] | length }}|{{ messages[-1].role }}|{{ (messages[::-1])[0].role }}|{{ 'abcdef'[1:3] }}|{{ 'abcdef'[::-1] }}|{{ messages[:2] | map(attribute='role') | join(',') }}"),
    ("string_methods", "{{ messages[1].content.strip() }}|{{ messages[1].content.lstrip() }}|{{ messages[1].content.rstrip() }}|{{ 'a,b,c'.split(',') }}|{{ 'a b  c'.split() }}|{{ 'abc'.startswith('a') }}|{{ 'abc'.endswith('bc') }}|{{ 'abc'.upper() }}|{{ 'x-y'.replace('-', '+') }}|{{ messages[2].content.split('</think>')[-1].strip() }}|{{ 'xxabcxx'.strip('x') }}"),
    ("tests", "{{ messages[0].tool_calls is defined }}|{{ messages[2].tool_calls is defined }}|{{ undefined_var is not defined }}|{{ messages[0].content is string }}|{{ tools[0] is mapping }}|{{ tools is sequence }}|{{ none is none }}|{{ flag is false }}|{{ 3 is number }}|{{ messages[2].thinking is defined }}"),
    ("namespace", "{% set ns = namespace(a=0, s='') %}{% for m in messages %}{% set ns.a = ns.a + 1 %}{% set ns.s = ns.s ~ m.role[0] %}{% endfor %}{{ ns.a }} {{ ns.s }}"),
    ("scoping", "{% set x = 1 %}{% for m in messages %}{% set x = x + 1 %}{% endfor %}{{ x }}"),
    ("loop_vars", "{% for m in messages %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }}/{{ loop.revindex0 }};{% endfor %}"),
    ("loopcontrols", "{% for m in messages %}{% if loop.index0 == 1 %}{% continue %}{% endif %}{% if m.role == 'tool' %}{% break %}{% endif %}{{ m.role }};{% endfor %}"),
    ("get", "{{ messages[0].get('content') }}|{{ messages[0].get('nope', 'dflt') }}|{{ messages[0].get('nope') }}|{{ messages[0]['role'] }}"),
    ("in_ops", "{{ '</think>' in messages[2].content }}|{{ 'tool_calls' in messages[2] }}|{{ 'x' not in 'abc' }}|{{ 2 in [1,2] }}"),
    ("macro", "{% macro r(v) %}{% if v is string %}'{{ v }}'{% elif v is mapping %}{{ v | tojson }}{% else %}{{ v | string }}{% endif %}{% endmacro %}{% for k, v in messages[2].tool_calls[0].function.arguments.items() %}{{ k }}={{ r(v) }}, {% endfor %}"),
    ("generation", "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}{% else %}{{ m.role }}{% endif %}\n{% endfor %}"),
    ("strftime", "{{ strftime_now('%Y-%m-%d') }}|{{ strftime_now('%d %B %Y') }}|{{ strftime_now('%a %b %-d %H:%M:%S %p %j %y %I %A %e %%') }}"),
    ("filters", "{{ messages | selectattr('role', 'equalto', 'user') | list | length }}|{{ messages | map(attribute='role') | list }}|{{ 'hi' | default('x') }}|{{ nope | default('x') }}|{{ '  t ' | trim }}|{{ (messages|last).role }}|{{ 'abc' | upper }}|{{ [3,1,2] | sort | join('') }}"),
    ("cond", "{{ 'y' if flag else 'n' }}|{{ 'y' if messages else 'n' }}|{{ (flag or 'z') }}|{{ flag and 'z' }}"),
    ("reverse_range", "{% for m in messages | reverse %}{{ m.role }};{% endfor %}|{% for i in range(3) %}{{ i }}{% endfor %}|{% for i in range(5, 0, -2) %}{{ i }}{% endfor %}"),
    ("raise", "{% if messages|length > 1 %}{{ raise_exception('bad roles ' ~ messages|length) }}{% endif %}"),
    ("blocks", "{% filter upper %}abc{% endfilter %}|{% set x %}\n  block {{ 1 }}\n{% endset %}[{{ x }}]|{% macro w() %}<{{ caller() }}>{% endmacro %}{% call w() %}in{% endcall %}|{% for m in [] %}x{% else %}empty{% endfor %}|{% for m in messages if m.role != 'system' %}{{ m.role[0] }}{% endfor %}"),
    ("tokens_and_flags", "{{ bos_token }}|{{ add_generation_prompt }}|{{ flag }}"),
]


def main():
    out = {"data": DATA, "now": NOW.isoformat(), "cases": []}
    for name, src in CASES:
        case = {"name": name, "template": src}
        try:
            case["want"] = env.from_string(src).render(**DATA)
        except jinja2.exceptions.TemplateError as e:
            case["error"] = str(e)
        out["cases"].append(case)
    text = json.dumps(out, ensure_ascii=False, indent=1) + "\n"
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jinja2_cases.json")
    if sys.argv[1:] == ["--check"]:
        with open(path, encoding="utf-8") as f:
            committed = json.load(f)
        # Compare case by case so that a failure names the case, not just the file.
        ok = True
        byname = {c["name"]: c for c in committed.get("cases", [])}
        for case in out["cases"]:
            got = byname.pop(case["name"], None)
            if got != case:
                ok = False
                print("jinja2_cases.json: case %s: committed %r, Jinja2 %s gives %r"
                      % (case["name"], got, jinja2.__version__, case), file=sys.stderr)
        for name in byname:
            ok = False
            print("jinja2_cases.json: case %s is not in gen_jinja2_cases.py" % name, file=sys.stderr)
        if committed.get("data") != out["data"] or committed.get("now") != out["now"]:
            ok = False
            print("jinja2_cases.json: data or now differ from gen_jinja2_cases.py", file=sys.stderr)
        if ok and open(path, encoding="utf-8").read() != text:
            ok = False
            print("jinja2_cases.json: same cases, different bytes: rerun gen_jinja2_cases.py", file=sys.stderr)
        print("jinja2_cases.json: %d cases %s" % (len(out["cases"]), "ok" if ok else "DIFFER"))
        sys.exit(0 if ok else 1)
    if sys.argv[1:]:
        sys.exit("usage: gen_jinja2_cases.py [--check]")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main()
