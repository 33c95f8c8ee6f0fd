# A no-op agent for the lanes tests, run by the command executor as
#   sh lane_agent.sh RECORDS
# It appends one line when it starts and one when it ends, each in one write to a
# file opened with O_APPEND (so lines from many processes never interleave):
#   start <task id> <run id> <pid> <dispatcher pid> <ns>
#   end <task id> <run id> <pid> <dispatcher pid> <ns>
# <ns> is wall-clock nanoseconds (sh cannot read a monotonic clock): used only to
# order events, never to judge durations.
# RECORDS.together: the first two agents wait for each other (proof that two ran
# at once). RECORDS.slow.<task id>: that task's agent waits while the file exists.
records="$1"
echo "start $VIGIL_TASK_ID $VIGIL_RUN_ID $$ $PPID $(date +%s%N)" >> "$records"
if [ -e "$records.together" ]; then
    : > "$records.arrived.$VIGIL_TASK_ID"
    tries=0
    while [ "$(ls "$records".arrived.* | wc -l)" -lt 2 ] && [ "$tries" -lt 600 ]; do
        sleep 0.05
        tries=$((tries + 1))
    done
fi
while [ -e "$records.slow.$VIGIL_TASK_ID" ]; do
    sleep 0.05
done
echo "end $VIGIL_TASK_ID $VIGIL_RUN_ID $$ $PPID $(date +%s%N)" >> "$records"
