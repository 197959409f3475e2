"""One self-contained HTML page per report (or two side by side): inline CSS, PNGs as data:
URIs, no script and no external address, so the page reads the same offline and archived.
Every string from a report goes through html.escape."""
import base64
import html
import json
import os
import subprocess
import tempfile

from text_format import clip, durations, percent, readable

STATUS_CLASS = {"pass": "pass", "warn": "warn", "fail": "fail", "incomplete": "incomplete"}
VERDICT_CLASS = {"PASS": "pass", "WARN": "warn", "FAIL": "fail", "INCOMPLETE": "incomplete"}

CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em; color: #222; max-width: 1800px; }
h1 { font-size: 1.3em; margin: 0 0 .3em; }
.verdict { font-size: 3em; font-weight: 800; padding: .1em .5em; border-radius: .2em;
  display: inline-block; color: #fff; background: #777; }
.verdict.pass { background: #2e7d32; } .verdict.warn { background: #ef6c00; }
.verdict.fail { background: #c62828; } .verdict.incomplete { background: #6a1b9a; }
.partial { background: #f3e5f5; border-left: 6px solid #6a1b9a; padding: .5em 1em; }
.missing { background: #fff3e0; border-left: 6px solid #ef6c00; padding: .5em 1em; }
table { border-collapse: collapse; margin: .5em 0; }
td, th { border: 1px solid #ccc; padding: .2em .5em; vertical-align: top; text-align: left; }
th { background: #f4f4f4; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.status { font-weight: 700; text-transform: uppercase; }
td.status.pass { color: #2e7d32; } td.status.warn { color: #ef6c00; }
td.status.fail { color: #c62828; } td.status.incomplete { color: #6a1b9a; }
td.status.other { color: #777; }
pre { background: #f7f7f7; padding: .7em; overflow-x: auto; font-size: 12px; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #ddd; }
.omitted { color: #777; font-style: italic; margin: .2em 0; }
.timeline { display: flex; height: 1.6em; width: 100%; border: 1px solid #999; }
.timeline div { overflow: hidden; white-space: nowrap; font-size: 11px; color: #fff;
  padding-left: 2px; }
.productive { background: #31a354; } .lost { background: #e6550d; }
.lost:nth-child(even) { background: #fd8d3c; }
.columns { display: grid; grid-template-columns: 1fr 1fr; gap: 1.5em; }
.columns > div { min-width: 0; }
details { margin: .4em 0; } summary { cursor: pointer; font-weight: 600; }
"""


def esc(value):
    return html.escape("" if value is None else str(value), quote=True)


def cell(value):
    """A report value as table text: numbers readable, objects as JSON, null as n/a."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return readable(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def table(headers, rows, numeric=()):
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = []
        for k, value in enumerate(row):
            css = ' class="num"' if k in numeric else ""
            cells.append(f"<td{css}>{esc(cell(value))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def run_trainproof(binary, arguments):
    """{'text', 'code', 'note'} of `BIN ARGUMENTS`; note says why there is no text."""
    if not binary:
        return {"text": None, "code": None,
                "note": "not included: no --trainproof binary was given (`trainproof "
                        + " ".join(arguments) + "` prints it)"}
    try:
        proc = subprocess.run([binary, *arguments], capture_output=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as error:
        return {"text": None, "code": None, "note": f"`{binary}` could not be run: {error}"}
    text = (proc.stdout + proc.stderr).decode("utf-8", "replace")
    return {"text": text, "code": proc.returncode, "note": None}


def verdict_block(run):
    verdict = str(run.report.get("verdict", "?"))
    context = run.context
    times = " to ".join(esc(t) for t in (context.get("start_time"), context.get("end_time")) if t)
    return (f'<div class="verdict {VERDICT_CLASS.get(verdict, "other")}">{esc(verdict)}</div>'
            f"<p>report <code>{esc(run.path)}</code>, run "
            f"<code>{esc(context.get('run_id', '?'))}</code>{', ' + times if times else ''}</p>")


def partial_block(run):
    """A line at the top of a report cut short: which selected stages have no section."""
    accept = run.section("accept") or {}
    lacking, partial = run.lacking_stages(), accept.get("partial")
    incomplete, verdict = accept.get("incomplete"), run.report.get("verdict")
    if not (lacking or partial or incomplete is not None or verdict == "INCOMPLETE"):
        return ""
    parts = []
    if lacking:
        parts.append(f"this report lacks stage(s) {', '.join(lacking)}: selected in accept.stages "
                     "but without their section")
    elif run.selected_stages():
        parts.append("every selected stage has its section")
    if isinstance(partial, dict):
        parts.append(f"a partial report, written as stage {partial.get('running', '?')} started "
                     f"({partial.get('written_at', '?')})")
    if incomplete is not None:
        parts.append(f"incomplete: {cell(incomplete)}")
    if not parts:
        parts.append("verdict INCOMPLETE")
    return '<p class="partial"><b>Partial report:</b> ' + esc("; ".join(parts)) + "</p>"


# The checks that judge correctness count what differed, against a threshold of 0: the page
# shows them as the outcome of what was compared, not as "0" against "0".
COMPARED = {
    "replica_digest": ("ranks differ", "every rank's state digest against the others'"),
    "collective_correctness": ("results wrong", "allreduce results against the known values"),
    "sweep_correctness": ("elements wrong", "every element of every row against its known value"),
    "pairwise_correctness": ("elements wrong", "every element each pair sent against what arrived"),
    "restore_digest": ("ranks differ", "each rank's restored state against the state it saved"),
    "folder_probe": ("probes failed", "a file written, synced, read back and deleted per folder"),
}


def measured_cells(check):
    """(value, threshold) as the checks table shows them."""
    value, threshold = check.get("value"), check.get("threshold")
    compared = COMPARED.get(check.get("name"))
    if compared is None or threshold != 0 or isinstance(value, (bool, float, str, dict, list)):
        return cell(value), cell(threshold)
    what_differs, what = compared
    if value is None:
        outcome = "not compared"
    else:
        outcome = "pass: exact" if value == 0 else f"fail: {value} {what_differs}"
    return outcome, f"compared {what}"


def checks_block(run):
    checks = [c for c in (run.section("gate") or {}).get("checks") or [] if isinstance(c, dict)]
    if not checks:
        return "<p>The report has no gate checks.</p>"
    rows = []
    for c in checks:
        status = str(c.get("status", "?"))
        css = STATUS_CLASS.get(status, "other")
        value, threshold = measured_cells(c)
        rows.append(
            f'<tr><td>{esc(c.get("name"))}</td><td class="status {css}">{esc(status)}</td>'
            f'<td class="num">{esc(value)}</td>'
            f'<td class="num">{esc(threshold)}</td>'
            f'<td>{esc(c.get("stage", ""))}</td><td>{esc(c.get("source", ""))}</td>'
            f'<td>{esc(c.get("reason", ""))}</td></tr>')
    head = "".join(f"<th>{h}</th>" for h in ("check", "status", "value", "threshold", "stage",
                                              "source", "reason"))
    return f"<h2>Checks</h2><table><tr>{head}</tr>{''.join(rows)}</table>"


def job_block(run):
    job = run.section("job")
    if not job:
        return "<h2>Job timeline and goodput</h2><p>The report has no job section.</p>"
    wall = job.get("wall_s") or 0
    categories = [c for c in job.get("categories") or [] if isinstance(c, dict)]
    bar = []
    for c in categories:
        share = (c.get("seconds") or 0) / wall if wall else 0
        if share <= 0:
            continue
        css = "productive" if c.get("name") == "productive" else "lost"
        label = f"{c.get('name')}: {readable(c.get('seconds'))} s ({percent(share)})"
        bar.append(f'<div class="{css}" style="width:{100 * share:.3f}%" title="{esc(label)}">'
                   f"{esc(c.get('name')) if share > 0.06 else ''}</div>")
    queue = job.get("queue_s")
    queue = f"{readable(queue)} s" if queue is not None else job.get("queue_note")
    summary = (f"<p>wall {esc(readable(wall))} s (mean over ranks; the slowest rank "
               f"{esc(readable(job.get('wall_max_s')))} s); goodput: training stage "
               f"<b>{esc(readable(job.get('train_goodput')))}</b>, whole job "
               f"{esc(readable(job.get('goodput')))} (the job's counts the other stages as lost "
               f"time); queue: {esc(queue)}</p>")
    times = durations([c.get("seconds") for c in categories])  # one unit for the column
    rows = [(c.get("name"), time, percent(c.get("fraction")))
            for c, time in zip(categories, times)]
    return ("<h2>Job timeline and goodput</h2>" + summary
            + f'<div class="timeline">{"".join(bar)}</div>'
            + "<p>Every category in timeline order (mean over ranks):</p>"
            + table(["category", "time", "share of wall"], rows, numeric=(1, 2)))


def summary_block(summary, heading="Text summary (trainproof report)"):
    if summary["text"] is None:
        return f'<h2>{esc(heading)}</h2><p class="missing">{esc(summary["note"])}</p>'
    code = summary["code"]
    note = "" if code in (0, 1) else f'<p class="missing">exit code {esc(code)}</p>'
    return f"<h2>{esc(heading)}</h2>{note}<pre>{esc(summary['text'])}</pre>"


def plots_block(run, plots, why_none, heading="Plots"):
    if plots is None:
        return f'<h2>{esc(heading)}</h2><p class="missing">{esc(why_none)}</p>'
    parts = [f"<h2>{esc(heading)}</h2>"]
    for note in run.traces.notes if run.traces else []:
        parts.append(f'<p class="omitted">note: {esc(note)}</p>')
    for name, png, why in plots:
        if png is None:
            parts.append(f'<p class="omitted">omitted: {esc(name)}: {esc(why)}</p>')
            continue
        data = base64.b64encode(png).decode("ascii")
        parts.append(f'<figure><img alt="{esc(name)}" src="data:image/png;base64,{data}">'
                     f"<figcaption>{esc(name)}</figcaption></figure>")
    return "".join(parts)


def folded(summary, body, open_=False):
    return f"<details{' open' if open_ else ''}><summary>{esc(summary)}</summary>{body}</details>"


def context_block(run):
    context = run.context
    hosts = run.hosts()
    per_host = context.get("ranks_per_host") or {}
    parts = ["<h2>Context</h2>"]
    warnings = context.get("warnings") or []
    parts.append(folded(f"Warnings ({len(warnings)})",
                        "<ul>" + "".join(f"<li>{esc(w)}</li>" for w in warnings) + "</ul>",
                        open_=bool(warnings)))
    parts.append(folded(f"Hosts ({len(hosts)})", "<p>" + esc(", ".join(
        f"{h} ({per_host[h]} ranks)" if h in per_host else h for h in hosts)) + "</p>"))
    versions = dict(context.get("versions") or {})
    for key in ("tool", "build", "backends", "nccl", "checkpoint_filesystem"):
        if key in context:
            versions[key] = context[key]
    parts.append(folded("Versions, build and backends", table(
        ["what", "value"], sorted(versions.items()))))
    parts.append(folded(f"Topology: nodes ({len(context.get('nodes') or [])})",
                        _nodes_table(context.get("nodes") or [])))
    for key, name in (("environment", "Environment"), ("options", "Options")):
        values = context.get(key) or {}
        parts.append(folded(f"{name} ({len(values)})", table(["name", "value"],
                                                             sorted(values.items()))))
    line = " ".join(map(str, context.get("command_line") or []))
    parts.append(folded("Command line", f"<pre>{esc(line)}</pre>"))
    return "".join(parts)


def _nodes_table(nodes):
    rows = []
    for node in nodes:
        if not isinstance(node, dict):
            continue
        cpu = node.get("cpu") or {}
        nics = ", ".join(str(n.get("name")) for n in node.get("nics") or [] if isinstance(n, dict))
        memory = node.get("memory_bytes")
        rows.append((node.get("host"), clip(str(cpu.get("model", "")).strip(), 40),
                     cpu.get("cores"), readable(memory / 2 ** 30) + " GiB" if isinstance(
                         memory, (int, float)) else None, nics,
                     len(node.get("ib_ports") or []), len(node.get("gpus") or []),
                     (node.get("versions") or {}).get("nccl")))
    return table(["host", "CPU", "cores", "memory", "NICs", "IB ports", "GPUs", "NCCL"], rows,
                 numeric=(2, 3, 5, 6))


def scenario_block(run):
    text = run.context.get("scenario_text")
    if not text:
        return "<h2>Scenario</h2><p>The report holds no scenario text.</p>"
    return (f"<h2>Scenario {esc(run.context.get('scenario_file', ''))}</h2>"
            f"<pre>{esc(text)}</pre>")


def document(title_text, body):
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{esc(title_text)}</title><style>{CSS}</style></head>"
            f"<body>{body}</body></html>\n")


def single_page(run, summary, plots, why_none):
    title_text = f"{run.report.get('verdict', '?')}: {run.what_ran()}"
    body = [f"<h1>{esc(run.what_ran())}</h1>", verdict_block(run), partial_block(run),
            checks_block(run), job_block(run), summary_block(summary),
            plots_block(run, plots, why_none), context_block(run), scenario_block(run)]
    return document(title_text, "".join(body))


def compare_page(columns, compare):
    (first, _, _), (second, _, _) = columns
    title_text = f"compare {os.path.basename(first.path)} with {os.path.basename(second.path)}"
    code = compare["code"]
    body = [f"<h1>{esc(title_text)}</h1>",
            summary_block(compare, "trainproof report compare"
                          + (f" (exit code {code})" if code is not None else "")),
            '<div class="columns">']
    for run, plots, why in columns:
        body.append(f"<div><h2>{esc(run.what_ran())}</h2>" + verdict_block(run)
                    + partial_block(run) + checks_block(run) + plots_block(run, plots, why)
                    + "</div>")
    body.append("</div>")
    return document(title_text, "".join(body))


def write_page(path, text):
    """Written whole or not at all: a reader never sees half a page."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".viz-", suffix=".html")
    with os.fdopen(handle, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(temporary, 0o644)
    os.replace(temporary, path)
