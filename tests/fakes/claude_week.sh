#!/bin/sh
# A fast fake `claude` for the simulated week (tests/reliability/week.py): POSIX sh,
# so a run costs a few milliseconds, printing the real stream-json shapes of
# tests/fakes/claude_fake.py. The outcome is drawn from VIGIL_RUN_ID, so a retry
# (a new run) draws again and a rerun of the week draws the same:
#
#   h = run id x 7919 mod 1000
#   h <  20   long: sleeps --long seconds (real), then succeeds (the week cancels some)
#   h < 100   overloaded (529 after the CLI's own retries): transient, retried
#   h < 160   crash mid-stream, no result line: transient, retried
#   h < 200   out of turns: failed, cost reported
#   h < 205   usage limit: rate_limit_event rejected, resets 30 simulated minutes later
#   else      success, cost reported
#
# Each run that ends by itself appends "<run id> <cost usd> <input tokens> <output
# tokens> <outcome> <simulated epoch ms>" to --ledger: what its result line reported
# (0 without one) and when, so the week can check the store's roll-ups against what
# the agent reported over any window.
#
# Usage: claude_week.sh --ledger FILE --clock FACTOR@ANCHOR_MS [--long S]
#        --print --verbose --output-format stream-json [--model M] ...
set -u
ledger=/dev/null
factor=1
anchor=0
long=0.5
while [ $# -gt 0 ]; do
    case "$1" in
        --ledger) ledger=$2; shift 2 ;;
        --clock) factor=${2%@*}; anchor=${2#*@}; shift 2 ;;
        --long) long=$2; shift 2 ;;
        *) break ;;
    esac
done
model=claude-opus-4-6
while [ $# -gt 0 ]; do
    [ "$1" = "--model" ] && [ $# -gt 1 ] && model=$2
    shift
done
cat >/dev/null  # the prompt

run=${VIGIL_RUN_ID:-0}
h=$(( run * 7919 % 1000 ))
# The first usage limit would be run 158's: run 3 draws one, so that a day on a
# loaded machine, which makes fewer runs, sees every outcome too.
[ "$run" = 3 ] && h=202
session="5e55${run}-0000-4000-8000-000000000000"
tokens_in=$(( 1000 + h ))
tokens_out=$(( 100 + h % 97 ))
cost=$(printf '0.%06d' $(( 1100 * (1 + h % 9) )))

init() {
    printf '{"type":"system","subtype":"init","session_id":"%s","model":"%s","tools":["Bash","Read","Edit"],"claude_code_version":"2.1.3","cwd":"/x"}\n' "$session" "$model"
}
assistant() {
    printf '{"type":"assistant","session_id":"%s","message":{"model":"%s","content":[{"type":"text","text":"%s"}],"usage":{"input_tokens":4,"output_tokens":10}}}\n' "$session" "$model" "$1"
}
# ledger OUTCOME [COST]
ledger() {
    at=$(( anchor + factor * ($(date +%s%3N) - anchor) ))
    printf '%s %s %d %d %s %d\n' "$run" "${2:-0}" "$tokens_in" "$tokens_out" "$1" "$at" >>"$ledger"
}
# result SUBTYPE IS_ERROR TEXT COST EXTRA
result() {
    printf '{"type":"result","subtype":"%s","is_error":%s,"duration_ms":6052,"duration_api_ms":5995,"num_turns":2,"result":"%s","stop_reason":null,"session_id":"%s","total_cost_usd":%s,"usage":{"input_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":%d},"modelUsage":{"%s":{"inputTokens":%d,"outputTokens":%d,"cacheReadInputTokens":0,"cacheCreationInputTokens":0,"costUSD":%s}},"permission_denials":[],"uuid":"7a4c"%s}\n' \
        "$1" "$2" "$3" "$session" "$4" "$tokens_in" "$tokens_out" "$model" "$tokens_in" "$tokens_out" "$4" "$5"
}

init
if [ "$h" -lt 20 ]; then
    assistant "A long one."
    sleep "$long"
    result success false "Done, slowly." "$cost" ',"terminal_reason":"completed"'
    ledger long "$cost"
    exit 0
elif [ "$h" -lt 100 ]; then
    printf '{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":600,"error_status":529,"error":"overloaded","session_id":"%s"}\n' "$session"
    tokens_in=0 tokens_out=0
    result success true 'API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}' 0 ',"api_error_status":529'
    ledger overloaded
    exit 1
elif [ "$h" -lt 160 ]; then
    assistant "Starting..."
    printf '{"type":"assistant","message":{"content":[{"type":"te'
    echo "Error: unexpected end of stream (ECONNRESET)" >&2
    tokens_in=0 tokens_out=0
    ledger crash
    exit 1
elif [ "$h" -lt 200 ]; then
    assistant "Working on it."
    result error_max_turns true "" "$cost" ',"errors":["Reached maximum number of turns (3)"],"terminal_reason":"max_turns"'
    ledger max_turns "$cost"
    exit 1
elif [ "$h" -lt 205 ]; then
    now_ms=$(date +%s%3N)
    resets=$(( (anchor + factor * (now_ms - anchor)) / 1000 + 1800 ))
    printf '{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":%d,"rateLimitType":"five_hour"}}\n' "$resets"
    tokens_in=0 tokens_out=0
    result success true "You've hit your session limit" 0 ',"api_error_status":429'
    ledger usage_limit
    exit 1
fi
assistant "Done: the inbox is triaged."
result success false "Done: the inbox is triaged." "$cost" ',"terminal_reason":"completed"'
ledger success "$cost"
exit 0
