//! The scripts of the migration Jobs, the three upgrade phases and the archive CronJob
//! (`nova-reconciler.txt`, "The cells sequence", "Release upgrade", "DBArchive"). Each runs
//! under `/bin/sh -eu -c`. None carries a credential: nova-manage takes the connections from
//! the environment overrides, and the URLs the cell mapping stores are templates nova expands
//! from those same connections, so no password is ever assembled here.
//!
//! The only value interpolated is a schema name, into a single-quoted shell word; the
//! provisioning guard (`^[A-Za-z0-9_]{1,64}$`) is what keeps a quote out of it.

use nova_api::names::{CELL0, CELL1, NovaNames};

/// The shell every script runs under: `-e` stops at the first failed command, `-u` at an
/// unset variable.
pub const SHELL: [&str; 3] = ["/bin/sh", "-eu", "-c"];

/// The awk function both table readers use: a field without its padding.
const TRIM: &str = r#"function trim(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }"#;

/// A database connection template for `schema`: nova fills every other part from the
/// `[database] connection` the process runs with.
fn connection_template(schema: &str) -> String {
    format!("{{scheme}}://{{username}}:{{password}}@{{hostname}}:{{port}}/{schema}?{{query}}")
}

/// The transport URL template: every part from `[DEFAULT] transport_url`.
const TRANSPORT_TEMPLATE: &str =
    "{scheme}://{username}:{password}@{hostname}:{port}/{path}?{query}";

/// The steady-state `{name}-db-sync` script for the cell schema `cell_schema`: the eight
/// commands of "The cells sequence", the final listing written to `/dev/termination-log`.
///
/// The guard reads whole fields of `list_cells` (`|`-separated): a row whose name is `cell1`,
/// or whose database connection names the cell schema on its URL path (the query stripped),
/// is the cell already mapped. Matching words of the table instead would be fooled by a user,
/// a host or a vhost containing `cell1`.
pub fn db_sync(cell_schema: &str) -> String {
    let cell0 = NovaNames::cell0_schema(cell_schema);
    let cell0_connection = connection_template(&cell0);
    let cell_connection = connection_template(cell_schema);
    format!(
        r#"nova-manage api_db sync
nova-manage cell_v2 map_cell0 --database_connection '{cell0_connection}'
cells="$(nova-manage cell_v2 list_cells)"
if ! printf '%s\n' "$cells" | awk -F'|' -v schema='{cell_schema}' '
{TRIM}
NF >= 6 {{
  name = trim($2); db = trim($5)
  sub(/[?].*$/, "", db)
  n = split(db, part, "/")
  if (name == "{CELL1}" || (n >= 4 && part[n] == schema)) found = 1
}}
END {{ exit !found }}'; then
  nova-manage cell_v2 create_cell --name {CELL1} --transport-url '{TRANSPORT_TEMPLATE}' --database_connection '{cell_connection}'
fi
nova-manage db sync
cells="$(nova-manage cell_v2 list_cells)"
printf '%s\n' "$cells" | awk -F'|' '
{TRIM}
NF >= 6 && trim($2) != "Name" {{ print trim($2) "=" trim($3) }}' > /dev/termination-log
"#
    )
}

/// The expand phase: the upgrade check, then both additive migrations. `nova-status upgrade
/// check` answers with a severity: 0 passed, 1 passed with warnings, 2 and above failed.
pub fn db_expand() -> String {
    r#"rc=0
nova-status upgrade check || rc=$?
if [ "$rc" -gt 1 ]; then
  echo "nova-status upgrade check failed with exit code $rc" >&2
  exit "$rc"
fi
nova-manage api_db sync
nova-manage db sync
"#
    .to_owned()
}

/// The migrate phase: nova has no migrate verb, so the phase is a read proving the new code
/// addresses the nova_api schema the expand phase migrated.
pub fn db_migrate() -> String {
    "nova-manage cell_v2 list_cells\n".to_owned()
}

