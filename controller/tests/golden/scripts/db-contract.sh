contract() {
  while :; do
    rc=0
    nova-manage db online_data_migrations --max-count 1000 || rc=$?
    case "$rc" in
      0) return 0 ;;
      1) ;;
      *) echo "online_data_migrations failed with exit code $rc" >&2; return "$rc" ;;
    esac
  done
}
contract
base="${OS_DATABASE__CONNECTION%%\?*}"
query="${OS_DATABASE__CONNECTION#"$base"}"
export OS_DATABASE__CONNECTION="${base%/*}/nova_cell0$query"
contract
