"""Draw a causal graph exported as OpenTelemetry JSON spans to a PNG.

Usage: python scripts/render_trace.py TRACE_JSON OUT_PNG [TITLE]

TRACE_JSON is what `varve_runtime::trace::to_otel_json` emits (`varve trace
show TRACE_ID --otel FILE`, `temperature graph --otel FILE`):
{"resourceSpans": [{"scopeSpans": [{"spans": [...]}]}]}, one span per event,
with spanId / parentSpanId, a name like "FIRING smooth.0" or "APPEND cpu_raw.0"
and `varve.*` attributes (varve.event.kind, varve.event.id, varve.log,
varve.seq, varve.seq_last for a scan, varve.handler, varve.attempt). Spans may also carry OTLP `links`
(the temperature example adds one from each read (a READ/LATEST event, or one folded into an APPEND or DONE) to the APPEND of the
record it read).

Each span becomes a box labelled with its name and its log:seq / attempt; a
solid arrow runs from parent to child, a dashed one from a record's APPEND to
a read of it. Spans are laid out in layers by causal depth (the longest chain
of parents and links above them), in start-time order within a layer, so the
picture reads top-down in causal order. Needs matplotlib only (`make
plot-deps` installs it into .venv); Graphviz is not required.
"""

import json
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402

KIND_COLOURS = {
    "APPEND": "#cfe2ff",
    "TRIGGER": "#fff3cd",
    "FIRING": "#d1e7dd",
    "DONE": "#d1e7dd",
    "FAILED": "#f8d7da",
    "READ": "#e2e3e5",
    "LATEST": "#e2e3e5",
}


def spans_of(document):
    for resource in document.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            yield from scope.get("spans", [])


def attributes_of(span):
    out = {}
    for attribute in span.get("attributes", []):
        value = attribute.get("value", {})
        out[attribute.get("key", "")] = next(iter(value.values()), "") if isinstance(value, dict) else value
    return out


def attribute_text(span):
    # The name already says the kind and the handler (or log); the event id
    # is long and says little: show where the record is and the attempt.
    attributes = attributes_of(span)
    parts = []
    if attributes.get("varve.log"):
        where = f"{attributes['varve.log']}:{attributes.get('varve.seq', '?')}"
        if attributes.get("varve.seq_last"):
            where += f"..={attributes['varve.seq_last']}"
        parts.append(where)
    if str(attributes.get("varve.attempt", "1")) not in ("", "0", "1"):
        parts.append(f"attempt {attributes['varve.attempt']}")
    return "\n".join(parts)


def links_of(span, by_id):
    return [link["spanId"] for link in span.get("links", []) if link.get("spanId") in by_id]


def main(trace_json, out_png, title=None):
    with open(trace_json) as f:
        spans = list(spans_of(json.load(f)))
    if not spans:
        sys.exit(f"error: {trace_json} holds no spans; export a trace that exists (varve trace show TRACE_ID)")
    by_id = {span["spanId"]: span for span in spans}
    children = defaultdict(list)
    for span in spans:
        parent = span.get("parentSpanId") or ""
        if parent in by_id:
            children[parent].append(span["spanId"])

    # Depth: the longest chain of parents and links above a span (iterative,
    # since traces can be long chains; a cycle, which a causal graph cannot
    # have, would be cut rather than loop).
    causes = {span["spanId"]: [p for p in [span.get("parentSpanId") or ""] if p in by_id] + links_of(span, by_id)
              for span in spans}
    depth = {}
    for span in spans:
        stack = [(span["spanId"], False)]
        on_stack = set()
        while stack:
            node, expanded = stack.pop()
            if node in depth:
                continue
            if expanded:
                on_stack.discard(node)
                depth[node] = max((depth.get(c, 0) + 1 for c in causes[node] if c in depth), default=0)
                continue
            on_stack.add(node)
            stack.append((node, True))
            stack.extend((c, False) for c in causes[node] if c not in depth and c not in on_stack)

    def depth_of(span_id):
        return depth[span_id]

    layers = defaultdict(list)
    for span in spans:
        layers[depth_of(span["spanId"])].append(span)
    for layer in layers.values():
        layer.sort(key=lambda s: int(s.get("startTimeUnixNano", 0) or 0))

    width = max(len(layer) for layer in layers.values())
    fig_w = max(6.0, 1.7 * width)
    fig_h = max(3.0, 1.3 * len(layers))
    fig, ax = plt.subplots(figsize=(fig_w, fig_h))
    position = {}
    # Top layer in start-time order; below, each span under the mean x of its
    # causes (a barycentre ordering), which keeps most arrows short.
    for level in sorted(layers):
        layer = layers[level]
        if level > 0:
            def under_causes(span):
                xs = [position[c][0] for c in causes[span["spanId"]] if c in position]
                return (sum(xs) / len(xs) if xs else 0.0, int(span.get("startTimeUnixNano", 0) or 0))
            layer.sort(key=under_causes)
        for index, span in enumerate(layer):
            x = (index + 0.5) * width / len(layer)
            position[span["spanId"]] = (x, -level)
    for parent, kids in children.items():
        x0, y0 = position[parent]
        for kid in kids:
            x1, y1 = position[kid]
            ax.annotate("", xy=(x1, y1 + 0.25), xytext=(x0, y0 - 0.25),
                        arrowprops={"arrowstyle": "->", "color": "#555555", "lw": 0.8})
    for span in spans:
        for target in links_of(span, by_id):
            x0, y0 = position[target]
            x1, y1 = position[span["spanId"]]
            ax.annotate("", xy=(x1, y1 + 0.25), xytext=(x0, y0 - 0.25),
                        arrowprops={"arrowstyle": "->", "color": "#1f5fbf", "lw": 0.7, "linestyle": "--"})
    for span in spans:
        x, y = position[span["spanId"]]
        name = span.get("name", "?")
        kind = name.split()[0].upper()
        colour = KIND_COLOURS.get(kind, "#ffffff")
        ax.add_patch(FancyBboxPatch((x - 0.45, y - 0.25), 0.9, 0.5, boxstyle="round,pad=0.02",
                                    facecolor=colour, edgecolor="#333333", lw=0.6))
        label = name if not attribute_text(span) else f"{name}\n{attribute_text(span)}"
        ax.text(x, y, label, ha="center", va="center", fontsize=6)
    ax.set_xlim(-0.2, width + 0.2)
    ax.set_ylim(-len(layers) + 0.3, 0.7)
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(out_png, dpi=130)
    print(f"wrote {out_png} ({len(spans)} events)")


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    main(*sys.argv[1:])
