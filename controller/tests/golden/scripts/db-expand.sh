rc=0
nova-status upgrade check || rc=$?
if [ "$rc" -gt 1 ]; then
  echo "nova-status upgrade check failed with exit code $rc" >&2
  exit "$rc"
fi
nova-manage api_db sync
nova-manage db sync
