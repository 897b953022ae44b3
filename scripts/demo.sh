#!/usr/bin/env bash
# `make demo`: a walk through the Log on the embedded journal with the CLI —
# appends, batches, retention, a crash (SIGKILL) and the recovery after it,
# versioned structures (PEDaLS) and PART's durable map — then the temperature application on the runtime (examples/temperature)
# and its repair, a repair made while an application runs (varve run + varve repair run),
# three applications of versioned objects (examples/objects: vgit, ledger, table),
# typed records whose type changes (varve schema: automatic, a refused change, a migration), and
# a varve serve with two clients, a curl watch and a map read at an old version,
# and last a 3-node NATS JetStream cluster on loopback (`varve nats up`): two
# writers on a replicated log, and a handler on a replicated topic.
set -euo pipefail
VARVE=${1:-target/release/varve}
DATA=$(mktemp -d "${TMPDIR:-/tmp}/varve-demo.XXXXXX")
# The NATS servers of the last section, if it got that far, then the scratch data.
trap '[ -f "$DATA/nats/cluster.json" ] && "$VARVE" nats down --dir "$DATA/nats" >/dev/null 2>&1; rm -rf "$DATA"' EXIT
v() { echo "\$ varve $*"; "$VARVE" --data "$DATA" "$@"; }
step() { printf '\n== %s\n' "$*"; }

step "Logs: an unbounded one, one that keeps 3 and overwrites, one that keeps 2 and refuses"
v log create readings
v log create recent --keep 3 --on-full overwrite
v log create quota --keep 2 --on-full refuse

step "Appends: each prints its seq once it is durable (fsynced)"
v log append readings "21.5"
echo "21.7" | v log append readings -
v log get readings 1
v log latest readings

step "A batch across logs lands all or nothing"
v log batch readings=22.0 recent=22.0
echo "(a batch naming a log that does not exist is refused, and lands nothing)"
v log batch readings=99 missing=99 || true
v log latest readings

step "Retention: 'recent' keeps the last 3; seqs are never reused"
for t in 22.1 22.2 22.3 22.4; do "$VARVE" --data "$DATA" log append recent "$t" >/dev/null; done
v log scan recent
v log get recent 1 || true
echo "(and 'quota' refuses once full; reads go on)"
v log append quota a >/dev/null; v log append quota b >/dev/null
v log append quota c || true
v log scan quota
v --json log scan recent

step "A crash: a writer appending batches to two logs is killed with SIGKILL"
v log create left
v log create right
# The writer loop runs in its own process group, so SIGKILL hits whichever
# `varve` process is mid-append at that moment, not just the loop.
setsid bash -c 'i=0; while true; do i=$((i+1)); "$0" --data "$1" log batch "left=$i" "right=$i" >/dev/null; done' \
    "$VARVE" "$DATA" &
writer=$!
disown "$writer"
sleep 1.5
kill -9 -- "-$writer" 2>/dev/null || kill -9 "$writer"
sleep 0.2
echo "(killed; every batch wrote one record to each log, so both logs must end at the same seq)"
v log ls
v fsck

