"""``rules/README.md``, generated: the rule format, then every built-in rule from its own declaration.

    python -m tfadvisor.advice.readme > rules/README.md
"""

from __future__ import annotations

from tfadvisor.advice.docs import _where
from tfadvisor.advice.rules import Rule


def _names_list(vocabulary: dict[str, str]) -> str:
    return "\n".join(f"- `{name}`: {what}" for name, what in vocabulary.items())


#: The head of ``rules/README.md``: the rule format (the rules' own pages follow, generated).
README_HEAD = """# tfadvisor rules

Each `*.toml` file here holds rules, one `[[rule]]` table each. tfadvisor evaluates them over
the metrics the analyses produce (`tfadvisor/analyses/README.md` lists every name) and prints
the findings, most severe first, then by what each is expected to recover (its impact times its
`recovers`).

The cost tree proposes, the rules explain (`tfadvisor/advice/explain.py`): the attribution splits the
run's wall time into parts (`attr_<part>_pct`); a rule names the part it explains (`explains =
"part.input.tfdata.cause"`: the part, then causes within it, more specific the deeper), and the
findings that explain one part are one finding: the most specific of the most severe leads, the others
are folded into it as `also`, each with its fix. `90_cost.toml` holds the `generic` explanation of
every part, which fires on a part of at least 10 % of the wall time and is dropped when a specific
rule explains it: a large cost is never silent. Conditions that make a verdict uncertain (a window that
is not steady state, a tf.data cache being written, a competing load) are caveats on the findings they
touch, never conditions of a rule. Files load in name order; the number prefix
only sets the order of `tfadvisor rules` and breaks ties between findings of equal impact.

`tfadvisor rules` lists the rules; `tfadvisor rules explain ID` prints one in full. Add your own
with `--rules DIR` (a directory of `.toml` files, or one file): a rule with a new id is added,
one with an existing id replaces it, and `[[rule]]` with just `id = "..."` and `enabled = false`
switches a rule off.

## A rule

```toml
[[rule]]
id = "input_bound"                    # lower-case letters, digits, _
title = "Training waits for input"
severity = "warning"                  # critical | warning | info
when = "input_pct >= 5"               # the condition (see below)
impact = "input_pct"                  # % of step/wall time at stake; orders findings (optional)
message = "{input_pct:.1f} % of step time waits for input"
evidence = ["input_pct", "tfdata_pipeline"]   # metrics attached to the finding
fix = '''
What to change, with a code example in a ```python fence.
'''
why = "Why it matters."
example = "What triggers it."
docs = [{ title = "tf.data performance", url = "https://www.tensorflow.org/guide/data_performance" }]
marks = ["input_wait"]                # what its findings mark in the trace (below)
scope = "run"                         # whose spans: run | none | host:<metric>
plots = ["steps", "tfdata"]           # the report's plots that show its evidence (below)
lanes = ["input wait", "tf.data workers"]  # the timeline lanes its findings light up (below)
explains = "part.input"               # the part of the wall time it explains (optional; above)
recovers = 1.0                        # share of the impact its fix recovers: orders findings (optional;
                                      # default 1, a generic rule's {GENERIC_RECOVERS}: its impact is a part's size)

[[rule.case]]                         # optional; the first case whose `when` holds
when = "input_pct >= 20"              # overrides severity, title, message, impact,
severity = "critical"                 # fix and evidence of the finding
```

Required: `id`, `title`, `severity`, `when`, `message`, `fix`. Unknown keys, unknown metric
names, unknown marks, plots or lanes and bad expressions are errors when the file is loaded, reported as
`file:line: ...`.

`marks` says what a finding of the rule marks in the trace (`tfadvisor export`, the HTML timeline):
{MARKS}

`explains` is `part.<part>` with `<part>` a part of the attribution (`collective`, `matrix`,
`data_movement`, `optimizer`, `gather_scatter`, `custom_call`, `elementwise`, `input`, `between_steps`,
`runtime`, `host_ops`, `python`, `idle`, `outside_steps`) or `{metric}` naming one
(`part.{op_top_category}.compute`), then any causes (`.tfdata.cause`); `generic = true` marks the
explanation of a part that holds when no other does.

`scope` says whose spans: `run` (every host's, the default), `none` (no profiled host's: a missing
host) or `host:<metric>` (the host that metric names, e.g. `host:straggler_host`).

`plots` names the plots of the HTML report and notebook view that show a finding's evidence (shown beside
the finding):
{PLOTS}

`lanes` names the lanes of the HTML report's timeline that a finding lights up:
{LANES}

The report layer reads these; it knows no rule id.

The `message` is a template (`{input_pct:.1f}`); the `fix` is shown as written (its code keeps
its braces), except that `{{metric}}` is replaced by that metric's value on the run, e.g.
`tfadvisor analyze RUN/{{straggler_host}}.xplane.pb` (`<metric>` when the value is unknown).

## Expressions

`when`, `impact` and the `{...}` fields of `message` use a small expression language
(`tfadvisor/advice/expr.py`; nothing is passed to Python's `eval`):

- numbers (`5`, `1.5e9`, `1_000`), strings (`'input'`), `true`, `false`, `none`, metric names;
- `+ - * / %`, comparisons `< <= > >= == !=` (chains like `5 <= x < 20`), `and`, `or`, `not`,
  parentheses, `x is none`, `x is not none`;
- functions `min(...)`, `max(...)`, `abs(x)`, `known(x)`; nothing else can be called, and there
  is no attribute access or indexing.

A metric the trace lacks is unknown (`None`). Arithmetic and comparisons with an unknown
value are unknown, `and`/`or`/`not` use three-valued logic, and a condition fires only when
it is definitely true, so a missing metric never makes a rule fire unless the rule asks with
`is none` or `not known(...)`. Division by zero is unknown too.

Message fields take a format spec after `:` (`{x:.1f}`, `{n:,}`, `{x:g}`) or `bytes`
(`{memory_peak_bytes:bytes}` prints `15.2 GiB`); unknown values print as `unknown`. A part of a
message in `[[` `]]` is left out whole when one of its fields is unknown: write a magnitude the
trace may lack that way (`[[; about {tfdata_cause_ms_per_step:.1f} ms per step to gain]]`), so a
message never says "unknown ms".
"""


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def render_readme(rules: list[Rule]) -> str:
    """``rules/README.md``: the rule format, then every built-in rule from its own declaration
    (``python -m tfadvisor.advice.readme > rules/README.md``)."""
    from tfadvisor.advice.engine import GENERIC_RECOVERS
    from tfadvisor.analyses.marks import LANES, MARKS, PLOTS

    head = README_HEAD.replace("{MARKS}", _names_list(MARKS)).replace("{PLOTS}", _names_list(PLOTS)) \
        .replace("{LANES}", _names_list(LANES)).replace("{GENERIC_RECOVERS}", f"{GENERIC_RECOVERS:g}")
    out = [head.rstrip("\n"), "", "## The rules", "",
           "Generated from the rule files by `python -m tfadvisor.advice.readme > rules/README.md`; "
           "`tfadvisor rules explain ID` prints one in full.", "",
           "| rule | severity | title | marks | plots | defined in |", "|---|---|---|---|---|---|"]
    for r in rules:
        marks = ", ".join(f"`{m}`" for m in r.marks) or "nothing"
        scope = "" if r.scope == "run" else f" (scope `{r.scope}`)"
        plots = ", ".join(f"`{p}`" for p in r.plots) or "none"
        out.append(f"| [`{r.id}`](#{r.id}) | {'/'.join(r.severities)} | {_cell(r.title)} | {marks}{scope} | "
                   f"{plots} | `{_where(r)}` |")
    for r in rules:
        out += ["", f"### {r.id}", "", f"**{_cell(r.title)}** ({'/'.join(r.severities)}; `{_where(r)}`)", "",
                "Fires when:", "", "```", r.when.source.strip(), "```"]
        if r.cases:
            out.append("")
        for j, c in enumerate(r.cases, 1):
            out.append(f"- case {j}: `{_cell(c.when.source)}`" + (f" -> {c.severity}" if c.severity else ""))
        if r.impact is not None:
            out += ["", f"Impact: `{_cell(r.impact.source)}`"]
        if r.recovers is not None:
            out += ["", f"Recovers: {r.recovers:g} of the impact"]
        if r.evidence:
            out += ["", "Evidence: " + ", ".join(f"`{e}`" for e in r.evidence)]
        if r.lanes:
            out += ["", "Timeline lanes: " + ", ".join(f"`{e}`" for e in r.lanes)]
        if r.why:
            out += ["", _cell(r.why)]
        if r.docs:
            out += ["", "Docs: " + ", ".join(f"[{_cell(d.title or d.url)}]({d.url})" for d in r.docs)]
    return "\n".join(out).rstrip("\n") + "\n"



__all__ = ["README_HEAD", "render_readme"]


if __name__ == "__main__":
    import sys

    from tfadvisor.advice.rules import load_rules

    sys.stdout.write(render_readme(load_rules()))
