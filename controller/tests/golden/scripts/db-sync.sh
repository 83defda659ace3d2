nova-manage api_db sync
nova-manage cell_v2 map_cell0 --database_connection '{scheme}://{username}:{password}@{hostname}:{port}/nova_cell0?{query}'
cells="$(nova-manage cell_v2 list_cells)"
if ! printf '%s\n' "$cells" | awk -F'|' -v schema='nova' '
function trim(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
NF >= 6 {
  name = trim($2); db = trim($5)
  sub(/[?].*$/, "", db)
  n = split(db, part, "/")
  if (name == "cell1" || (n >= 4 && part[n] == schema)) found = 1
}
END { exit !found }'; then
  nova-manage cell_v2 create_cell --name cell1 --transport-url '{scheme}://{username}:{password}@{hostname}:{port}/{path}?{query}' --database_connection '{scheme}://{username}:{password}@{hostname}:{port}/nova?{query}'
fi
nova-manage db sync
cells="$(nova-manage cell_v2 list_cells)"
printf '%s\n' "$cells" | awk -F'|' '
function trim(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
NF >= 6 && trim($2) != "Name" { print trim($2) "=" trim($3) }' > /dev/termination-log