step "A torn write: the last frame of the journal loses its final bytes"
v log append readings "last before the torn write"
segment=$(ls "$DATA"/default/*.seg | tail -n 1)
truncate -s -5 "$segment"
v fsck || echo "(fsck exits 2: damage found)"
echo "(the next writer cuts the torn frame off, keeps a copy in quarantine/, and says so)"
v log append readings "after the crash"
v fsck
v log ls

step "Versioned structures on logs (PEDaLS): the paper's example, every version still readable"
v pds demo
echo "(a generated workload of the paper's format, run on the journal and checked version by version)"
"$VARVE" pds gen --ops 1000 --seed 42 > "$DATA/workload.txt"
head -n 4 "$DATA/workload.txt"
v --ns structures pds run "$DATA/workload.txt" --structure bst --extra 1 --verify
v --ns structures pds run "$DATA/workload.txt" --structure balanced --extra 5 --verify
echo "(a versioned sorted set from the CLI: each add or rm is a version, old ones stay readable)"
v --ns structures set add tags red green blue
v --ns structures set rm tags green
v --ns structures set has tags green --at 3
v --ns structures set diff tags 3 4

step "PART's durable map: batches on a log, incremental checkpoints, replay on open"
v --ns part part put inventory apple=3 apricot=5 pear=7
v --ns part part rm inventory pear
v --ns part part scan inventory --prefix ap
v --ns part part checkpoint inventory
v --ns part part put inventory cherry=11
echo "(every command opens the map again: it loads the checkpoint, then replays the one batch after it)"
v --ns part part info inventory

step "The temperature application (Canal §4.3.5, Figure 4.11) on the runtime: handlers on topics, a causal event log"
# examples/temperature: 4 devices publish CPU temperatures to cpu_raw.<i>, a
# reference sensor to env_raw; smooth -> cpu_smooth/env_smooth, train -> model,
# predict -> prediction (examples/temperature/app.toml, README.md there).
TEMPERATURE=${TEMPERATURE:-$(dirname "$VARVE")/temperature}
PYTHON=${PYTHON:-.venv/bin/python}
TDATA="$DATA/temperature"
t() { echo "\$ temperature $*"; "$TEMPERATURE" "$@"; }
# `v` with the temperature data directory.
tv() { echo "\$ varve $*"; "$VARVE" --data "$TDATA" "$@"; }
echo "(first a run killed with SIGKILL after 0.1 s, then the restart: it resumes, and re-runs what the kill cut short)"
"$TEMPERATURE" run --data "$TDATA" --days 3 --devices 4 --alerts-with "$VARVE" >/dev/null &
runner=$!
disown "$runner"
sleep 0.1
kill -9 "$runner" 2>/dev/null || true
while kill -0 "$runner" 2>/dev/null; do sleep 0.01; done
t run --data "$TDATA" --days 3 --devices 4 --alerts-with "$VARVE"
t check --data "$TDATA"
echo "(an external-command handler too: on each new model a shell script runs \`varve log append alerts …\`, which reaches the runtime through its socket with the FIRING as the cause)"
tv --ns temperature log scan alerts --to 2
mkdir -p target/demo
t graph --data "$TDATA" --out target/demo/temperature_trace.png --dot target/demo/temperature_trace.dot --python "$PYTHON"
echo "(the causal graph of the last prediction is in target/demo/temperature_trace.png: raw readings -> smooth -> predict, and the model's chain; Graphviz DOT in target/demo/temperature_trace.dot, OpenTelemetry JSON in target/demo/temperature_trace.json)"

step "Repair (Sans-Souci §7.2): what a corrected reading of device 1 would change, without changing anything"
# The plan follows the recorded reads and writes: smooth.1 on the corrected
# reading, predict and train on what that smoothed, and so on. smooth also
# reads its own last output (to skip work a re-run already did), so every
# later smoothed reading of device 1 counts as depending on the correction:
# a read is a dependency, whatever the handler does with it (docs/repair.md).
tv --ns temperature repair plan --record cpu_raw.1:100 --manifest examples/temperature/app.toml \
  --dot target/demo/repair_plan.dot > target/demo/repair_plan.txt
head -n 8 target/demo/repair_plan.txt
grep -A 12 '^logs that change' target/demo/repair_plan.txt
echo "(the whole plan is in target/demo/repair_plan.txt, its graph in target/demo/repair_plan.dot)"

step "Repair (Sans-Souci §7.4.1): a device reporting °F for a day and a reference-sensor outage, corrected after the fact"
# A second data directory, fed with two faults: device 1 reports °F during
# day 1, and the reference sensor is down for 6 hours from hour 30 (the
# gateway holds its last reading meanwhile). The true readings arrive later
# (the device's converted back, the station's logger read out);
# `temperature repair` corrects every raw reading that differs from them and
# replays smooth/train/predict with their reads pinned (varve_repair::execute
# with the app's Rust handlers). The external `alert` handler is not run
# here: an alert that was sent is not replayed.
RDATA="$DATA/temperature-repair"
t run --data "$RDATA" --days 3 --devices 4 --fahrenheit 1:1 --outage 30:6
t repair --data "$RDATA"
t check --data "$RDATA"
echo "(prediction 281, for 01:20 on day 1 with device 1 in °F: before the repair (still readable in _gen.prediction.1), after it, and the reference sensor's reading then)"
rv() { echo "\$ varve --data $RDATA --ns temperature $*"; "$VARVE" --data "$RDATA" --ns temperature "$@"; }
rv log get _gen.prediction.1 281
rv log get prediction 281
rv log get env_raw 305
echo "(the repair's own event in _events: what it replaced, what it corrected, where the old histories are; \`varve trace causes prediction 281\` lists it among the prediction's causes)"
echo "\$ varve --data $RDATA --ns temperature events tail --no-follow | tail -n 1"
"$VARVE" --data "$RDATA" --ns temperature events tail --no-follow | tail -n 1

step "Repair while the application runs: \`varve repair run\` while \`varve run\` serves, readings still arriving"
# A small application of shell handlers: predict multiplies each reading by
# model 1, read through the runtime's socket. The repair is made by the
# `varve run` process itself (it has the handlers), beside the application:
# it pauses it only for the swap, and holds appends meanwhile, none refused.
VARVE_ABS=$(cd "$(dirname "$VARVE")" && pwd)/$(basename "$VARVE")
ODATA="$DATA/online"
cat > "$DATA/online.toml" <<TOML
[runtime]
namespace = "plant"
concurrency = 1

[[log]]
name = "sens"

[[log]]
name = "model"

[[log]]
name = "pred"

[[handler]]
name = "predict"
log = "sens"
command = ["sh", "-c", "m=\$('$VARVE_ABS' log get model 1) && s=\$(cat) && '$VARVE_ABS' log append pred \"\$s*\$m\" >/dev/null"]
TOML
o() { echo "\$ varve --ns plant $*"; "$VARVE" --data "$ODATA" --ns plant "$@"; }
oq() { "$VARVE" --data "$ODATA" --ns plant "$@" >/dev/null; }
preds() { "$VARVE" --data "$ODATA" --ns plant log latest pred 2>/dev/null | sed -n "s/^latest: //p" | grep . || echo 0; }
"$VARVE" --data "$ODATA" run "$DATA/online.toml" > "$DATA/online.out" 2>&1 &
runner=$!
for _ in $(seq 500); do grep -q 'runtime started' "$DATA/online.out" 2>/dev/null && break; sleep 0.02; done
oq log append model 2
for r in 20 21 22; do oq log append sens "$r"; done
for _ in $(seq 500); do [ "$(preds)" -ge 3 ] && break; sleep 0.02; done
[ "$(preds)" -ge 3 ] || { echo "error: the predictions did not come; $DATA/online.out says:" >&2; cat "$DATA/online.out" >&2; exit 1; }
o log get pred 3
echo "(model 1 should have been 3, not 2; twenty more readings arrive while varve run repairs)"
(for r in $(seq 23 42); do oq log append sens "$r"; done) &
appender=$!
o repair run --record model:1 --value 3 --manifest "$DATA/online.toml"
wait "$appender"
for _ in $(seq 500); do [ "$(preds)" -ge 23 ] && break; sleep 0.02; done
[ "$(preds)" -ge 23 ] || { echo "error: not every reading was predicted; $DATA/online.out says:" >&2; cat "$DATA/online.out" >&2; exit 1; }
echo "(every prediction now uses model 3 — those of readings that arrived during the repair too — and the old ones are still readable)"
o log get pred 3
o log get pred 23
o log get _gen.pred.1 3
kill -TERM "$runner"
wait "$runner" || true

step "Versioned objects (UStore §4.1): vgit, a directory's versions; each file is an object, a commit names their versions"
# examples/objects: three binaries on varve-object, built with the workspace.
OBJECTS_BIN=${OBJECTS_BIN:-$(dirname "$VARVE")}
GDIR="$DATA/vgit-work"
g() { echo "\$ vgit $*"; "$OBJECTS_BIN/vgit" --store "$DATA/vgit" --dir "$GDIR" "$@"; }
gq() { "$OBJECTS_BIN/vgit" --store "$DATA/vgit" --dir "$GDIR" "$@" >/dev/null; }
gq init
printf 'one\ntwo\nthree\n' > "$GDIR/poem.txt"
gq commit -m "a poem"
gq branch dev
printf 'one\ntwo\nTHREE\n' > "$GDIR/poem.txt"
gq commit -m "louder ending"
gq checkout dev
printf 'ONE\ntwo\nthree\n' > "$GDIR/poem.txt"
gq commit -m "louder start"
gq checkout main
echo "(a poem committed on main, then its last line changed on main and its first on dev; merged line by line against the base commit's version)"
g merge dev
echo "(poem.txt now: $(paste -sd' ' "$GDIR/poem.txt"))"
g log
first=$("$OBJECTS_BIN/vgit" --store "$DATA/vgit" --dir "$GDIR" log | tail -n 1 | cut -d' ' -f1)
g checkout "$first" --to "$DATA/vgit-first"
echo "(only that commit and its files were read: poem.txt is $(paste -sd' ' "$DATA/vgit-first/poem.txt"))"

step "Versioned objects (UStore §4.4): a ledger whose blocks are versions of one key, so their ids are a hash chain"
l() { echo "\$ ledger $*"; "$OBJECTS_BIN/ledger" --store "$DATA/ledger" "$@"; }
l deposit alice 100
l transfer alice bob 30
l transfer bob carol 50 || true
l balance alice --at 1
l verify

step "Versioned objects (UStore §4.2): a branched table (Decibel), rows are objects and branches are refs"
tb() { echo "\$ table $*"; "$OBJECTS_BIN/table" --store "$DATA/table" "$@"; }
tbq() { "$OBJECTS_BIN/table" --store "$DATA/table" "$@" >/dev/null; }
tbq insert apple '{"qty":3,"price":1.2}'
tbq insert pear '{"qty":5}'
tbq branch dev
tbq update apple '{"qty":4}' --branch dev
tbq delete pear --branch dev
tbq update apple '{"price":1.5}'
echo "(apple and pear on main; on branch dev apple's qty changed and pear deleted; on main apple's price changed)"
tb diff main dev
tb scan --all
tb merge dev
tb scan

step "Versioned objects from the CLI: two branches of one key, a three-way map merge, history, verify"
v object put config svc '{"port":80,"tls":false}'
ids() { "$VARVE" --data "$DATA" --json object "$@" config svc | python3 -c 'import json,sys; print(" ".join(v["id"][:12] for v in json.load(sys.stdin)["versions"]))'; }
base=$(ids versions)
v object put config svc --base "$base" '{"port":8080,"tls":false}'
v object put config svc --base "$base" '{"port":80,"tls":true}'
v object heads config svc
v object merge config svc $(ids heads) --with map
merged=$(ids heads)
v object get config svc "$merged"; echo
echo "(a merge has two parents; history follows single parents and stops after a merge, so it starts from one side)"
v object previous config svc "$merged"
left=$("$VARVE" --data "$DATA" --json object previous config svc "$merged" | python3 -c 'import json,sys; print(json.load(sys.stdin)["versions"][0]["id"][:12])')
v object history config svc "$left" -m 4 --values
v object verify config svc

step "Typed records (retention models): old records read in a new version's shape, a refused change, a resumable migration"
cat > "$DATA/v1.json" <<'JSON'
{"fields": [{"number": 1, "name": "sensor", "type": "string"}, {"number": 2, "name": "celsius", "type": "i32"}]}
JSON
cat > "$DATA/v2.json" <<'JSON'
{"fields": [{"number": 1, "name": "sensor", "type": "string"}, {"number": 2, "name": "celsius", "type": "i64"},
            {"number": 3, "name": "site", "type": "string", "default": "roof"}]}
JSON
cat > "$DATA/bad.json" <<'JSON'
{"fields": [{"number": 1, "name": "sensor", "type": "string"}, {"number": 2, "name": "celsius", "type": "string"}]}
JSON
cat > "$DATA/manual.json" <<'JSON'
{"fields": [{"number": 4, "name": "sensor_id", "type": "string"}, {"number": 5, "name": "kelvin", "type": "f64"}],
 "model": "manual", "migration": "to_kelvin"}
JSON
echo "(in namespace 'typed': the 'readings' log of the first section is untyped, and a type does not take over one)"
v --ns typed schema register readings "$DATA/v1.json"
v --ns typed schema append readings '{"sensor": "s1", "celsius": 21}'
v --ns typed schema append readings '{"sensor": "s2", "celsius": -4}'
echo "(v2 widens celsius to i64 and adds a field with a default: automatic, nothing is rewritten)"
v --ns typed schema register readings "$DATA/v2.json"
v --ns typed log get readings 1
v --ns typed schema check readings "$DATA/bad.json" || echo "(refused, exit $?: nothing registered)"
echo "(v3 is manual: an external program migrates every record into generation 2; generation 1 stays)"
v --ns typed schema register readings "$DATA/manual.json"
v --ns typed schema upgrade readings --command "python3 -u -c 'import sys, json
for line in sys.stdin:
    r = json.loads(line)
    print(json.dumps({\"sensor_id\": r[\"sensor\"] + \"@\" + r[\"site\"], \"kelvin\": r[\"celsius\"] + 273.15}), flush=True)'"
v --ns typed log scan readings.gen2
v --ns typed log get readings 2
v --ns typed schema show readings

step "On the network: varve serve, two clients, a watch, a structure's old version read from another process"
SDATA="$DATA/served"
RUST_LOG=warn "$VARVE" --data "$SDATA" serve --listen 127.0.0.1:0 > "$DATA/serve.out" &
server=$!
for _ in $(seq 500); do grep -q listening "$DATA/serve.out" 2>/dev/null && break; sleep 0.02; done
URI=$(grep -o 'varve://[0-9.:]*' "$DATA/serve.out")
HTTP=${URI/varve:/http:}
cat "$DATA/serve.out"
s() { echo "\$ varve --store $URI $*"; "$VARVE" --store "$URI" "$@"; }
s log create sensor
echo "(a watch with curl -N: Server-Sent Events, the event id is the seq)"
curl -sN --max-time 3 "$HTTP/v1/namespaces/default/logs/sensor/watch?from=1" > "$DATA/watch.txt" &
watcher=$!
echo "(two clients append at once; the server serialises them: seqs are dense)"
clients=()
for client in a b; do
    (for i in 1 2 3; do "$VARVE" --store "$URI" log append sensor "$client$i" >/dev/null; done) &
    clients+=($!)
done
wait "${clients[@]}"
s log scan sensor
wait "$watcher" || true
echo "(what the watch received:)"
grep -E '^(id|data):' "$DATA/watch.txt" | paste - - | head -n 6
echo "(a versioned map, updated by two processes through the server; then read as it was at version 2)"
"$VARVE" --store "$URI" map put shared city=Lyon >/dev/null &
first=$!
"$VARVE" --store "$URI" map put shared river=Rhone >/dev/null &
second=$!
wait "$first" "$second"
s map put shared city=Paris
s map ls shared
s map ls shared --at 2
kill -TERM "$server"
wait "$server" || true

step "Distributed: a 3-node NATS JetStream cluster on loopback, every namespace replicated three times (R=3)"
echo "\$ varve nats up --nodes 3 --dir $DATA/nats"
NATS=$("$VARVE" nats up --nodes 3 --dir "$DATA/nats" | tail -n 1)
echo "$NATS"
NURI="$NATS?replicas=3"
# Each call is a separate process: a separate client of the cluster, as another host would be.
n() { echo "\$ varve --store nats://…?replicas=3 $*"; "$VARVE" --store "$NURI" "$@"; }
n --ns plant log create sensor
echo "(two writers append at once, straight to the cluster, no server of ours in between: the seqs stay dense)"
writers=()
for writer in a b; do
    (for i in 1 2 3; do "$VARVE" --store "$NURI" --ns plant log append sensor "$writer$i" >/dev/null; done) &
    writers+=($!)
done
wait "${writers[@]}"
n --ns plant log scan sensor
n --ns plant log batch sensor=c1 sensor=c2
echo "(a handler on a replicated topic: varve run hosts the runtime here, its namespace lives in the cluster)"
cat > "$DATA/plant.toml" <<'TOML'
[runtime]
namespace = "alarms"

[[topic]]
name = "readings"

[[handler]]
name = "print"
builtin = "echo"
topic = "readings"
TOML
RUN_DIR="$DATA/nats-host"
"$VARVE" --store "$NURI" --data "$RUN_DIR" run "$DATA/plant.toml" > "$DATA/run.out" &
runner=$!
for _ in $(seq 500); do grep -q 'runtime started' "$DATA/run.out" 2>/dev/null && break; sleep 0.02; done
for t in 71.5 72.0 90.3; do "$VARVE" --store "$NURI" --data "$RUN_DIR" --ns alarms log append readings "$t"; done
for _ in $(seq 500); do [ "$(grep -c '^readings:' "$DATA/run.out")" -ge 3 ] && break; sleep 0.02; done
kill -TERM "$runner"
wait "$runner" || true
echo "(what the handler printed, once per append:)"
grep '^readings:' "$DATA/run.out"
echo "\$ varve nats down --dir $DATA/nats"
"$VARVE" nats down --dir "$DATA/nats"

printf '\nDone. Everything above ran on the embedded journal in %s (then through a varve serve on it, and on a NATS cluster; all now removed).\n' "$DATA"