/// The contract phase: `online_data_migrations` in batches of 1000 until it reports nothing
/// left (0), for the cell schema and then again for cell0, whose connection is the cell
/// connection with the schema on the URL path swapped (inside the pod, from the environment).
/// The exit code is a severity: 1 means a batch migrated rows and more may remain, anything
/// above it an error.
pub fn db_contract(cell_schema: &str) -> String {
    let cell0 = NovaNames::cell0_schema(cell_schema);
    format!(
        r#"contract() {{
  while :; do
    rc=0
    nova-manage db online_data_migrations --max-count 1000 || rc=$?
    case "$rc" in
      0) return 0 ;;
      1) ;;
      *) echo "online_data_migrations failed with exit code $rc" >&2; return "$rc" ;;
    esac
  done
}}
contract
base="${{OS_DATABASE__CONNECTION%%\?*}}"
query="${{OS_DATABASE__CONNECTION#"$base"}}"
export OS_DATABASE__CONNECTION="${{base%/*}}/{cell0}$query"
contract
"#
    )
}

/// The archive run: batches of `archive_deleted_rows` until one archives nothing (0), one
/// fails (above 1), or the 3000-second budget is spent, ten minutes inside the Job's active
/// deadline so a batch in flight is never killed. `--before` and `--task-log` travel together
/// and only with a retention window; `$before` is unquoted on purpose, so an unset window
/// adds no argument at all. Never `--purge` (it would empty the shadow tables) nor
/// `--until-complete` (it would outlast the deadline on a neglected database).
pub fn db_archive() -> String {
    format!(
        r#"budget_end=$(( $(date +%s) + {ARCHIVE_BUDGET_SECONDS} ))
before=""
if [ -n "${{RETENTION_DAYS:-}}" ]; then
  before="--before $(date -u -d "-${{RETENTION_DAYS}} days" +%Y-%m-%d) --task-log"
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
"#
    )
}

/// Seconds an archive run keeps starting batches.
pub const ARCHIVE_BUDGET_SECONDS: i64 = 3000;

/// The cells a db-sync report names, cell0 first: every line matching
/// `^([A-Za-z0-9_-]+)=([0-9a-f-]{36})$`, stray output dropped. None when no line matches.
pub fn parse_cells(report: &str) -> Option<Vec<(String, String)>> {
    let mut cells: Vec<(String, String)> = report
        .lines()
        .filter_map(|line| {
            let (name, uuid) = line.split_once('=')?;
            let name_ok = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            let uuid_ok = uuid.len() == 36
                && uuid
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b) || b == b'-');
            (name_ok && uuid_ok).then(|| (name.to_owned(), uuid.to_owned()))
        })
        .collect();
    if cells.is_empty() {
        return None;
    }
    cells.sort_by_key(|(name, _)| name != CELL0);
    Some(cells)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::process::Command;

    /// A stand-in for `nova-manage` and `nova-status` on PATH: it logs each call (and the
    /// cell connection it saw), prints the cell table from `cells.txt` (failing when
    /// `list-fails` exists), appends a row on `create_cell`, and otherwise exits with the
    /// next code of `rcs` (0 once they run out).
    const FAKE: &str = r#"#!/bin/sh
echo "$(basename "$0") $*" >> "$WORK/calls"
echo "${OS_DATABASE__CONNECTION:-}" >> "$WORK/connections"
case "$*" in
  "cell_v2 list_cells")
    [ -e "$WORK/list-fails" ] && exit 1
    echo "+-------+--------------------------------------+---------------+-------------------+----------+"
    echo "|  Name |                 UUID                 | Transport URL | Database Connection | Disabled |"
    echo "+-------+--------------------------------------+---------------+-------------------+----------+"
    cat "$WORK/cells.txt"
    echo "+-------+--------------------------------------+---------------+-------------------+----------+"
    exit 0
    ;;
  "cell_v2 create_cell"*)
    echo "| cell1 | 11111111-2222-3333-4444-555555555555 | rabbit://nova:****@rabbit:5672/ | mysql+pymysql://nova:****@db:3306/nova?charset=utf8 | False |" >> "$WORK/cells.txt"
    ;;
esac
rc=0
if [ -s "$WORK/rcs" ]; then
  rc=$(head -n 1 "$WORK/rcs")
  sed -i 1d "$WORK/rcs"
