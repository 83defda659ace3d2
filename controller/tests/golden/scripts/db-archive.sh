budget_end=$(( $(date +%s) + 3000 ))
before=""
if [ -n "${RETENTION_DAYS:-}" ]; then
  before="--before $(date -u -d "-${RETENTION_DAYS} days" +%Y-%m-%d) --task-log"
fi
while :; do
  rc=0
  nova-manage db archive_deleted_rows --all-cells --max_rows "$MAX_ROWS" $before || rc=$?
  if [ "$rc" -ne 1 ] || [ "$(date +%s)" -ge "$budget_end" ]; then
    break
  fi
  sleep "$SLEEP"
done
test "$rc" -le 1
