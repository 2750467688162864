#!/usr/bin/env python3
"""Makes jinja_cases.json: chat-template test cases rendered by the reference
Jinja2 (3.1.x) set up as Hugging Face's apply_chat_template sets it up
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, its
tojson filter and raise_exception). The Go tests compare our interpreter
with these outputs. Run from this folder: python3 gen_cases.py
"""
import copy, json, random, re, warnings
warnings.simplefilter("ignore", SyntaxWarning)
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.exceptions import TemplateError

U=[{"role":"user","content":"Hello!"}]
SU=[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]
MULTI=[{"role":"system","content":"Be brief."},{"role":"user","content":"  Hi there  "},{"role":"assistant","content":"Hello."},{"role":"user","content":"Joke?\nShort."}]
ALT=[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hey"},{"role":"user","content":"Bye"}]
BAD=[{"role":"user","content":"a"},{"role":"user","content":"b"}]
cases=[]
def c(name, src, messages=U, **kw):
    d={"name":name,"src":src,"messages":messages}; d.update(kw); cases.append(d)

# whitespace control
c("ws_trim_blocks", "{% if true %}\nyes\n{% endif %}\nafter\n")
c("ws_lstrip", "a\n    {% if true %}\n    b\n    {% endif %}\nc")
c("ws_lstrip_var", "a\n    {{ 'x' }}\n  {% if true %}y{% endif %}  z")
c("ws_minus", "a   {%- if true -%}   b   {%- endif -%}   c")
c("ws_minus_var", "a \n {{- 'x' -}} \n b")
c("ws_plus", "a\n    {%+ if true %}b{% endif +%}\nc")
c("ws_comment", "a\n  {# comment #}\nb {#- c -#} c")
c("ws_inline_blocks", "x {% if true %}y{% endif %} z\n{% for i in [1,2] %} {{ i }} {% endfor %}\nend")
c("ws_trailing_nl", "hello\n")
c("ws_two_trailing_nl", "hello\n\n")
c("ws_raw", "{% raw %}{{ not evaluated }}{% endraw %}\nx")
c("ws_crlf", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc")
c("ws_lone_cr", "a\r{% if true %}\rb\r{% endif %}\r\rc{{ 'x\ry' }}")
c("filter_block", "{% filter upper %}abc {{ 'x' }}{% endfilter %}|{% filter trim | replace('a', 'b') %}  aa  {% endfilter %}|{% set s %}\n{%- filter trim -%}\n  text\n  more  \n{%- endfilter -%}\n{% endset %}[{{ s }}]")
c("star_args_joiner", "{{ range(*[2, 5]) | list }}{% set sep = joiner(' | ') %}{% for x in 'abc' %}{{ sep() }}{{ x }}{% endfor %}{% set j = joiner() %}[{{ j() }}{{ j() }}]{{ [1, 2] == (1, 2) }}{{ (1, 2) == (1, 2) }}{{ [(1, 2)] == [(1, 2)] }}")
c("select_none", "{{ tools | selectattr('type', 'equalto', 'x') | list | length }}{{ tools | map(attribute='name') | list }}{{ '' | select | list }}")
c("percent_format", "{{ '%s-%d-%05.2f-%x-%r-%%' % ('a', 7, 3.14159, 255, 'q') }}|{{ 'n=%s' % 5 }}|{{ '%-4s|%4s' | format('ab', 'cd') }}|{{ '%.3e' % 12345.678 }}|{{ '%i' % 3.9 }}")
c("ws_block_after_text_same_line", "text  {% if true %}\n  x\n{% endif %}")
# loops
c("loop_vars", "{% for m in messages %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.length }}/{{ loop.first }}/{{ loop.last }}/{{ loop.revindex }};{% endfor %}", MULTI)
c("loop_scope", "{% set x = 1 %}{% for i in [1,2,3] %}{% set x = x + i %}{{ x }},{% endfor %}{{ x }}")
c("loop_scope_if", "{% for i in [1,2] %}{% if i == 1 %}{% set y = 'set' %}{% endif %}[{{ y }}]{% endfor %}")
c("loop_else", "{% for i in [] %}{{ i }}{% else %}empty{% endfor %}")
c("loop_filter", "{% for i in range(10) if i is odd %}{{ i }}{{ loop.index }} {% endfor %}")
c("loop_break_continue", "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}")
c("loop_unpack", "{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}")
c("loop_dict", "{% for k in {'x': 1, 'y': 2} %}{{ k }}{% endfor %}")
c("loop_nested", "{% for a in [1,2] %}{% for b in 'xy' %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }}|{% endfor %}")
c("loop_prev_next", "{% for i in [1,2,3] %}{{ loop.previtem }}-{{ loop.nextitem }} {% endfor %}")
c("loop_cycle", "{% for i in range(5) %}{{ loop.cycle('a','b') }}{% endfor %}")
c("loop_reversed_slice", "{% for m in messages[::-1] %}{{ m.role }} {% endfor %}|{% for m in messages[1:] %}{{ m.role }} {% endfor %}", MULTI)
# set / namespace
c("ns", "{% set ns = namespace(found=false, n=0) %}{% for m in messages %}{% if m.role == 'user' %}{% set ns.found = true %}{% set ns.n = ns.n + 1 %}{% endif %}{% endfor %}{{ ns.found }} {{ ns.n }}", MULTI)
c("set_block", "{% set x %}inner {{ 1 + 2 }}{% endset %}[{{ x }}]")
c("set_tuple", "{% set a, b = 1, 2 %}{{ a }}{{ b }}")
# macros
c("macro", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Bob') }} {{ greet('Al', punct='?') }} {{ greet(name='Z') }}")
c("macro_recursive", "{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(4) }}")
# expressions
c("arith", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 10 - 2 - 3 }} {{ 4 / 2 }} {{ 1.5 + 1 }} {{ 0.1 + 0.2 }}")
c("concat", "{{ 'a' ~ 1 ~ none ~ true ~ undefined_var }}|{{ 'ab' * 3 }}|{{ [1] + [2] }}")
c("compare", "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ 'x' != 'y' }} {{ 2 >= 2 }} {{ [1,2] == [1,2] }}")
c("logic", "{{ true and 'x' }} {{ false or 'y' }} {{ not none }} {{ none or 0 or '' }} {{ 1 and 0 }}")
c("in_ops", "{{ 'b' in 'abc' }} {{ 2 in [1,2] }} {{ 'k' in {'k':1} }} {{ 'z' not in 'abc' }} {{ 3 not in [1] }}")
c("condexpr", "{{ 'y' if true else 'n' }} {{ 'y' if false else 'n' }} [{{ 'y' if false }}] {{ 1 if 0 else 2 if 0 else 3 }}")
c("literals", "{{ [1, 'a', none, true, 1.5] }} {{ {'a': [1, {'b': 2}]} }} {{ (1, 2) }} {{ (1,) }} {{ 'it''s' }} {{ \"q'\" }} {{ 1e3 }} {{ 1_000 }}")
c("print_values", "{{ none }} {{ true }} {{ false }} {{ 3.0 }} {{ 1e20 }} {{ 0.0001 }} {{ 0.00001 }} {{ -0.5 }} {{ [none, 'it\\'s', \"a\\nb\"] }}")
c("undefined", "[{{ nope }}][{{ messages[0].missing }}][{{ messages[5] }}]{{ nope is defined }}{{ nope is undefined }}{{ nope | length }}{% for x in nope %}x{% endfor %}{% if nope %}t{% else %}f{% endif %}")
c("subscripts", "{{ messages[0]['role'] }} {{ messages[0].role }} {{ messages[-1].content }} {{ 'hello'[1] }} {{ 'hello'[-1] }} {{ 'hello'[1:3] }} {{ 'hello'[::-1] }} {{ [1,2,3,4,5][1:4:2] }} {{ [1,2,3][-2:] }} {{ [1,2,3][:-1] }} {{ [1,2,3][10:] }}", MULTI)
c("string_methods", "{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '  a'.lstrip() }}|{{ 'a  '.rstrip() }}|{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith('bc') }}{{ 'abc'.startswith(('x','a')) }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a-b-c'.split('-', 1) }}|{{ 'aXbX'.replace('X', 'y') }}|{{ 'MiX'.upper() }}{{ 'MiX'.lower() }}|{{ 'hello wORLD'.title() }}|{{ 'hello World'.capitalize() }}|{{ 'abcb'.find('b') }}{{ 'abc'.find('z') }}|{{ ','.join(['a','b']) }}|{{ 'a b c'.rsplit(' ', 1) }}")
c("filters1", "{{ '  x  ' | trim }}|{{ [1,2,3] | length }}|{{ 'abc' | upper }}|{{ 'ABC' | lower }}|{{ nope | default('dflt') }}|{{ '' | default('e', true) }}|{{ [3,1,2] | first }}{{ [3,1,2] | last }}|{{ ['a','b'] | join(', ') }}|{{ 'aaa' | replace('a', 'b', 2) }}|{{ 12 | string }}|{{ 'hello world' | capitalize }}|{{ 'hello world' | title }}")
c("filters2", "{{ [3,1,2] | sort }}|{{ [3,1,2] | sort(reverse=true) }}|{{ ['b','A','c'] | sort }}|{{ [1,2,2,3] | unique | list }}|{{ [1,2,3] | reverse | list }}|{{ [1,2,3] | sum }}|{{ [1,5,3] | max }}{{ [4,2,8] | min }}|{{ -3 | abs }}|{{ '42' | int + 1 }}|{{ '2.5' | float }}|{{ 2.567 | round(2) }}|{{ 3.7 | round }}|{{ 'x' | int }}")
c("filters3", "{{ messages | map(attribute='role') | join(',') }}|{{ messages | selectattr('role', 'equalto', 'user') | list | length }}|{{ messages | rejectattr('role', 'equalto', 'user') | map(attribute='content') | list }}|{{ [1,2,3,4] | select('even') | list }}|{{ [0,1,'',2] | select | list }}|{{ {'b':1,'a':2} | dictsort }}|{{ {'a':1} | items | list }}|{{ ['a','b'] | map('upper') | join }}", MULTI)
c("tojson", "{{ {'name': 'f', 'args': {'x': 1, 'y': [true, none, 1.5, 'q\"\\n']}} | tojson }}|{{ 'Grüße 🦙' | tojson }}|{{ [1,{'a':2}] | tojson(indent=2) }}|{{ messages | tojson }}")
c("tojson_options", "{{ {'b': 'é🦙', 'a': [1, 2]} | tojson(true) }}|{{ {'b': 1, 'a': [1, 2]} | tojson(sort_keys=true) }}|{{ {'b': 1, 'a': [1]} | tojson(indent=0) }}|{{ {'b': 1, 'a': [1]} | tojson(indent=-1) }}|{{ {'b': 1, 'a': [1]} | tojson(indent='\t') }}|{{ {'b': 1, 'a': [1, 2]} | tojson(separators=(',', ':')) }}|{{ [] | tojson(indent=2) }}{{ {} | tojson(indent=2) }}|{{ 'x' | tojson(false, 2) }}")
c("tests", "{{ 'a' is string }}{{ 1 is string }}{{ none is none }}{{ 1 is number }}{{ {} is mapping }}{{ [] is mapping }}{{ [] is iterable }}{{ 'x' is iterable }}{{ 3 is iterable }}{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(2) }}{{ 1 is not none }}{{ 'a' is not string }}{{ true is boolean }}{{ 1 is integer }}{{ 1.0 is float }}{{ 'A' is upper }}{{ 2 is eq 2 }}{{ [] is sequence }}")
c("range", "{{ range(3) | list }} {{ range(1, 4) | list }} {{ range(10, 0, -3) | list }} {% for i in range(2) %}{{ i }}{% endfor %}")
c("dict_access", "{% set d = {'a': 1, 'items': 2} %}{{ d.a }} {{ d['items'] }} {{ d.get('a') }} {{ d.get('z', 'dz') }} {{ d.keys() | list }} {{ d.values() | list }}")
c("raise", "{% if messages | length > 1 %}{{ raise_exception('too many messages') }}{% endif %}ok", MULTI)
c("filter_precedence", "{{ messages | length > 1 }} {{ -1 | abs }} {{ 'a' ~ 'b' | upper }} {{ not messages | length }} {{ messages[0].content | trim | length }}", MULTI)
c("string_concat_adjacent", "{{ 'a' 'b' \"c\" }}")
c("escapes", "{{ 'a\\tb\\\\c\\u00e9\\x41' }}")
c("is_defined_chain", "{% if messages[0].tool_calls is defined and messages[0].tool_calls %}tc{% else %}none{% endif %}{% if tools %}T{% endif %}{% if tools is none %}N{% endif %}")
c("gen_prompt_false", "{% for m in messages %}{{ m.content }}{% endfor %}{% if add_generation_prompt %}GEN{% endif %}", U, gen=False)
c("extra_var", "{% if enable_thinking is defined and enable_thinking is false %}nothink{% else %}think{% endif %}", U, vars={"enable_thinking": False})
c("dict_literal_iter_order", "{% set d = {'z': 1, 'a': 2, 'm': 3} %}{% for k, v in d.items() %}{{ k }}{{ v }}{% endfor %} {{ d | tojson }}")
c("strip_then_slice", "{% set c = '<think>\\nabc\\n</think>\\n\\nanswer' %}{{ c.split('</think>')[-1].lstrip('\\n') }}|{{ c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') }}")
c("indent_filter", "{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(4, true) }}")
c("nested_ns_in_macro", "{% set ns = namespace(v='') %}{% macro add(x) %}{{ x }}!{% endmacro %}{% for m in messages %}{% set ns.v = ns.v + add(m.role) %}{% endfor %}{{ ns.v }}", ALT)
c("loop_index_messages", "{% for m in messages %}{% if loop.index0 > 0 and messages[loop.index0 - 1].role == m.role %}dup{% endif %}{% endfor %}done", BAD)

# classic chat templates (small versions written for these tests)
LLAMA2 = "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"
MISTRAL = """{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- if loop.first and system_message is defined %}
            {{- '[INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}
        {%- else %}
            {{- '[INST] ' + message['content'] + ' [/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {{- message['content'] + eos_token}}
    {%- else %}
        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}
    {%- endif %}
{%- endfor %}
"""
CHATML = """{% for message in messages %}
{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}
{%- endfor %}
{% if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' -}}
{% endif %}"""
PHI3 = """{% for message in messages %}
    {% if message['role'] == 'system' %}
        {{- '<|system|>\\n' + message['content'] + '<|end|>\\n' -}}
    {% elif message['role'] == 'user' %}
        {{- '<|user|>\\n' + message['content'] + '<|end|>\\n' -}}
    {% elif message['role'] == 'assistant' %}
        {{- '<|assistant|>\\n' + message['content'] + '<|end|>\\n' -}}
    {% endif %}
{% endfor %}
{% if add_generation_prompt %}
    {{- '<|assistant|>\\n' -}}
{% else %}
    {{- eos_token -}}
{% endif %}"""
ZEPHYR = """{% for message in messages %}
{% if message['role'] == 'user' %}
{{ '<|user|>\\n' + message['content'] + eos_token }}
{% elif message['role'] == 'system' %}
{{ '<|system|>\\n' + message['content'] + eos_token }}
{% elif message['role'] == 'assistant' %}
{{ '<|assistant|>\\n'  + message['content'] + eos_token }}
{% endif %}
{% if loop.last and add_generation_prompt %}
{{ '<|assistant|>' }}
{% endif %}
{% endfor %}"""
SMOLLM2 = """{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system
You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>
' }}{% endif %}{{'<|im_start|>' + message['role'] + '
' + message['content'] + '<|im_end|>' + '
'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant
' }}{% endif %}"""
for nm, src in [("llama2",LLAMA2),("mistral",MISTRAL),("chatml",CHATML),("phi3",PHI3),("zephyr",ZEPHYR),("smollm2",SMOLLM2)]:
    for mn, ms in [("single",U),("system",SU),("multi",MULTI),("alt",ALT),("bad",BAD)]:
        for gen in [True, False]:
            c("tmpl_%s_%s_%s"%(nm,mn,"gen" if gen else "nogen"), src, ms, gen=gen, family=nm)


# Random whitespace-control mixes: blocks, expressions and comments with
# every modifier, nested, between runs of spaces, tabs and newlines.
random.seed(7)
random.seed(7)
def mod(): return random.choice(["", "", "-", "+"])
def emod(): return random.choice(["", "", "-", "+"])
def text():
    return "".join(random.choice(["\n", " ", "  ", "\t", "a", "b\n", "\n  ", " \n"]) for _ in range(random.randint(0,4)))
def block(depth):
    out = []
    for _ in range(random.randint(1,4)):
        r = random.random()
        out.append(text())
        if r < 0.3 and depth < 3:
            kw = random.choice(["if true", "if false", "for i in [1,2]", "if true"])
            end = "endfor" if kw.startswith("for") else "endif"
            out.append("{%" + mod() + " " + kw + " " + emod() + "%}")
            out.append(block(depth+1))
            if end == "endif" and random.random() < 0.3:
                out.append("{%" + mod() + " else " + emod() + "%}")
                out.append(block(depth+1))
            out.append("{%" + mod() + " " + end + " " + emod() + "%}")
        elif r < 0.55:
            m = random.choice(["", "-"]); e = random.choice(["", "-"])
            out.append("{{" + m + " 'x' " + e + "}}")
        elif r < 0.7:
            out.append("{#" + random.choice(["","-"]) + " c " + random.choice(["","-"]) + "#}")
        elif r < 0.8:
            out.append("{%" + mod() + " set v = 1 " + emod() + "%}")
    out.append(text())
    return "".join(out)

for i in range(300):
    c("ws_random_%d" % i, block(0), [])


# Random expressions: operators, filters, tests, methods, subscripts and
# conditionals over mixed-type literals, compared value for value (or both
# failing). Filters that Jinja evaluates lazily (select, map, unique, ...)
# are left out: there Jinja returns generator objects.
random.seed(2)
atoms = ["0","1","2","-3","7","2.5","0.1","1e3","'a'","'Ab c'","''","'x,y'","none","true","false","[1,2,3]","[]","['b','a']","{'k': 1, 'j': 'v'}","{}","(1,'t')","messages","messages[0]","messages[0].role","nope","loop_x"]
binops = ["+","-","*","/","//","%","~","==","!=","<",">","<=",">=","and","or","in","not in","**"]
filters = ["length","upper","lower","trim","first","last","string","list","sort","join","join(',')","default('d')","default('d', true)","tojson","int","float","abs","sum","min","max","capitalize","title","dictsort","count","replace('a','z')","round","round(1)","indent(2)","wordcount","center(9)"]
tests = ["defined","undefined","none","string","number","integer","float","mapping","iterable","sequence","boolean","odd","even","divisibleby(2)","true","false","lower","upper","eq 1","in [1,'a']","callable"]
methods = [".strip()",".upper()",".lower()",".split()",".split(',')",".startswith('a')",".endswith('c')",".replace('a','q')",".title()",".lstrip('A')",".rstrip()",".find('b')",".count('a')",".items()",".keys()",".values()",".get('k')",".get('z', 5)","[0]","[-1]","[1:]","[::-1]","[0:2]",".role","['k']"]
def expr(d=0):
    r = random.random()
    if d > 3 or r < 0.25: return random.choice(atoms)
    if r < 0.45: return "(%s %s %s)" % (expr(d+1), random.choice(binops), expr(d+1))
    if r < 0.6: return "(%s | %s)" % (expr(d+1), random.choice(filters))
    if r < 0.7: return "(%s is %s%s)" % (expr(d+1), random.choice(["","not "]), random.choice(tests))
    if r < 0.8: return "(%s)%s" % (expr(d+1), random.choice(methods))
    if r < 0.88: return "(%s if %s else %s)" % (expr(d+1), expr(d+1), expr(d+1))
    if r < 0.94: return "(not %s)" % expr(d+1)
    return "[%s, %s]" % (expr(d+1), expr(d+1))
for i in range(500):
    c("expr_%d" % i, "{{ %s }}" % expr(), [{"role": "user", "content": "Hi"}])


# Random statement mixes: set (plain, namespace, block), for (filters,
# else, nested, loop variables, break, continue), if/elif/else and macro
# calls, checking Jinja's scoping rules. Loop filters here do not read state
# the loop body changes: Jinja evaluates them lazily, we up front.
random.seed(7)
vars_ = ["x", "y", "i", "m", "item"]
def stmt_val(d, inloop=False):
    r = random.random()
    if r < 0.3: return random.choice(["1", "2", "'s'", "[1,2]", "none", "true", "messages|length", "ns.a", "ns.b"] + (["loop.index", "loop.last", "loop.first", "loop.length", "loop.revindex0"] if LOOP[0] else []))
    if r < 0.6: return random.choice(vars_)
    if r < 0.8: return "%s ~ %s" % (stmt_val(d+1), stmt_val(d+1)) if d < 2 else "x"
    return "(%s if %s else %s)" % (stmt_val(d+1), stmt_val(d+1), stmt_val(d+1)) if d < 2 else "y"
LOOP = [0]
def stmt_block(d):
    out = []
    for _ in range(random.randint(1, 3)):
        r = random.random()
        if d > 3: r = random.random() * 0.4
        if r < 0.2: out.append("{{ %s }}" % stmt_val(0))
        elif r < 0.3: out.append("{%% set %s = %s %%}" % (random.choice(vars_), stmt_val(0)))
        elif r < 0.4: out.append("{%% set ns.%s = %s %%}" % (random.choice("ab"), stmt_val(0)))
        elif r < 0.55:
            it = random.choice(["[1,2,3]", "messages", "range(3)", "'ab'", "[]", "{'k': 1, 'j': 2}"])
            flt = random.choice(["", "", " if %s" % random.choice(["x", "y", "m", "item", "true", "messages|length", "x ~ y"])])
            tgt = random.choice(vars_)
            els = "{% else %}" + stmt_block(d+1) if random.random() < 0.2 else ""
            LOOP[0] += 1
            body = stmt_block(d+1)
            LOOP[0] -= 1
            out.append("{%% for %s in %s%s %%}%s%s{%% endfor %%}" % (tgt, it, flt, body, els))
        elif r < 0.7:
            out.append("{%% if %s %%}%s{%% elif %s %%}%s{%% else %%}%s{%% endif %%}" % (stmt_val(0), stmt_block(d+1), stmt_val(0), stmt_block(d+1), stmt_block(d+1)))
        elif r < 0.78:
            if LOOP[0]:
                out.append(random.choice(["{% if loop.index > 1 %}{% break %}{% endif %}", "{% if loop.first %}{% continue %}{% endif %}", "{% if x == 'X' %}{% continue %}{% endif %}"]))
        elif r < 0.85:
            out.append("{{ mac(%s) }}{{ mac(%s, b=%s) }}" % (stmt_val(0), stmt_val(0), stmt_val(0)))
        elif r < 0.9:
            out.append("{%% set z %%}%s{%% endset %%}[{{ z }}]" % stmt_block(d+1))
        else:
            out.append("<%s>" % random.choice(["a", "b"]))
    return "".join(out)
STMT_PRE = "{% set ns = namespace(a=0, b='') %}{% set x = 'X' %}{% macro mac(a, b='B') %}({{ a }}{{ b }}{{ x }}{{ caller is defined }}){% endmacro %}"
for i in range(300):
    c("stmt_%d" % i, STMT_PRE + stmt_block(0) + "|{{ x }}{{ y }}{{ i }}{{ ns.a }}{{ ns.b }}",
      [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}])


def raise_exception(msg):
    raise TemplateError(msg)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception

out = []
for c in cases:
    vars = dict(tools=None, documents=None, add_generation_prompt=c.get("gen", True), bos_token=c.get("bos", "<s>"), eos_token=c.get("eos", "</s>"))
    # a copy: Jinja's indent filter extends a list argument in place
    vars["messages"] = copy.deepcopy(c.get("messages", []))
    vars.update(c.get("vars", {}))
    try:
        res = {"out": env.from_string(c["src"]).render(**vars)}
    except TemplateError as e:
        res = {"err": str(e)}
    except (TypeError, ValueError, ArithmeticError, AttributeError, LookupError) as e:
        # Python-level failures of an expression (e.g. 'a' - 1).
        res = {"err": "%s: %s" % (type(e).__name__, e)}
    # Failures that come only from where the Go interpreter is deliberately
    # more forgiving (subscripts and attributes of undefined are undefined,
    # slicing a non-sequence is undefined, indent stringifies a list) are
    # marked: there it may succeed.
    err = res.get("err", "")
    if err and (re.search(r"'\w+' is undefined$", err) or "is not subscriptable" in err
            or "has no attribute 'splitlines'" in err):
        res["lenient"] = True
    c2 = dict(c)
    c2.update(res)
    out.append(c2)
with open("jinja_cases.json", "w") as f:
    # one case a line keeps the file small and its diffs readable
    f.write("[\n" + ",\n".join(json.dumps(c, ensure_ascii=False) for c in out) + "\n]\n")
print(len(out), "cases")

# Templates shipped inside GGUF files of the shared test data: only their
# hash and the reference outputs are stored here; the Go test reads the
# template from the file itself.
import hashlib
import os
import gguf

root = os.environ.get("MOONLM_TESTDATA", os.path.join("..", "..", "..", "..", "shared", "testdata"))
shipped = {}
for rel in ["vocab/ggml-vocab-phi-3.gguf"]:
    reader = gguf.GGUFReader(os.path.join(root, rel))
    field = reader.fields["tokenizer.chat_template"]
    src = bytes(field.parts[field.data[0]]).decode()
    entry = {"sha256": hashlib.sha256(src.encode()).hexdigest(), "cases": []}
    for mn, ms in [("single", U), ("system", SU), ("multi", MULTI), ("alt", ALT)]:
        for gen in [True, False]:
            vars = dict(tools=None, documents=None, add_generation_prompt=gen, bos_token="<s>", eos_token="<|endoftext|>", messages=ms)
            entry["cases"].append({"name": "%s_%s" % (mn, gen), "messages": ms, "gen": gen, "bos": "<s>", "eos": "<|endoftext|>",
                                   "out": env.from_string(src).render(**vars)})
    shipped[rel] = entry
with open("gguf_cases.json", "w") as f:
    json.dump(shipped, f, indent=1, ensure_ascii=False)
    f.write("\n")
print(len(shipped), "shipped templates")

# The shared Qwen3, Llama 3 and Gemma 3 templates on paths the shared
# expected.json does not reach: tools, tool calls and responses, reasoning
# content, enable_thinking, and role errors. "vars" go to the template as
# extra variables (messages there replace the plain ones).
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
TOOL_MSGS = [
    {"role": "system", "content": "Use tools."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "<think>\nNeed the tool.\n</think>\n\nChecking.",
     "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
                    {"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Lyon\"}"}}]},
    {"role": "tool", "content": "{\"temp\": 21}"},
    {"role": "tool", "content": "{\"temp\": 19}"},
    {"role": "assistant", "content": "It is 21 C.", "reasoning_content": "Read the result."},
    {"role": "user", "content": "<tool_response>x</tool_response>"},
]
shared_cases = {
    "qwen3.jinja": [
        ("tools", {"tools": TOOLS, "messages": TOOL_MSGS}, True),
        ("tools_no_system", {"tools": TOOLS, "messages": TOOL_MSGS[1:3]}, False),
        ("no_thinking", {"enable_thinking": False}, True),
        ("think_history", {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "<think>r1</think>b"},
                                        {"role": "user", "content": "c"}, {"role": "assistant", "content": "<think>\nr2\n</think>\n\nd"}]}, False),
    ],
    "gemma3.jinja": [
        ("bad_roles", {"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}, True),
        ("system_multi", {"messages": [{"role": "system", "content": "S "}, {"role": "user", "content": " u "},
                                       {"role": "assistant", "content": "m"}, {"role": "user", "content": "v"}]}, True),
    ],
    "llama3.jinja": [
        ("trimmed", {"messages": [{"role": "system", "content": "  S\n"}, {"role": "user", "content": "\tu "}]}, False),
    ],
    # Qwen3.5's published template (llama.cpp's models/templates/Qwen3.5-4B.jinja),
    # whose tool calls take their arguments as mappings only.
    "Qwen3.5-4B.jinja": [
        ("single", {"messages": U}, True),
        ("multi", {"messages": MULTI}, False),
        ("tools", {"tools": TOOLS, "messages": TOOL_MSGS[:2] + [dict(TOOL_MSGS[2], tool_calls=TOOL_MSGS[2]["tool_calls"][:1])] + TOOL_MSGS[3:4] + TOOL_MSGS[5:]}, True),
        ("no_thinking", {"enable_thinking": False}, True),
        ("think_history", {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "<think>r1</think>b"},
                                        {"role": "user", "content": "c"}, {"role": "assistant", "content": "<think>\nr2\n</think>\n\nd"}]}, False),
        ("system_image", {"messages": [{"role": "system", "content": [{"type": "image"}]}, {"role": "user", "content": "x"}]}, True),
    ],
}
for name, cs in shared_cases.items():
    rel = "templates/" + name
    src = open(os.path.join(root, rel)).read()
    entry = {"sha256": hashlib.sha256(src.encode()).hexdigest(), "cases": []}
    for cname, vars_, gen in cs:
        v = dict(tools=None, documents=None, add_generation_prompt=gen, bos_token="<s>", eos_token="</s>", messages=[{"role": "user", "content": "Hi"}])
        v.update(vars_)
        case = {"name": cname, "messages": [{"role": "user", "content": "Hi"}], "gen": gen, "vars": vars_}
        try:
            case["out"] = env.from_string(src).render(**v)
        except TemplateError as e:
            case["err"] = str(e)
        entry["cases"].append(case)
    shipped[rel] = entry
with open("gguf_cases.json", "w") as f:
    json.dump(shipped, f, indent=1, ensure_ascii=False)
    f.write("\n")
print(len(shipped), "shipped templates with extra cases")