fi
exit "$rc"
"#;

    const CELL0_ROW: &str = "| cell0 | 00000000-0000-0000-0000-000000000000 | none:/ | mysql+pymysql://nova:****@db:3306/nova_cell0?charset=utf8 | False |\n";

    /// What one run of a script did.
    struct Ran {
        ok: bool,
        calls: String,
        connections: String,
        report: String,
    }

    /// Runs `script` with the fakes, the cell table `cells`, the exit codes `rcs` and `env`.
    fn run(script: &str, cells: &str, rcs: &[i32], list_fails: bool, env: &[(&str, &str)]) -> Ran {
        let work = tempfile::tempdir().expect("tempdir");
        let dir = work.path();
        for tool in ["nova-manage", "nova-status"] {
            let fake = dir.join(tool);
            std::fs::write(&fake, FAKE).expect("fake");
            std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .expect("chmod");
        }
        std::fs::write(dir.join("cells.txt"), cells).expect("cells");
        let codes: String = rcs.iter().map(|rc| format!("{rc}\n")).collect();
        std::fs::write(dir.join("rcs"), codes).expect("rcs");
        if list_fails {
            std::fs::write(dir.join("list-fails"), "").expect("flag");
        }
        let report = dir.join("report");
        let script = script.replace("/dev/termination-log", &report.display().to_string());
        let path = format!(
            "{}:{}",
            dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let status = Command::new(SHELL[0])
            .args(&SHELL[1..])
            .arg(script)
            .env("PATH", path)
            .env("WORK", dir)
            .envs(env.iter().copied())
            .status()
            .expect("sh runs");
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        Ran {
            ok: status.success(),
            calls: read(&dir.join("calls")),
            connections: read(&dir.join("connections")),
            report: read(&report),
        }
    }

    fn sync(cells: &str, list_fails: bool) -> (bool, String, String) {
        let ran = run(&db_sync("nova"), cells, &[], list_fails, &[]);
        (ran.ok, ran.calls, ran.report)
    }

    #[test]
    fn db_sync_maps_cell1_once_and_reports_every_cell() {
        let (ok, calls, report) = sync(CELL0_ROW, false);
        assert!(ok);
        let verbs: Vec<&str> = calls
            .lines()
            .map(|l| l.split(" --").next().unwrap_or(l))
            .collect();
        assert_eq!(
            verbs,
            [
                "nova-manage api_db sync",
                "nova-manage cell_v2 map_cell0",
                "nova-manage cell_v2 list_cells",
                "nova-manage cell_v2 create_cell",
                "nova-manage db sync",
                "nova-manage cell_v2 list_cells"
            ]
        );
        assert!(calls.contains("--name cell1 --transport-url {scheme}://{username}:{password}@{hostname}:{port}/{path}?{query} --database_connection {scheme}://{username}:{password}@{hostname}:{port}/nova?{query}"), "{calls}");
        assert_eq!(
            report,
            "cell0=00000000-0000-0000-0000-000000000000\ncell1=11111111-2222-3333-4444-555555555555\n"
        );
    }

    #[test]
    fn the_guard_reads_whole_fields() {
        let row = |name: &str, transport: &str, db: &str| {
            format!(
                "| {name} | 22222222-2222-2222-2222-222222222222 | {transport} | {db} | False |\n"
            )
        };
        let cases = [
            (
                "cell1 already mapped",
                row(
                    "cell1",
                    "rabbit://n:****@r:5672/",
                    "mysql+pymysql://n:****@db:3306/nova?charset=utf8",
                ),
                false,
            ),
            (
                "brownfield cell under another name",
                row(
                    "legacy",
                    "rabbit://n:****@r:5672/",
                    "mysql+pymysql://n:****@db:3306/nova?charset=utf8",
                ),
                false,
            ),
            (
                "cell1 in user, host and vhost",
                row(
                    "other",
                    "rabbit://cell1:****@cell1.example:5672/cell1",
                    "mysql+pymysql://cell1:****@cell1-db:3306/other_schema?x=cell1",
                ),
                true,
            ),
            (
                "the schema only in the query",
                row(
                    "other",
                    "rabbit://n:****@r:5672/",
                    "mysql+pymysql://n:****@db:3306/other?db=nova",
                ),
                true,
            ),
        ];
        for (what, cells, creates) in cases {
            let (ok, calls, _) = sync(&format!("{CELL0_ROW}{cells}"), false);
            assert!(ok, "{what}");
            assert_eq!(calls.contains("create_cell"), creates, "{what}: {calls}");
        }
    }

    #[test]
    fn a_failed_listing_stops_the_script() {
        let (ok, calls, report) = sync(CELL0_ROW, true);
        assert!(!ok);
        assert!(
            !calls.contains("create_cell") && !calls.contains("nova-manage db sync"),
            "{calls}"
        );
        assert!(report.is_empty());
    }

    #[test]
    fn the_archive_loop_reads_exit_codes_as_severities() {
        let archive = db_archive();
        let env = [("MAX_ROWS", "1000"), ("SLEEP", "0")];
        let ran = run(&archive, "", &[1, 1, 0], false, &env);
        assert!(ran.ok);
        assert_eq!(
            ran.calls.lines().collect::<Vec<_>>(),
            ["nova-manage db archive_deleted_rows --all-cells --max_rows 1000"; 3]
        );
        let ran = run(&archive, "", &[1, 3], false, &env);
        assert!(!ran.ok, "a failed last batch fails the run");
        assert_eq!(ran.calls.lines().count(), 2);
        let windowed = [("MAX_ROWS", "10"), ("SLEEP", "0"), ("RETENTION_DAYS", "30")];
        let ran = run(&archive, "", &[0], false, &windowed);
        assert!(ran.ok);
        let call = ran.calls.trim_end();
        let (head, date) = call
            .strip_suffix(" --task-log")
            .and_then(|c| c.rsplit_once(" --before "))
            .unwrap_or_else(|| panic!("{call}"));
        assert_eq!(
            head,
            "nova-manage db archive_deleted_rows --all-cells --max_rows 10"
        );
        assert!(date.len() == 10 && date.as_bytes()[4] == b'-', "{date}");
    }

    #[test]
    fn the_contract_loop_runs_for_the_cell_then_for_cell0() {
        let connection = (
            "OS_DATABASE__CONNECTION",
            "mysql+pymysql://nova:p%2Fw@db:3306/nova?charset=utf8",
        );
        let ran = run(
            &db_contract("nova"),
            "",
            &[1, 0, 1, 1, 0],
            false,
            &[connection],
        );
        assert!(ran.ok);
        assert_eq!(ran.calls.lines().count(), 5);
        let seen: Vec<&str> = ran.connections.lines().collect();
        assert_eq!(seen[..2], [connection.1; 2]);
        assert_eq!(
            seen[2..],
            ["mysql+pymysql://nova:p%2Fw@db:3306/nova_cell0?charset=utf8"; 3]
        );
        let ran = run(&db_contract("nova"), "", &[1, 2], false, &[connection]);
        assert!(!ran.ok);
        assert_eq!(
            ran.calls.lines().count(),
            2,
            "cell0 is not tried after a failure"
        );
    }

    #[test]
    fn the_expand_phase_tolerates_upgrade_check_warnings_only() {
        let ran = run(&db_expand(), "", &[1], false, &[]);
        assert!(ran.ok);
        assert_eq!(
            ran.calls.lines().collect::<Vec<_>>(),
            [
                "nova-status upgrade check",
                "nova-manage api_db sync",
                "nova-manage db sync"
            ]
        );
        let ran = run(&db_expand(), "", &[2], false, &[]);
        assert!(!ran.ok);
        assert_eq!(ran.calls.lines().count(), 1);
    }

    #[test]
    fn a_report_keeps_only_cell_lines_cell0_first() {
        let report = "Found 2 cell mappings.\ncell1=2f1e6f3c-7a0b-4d4c-9a51-0c3a1d5f0e11\n\
                      cell0=00000000-0000-0000-0000-000000000000\nWARNING: x=y\n\
                      bad name=00000000-0000-0000-0000-000000000000\n\
                      cell2=00000000-0000-0000-0000-00000000000G\n";
        assert_eq!(
            parse_cells(report),
            Some(vec![
                (
                    "cell0".into(),
                    "00000000-0000-0000-0000-000000000000".into()
                ),
                (
                    "cell1".into(),
                    "2f1e6f3c-7a0b-4d4c-9a51-0c3a1d5f0e11".into()
                ),
            ])
        );
        assert_eq!(parse_cells("nothing useful\n"), None);
        assert_eq!(parse_cells(""), None);
    }

    #[test]
    fn no_script_carries_a_forbidden_flag() {
        let archive = db_archive();
        assert!(!archive.contains("--purge") && !archive.contains("--until-complete"));
        assert!(archive.contains(" $before "), "the window stays unquoted");
        assert!(db_sync("nova").contains("-v schema='nova'"));
        assert!(db_contract("nova").contains("}/nova_cell0$query\"\ncontract\n"));
    }
}
