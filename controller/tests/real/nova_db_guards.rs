//! The duplicate-cell guard of the db-sync script (`nova-reconciler.txt`, "The cells
//! sequence") against the real `nova-manage`: the in-process controller renders and runs its
//! `{name}-db-sync` Job on the real node, from the real nova image, against the harness's real
//! MariaDB, after a fixture Job of the same image mapped the cells a cloud might already have:
//!
//! - a brownfield cell mapped under another name on the Nova's cell schema is found by its
//!   schema and not mapped again;
//! - a database host, a database user and a broker vhost naming `cell1` do not pass for a mapped
//!   cell1 (the guard reads whole fields), so cell1 is mapped;
//! - a listing nova-manage cannot print stops the script (`sh -eu`): no `create_cell` (a second
//!   cell1 beside the mapped one), no `db sync`, and the Job fails with `DBSyncFailed`.
//!
//! The cell1 case runs the nova image of 2026.2, the others that of 2026.1, so a fresh db-sync
//! of each supported release maps cell0 and cell1 for real (`nova_real` runs 2026.1's).
//!
//! Each case runs its Nova in brownfield database mode (`host`) on schemas and users of its own,
//! created and dropped here as MariaDB's root, so the cases run side by side and leave the shared
//! MariaDB as they found it. Once the Database step has spoken the namespace goes, so the
//! workloads a passing Database step lets start do not take the node's CPU.

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use nova_api::names::NovaNames;
use nova_api::v1alpha1::Nova;
use nova_test_harness::images::{nova_image, pinned};
use nova_test_harness::openstack::{self, OpenStack};
use nova_testkit::prelude::*;
use nova_testkit::real::*;
use serde_json::json;

/// The brownfield database of one case: the host its Nova names, its users and its schemas.
struct Brownfield {
    /// The MariaDB host as the pods reach it.
    host: &'static str,
    /// The user of the nova_api schema.
    api_user: &'static str,
    /// The user of the cell schema and cell0.
    cell_user: &'static str,
    /// The cell schema; the nova_api schema is `<cell>_api`, cell0 `<cell>_cell0`.
    cell: &'static str,
    password: String,
}

impl Brownfield {
    fn new(
        host: &'static str,
        api_user: &'static str,
        cell_user: &'static str,
        cell: &'static str,
    ) -> Self {
        Self {
            host,
            api_user,
            cell_user,
            cell,
            password: openstack::random_password().expect("password"),
        }
    }

    fn api(&self) -> String {
        format!("{}_api", self.cell)
    }

    fn cell0(&self) -> String {
        NovaNames::cell0_schema(self.cell)
    }

    /// The connection of `user` to `schema`, as the operator builds it from the credentials.
    fn dsn(&self, user: &str, schema: &str) -> String {
        format!(
            "mysql+pymysql://{user}:{}@{}:3306/{schema}?charset=utf8",
            self.password, self.host
        )
    }
}

/// One case's namespace, with its database prepared and its Nova created.
struct Case {
    os: &'static OpenStack,
    client: Client,
    ns: String,
    db: Brownfield,
    /// What the fixture Job wrote to its termination log.
    premapped: String,
}

impl Case {
    /// The namespace `prefix-…` with every input; `db`'s schemas and users created as root; a
    /// fixture Job of the nova image of `release` running `nova-manage api_db sync` and then
    /// `premap` with the Nova's own connections in its environment; the controller; the Nova of
    /// that release on `db`.
    async fn start(prefix: &str, release: &str, db: Brownfield, premap: &str) -> Self {
        let (cp, os) = nova_testkit::stack::openstack().await;
        let client = cp.client().expect("client");
        let ns = cp.namespace(prefix).await.expect("namespace");
        provide_real_inputs(os, &client, &ns).await;
        if db.host != openstack::MARIADB {
            alias_mariadb(&client, &ns, db.host).await;
        }
        os.create_databases(
            &format!("{ns}-api"),
            &[&db.api()],
            db.api_user,
            &db.password,
        )
        .await
        .expect("nova_api schema");
        os.create_databases(
            &format!("{ns}-cell"),
            &[db.cell, &db.cell0()],
            db.cell_user,
            &db.password,
        )
        .await
        .expect("cell schemas");
        let secrets = Api::namespaced(client.clone(), &ns);
        for (secret, user) in [("nova-api-db", db.api_user), ("nova-db", db.cell_user)] {
            put_secret(
                &secrets,
                secret,
                &[("username", user), ("password", &db.password)],
            )
            .await;
        }
        put_secret(
            &secrets,
            "premap-connections",
            &[
                ("api", &db.dsn(db.api_user, &db.api())),
                ("cell", &db.dsn(db.cell_user, db.cell)),
                ("transport", &os.transport_url(&ns)),
            ],
        )
        .await;
        let image = pinned(&nova_image(release)).expect("the nova image's digest");
        let from = |var: &str, key: &str| json!({"name": var, "valueFrom": {"secretKeyRef": {"name": "premap-connections", "key": key}}});
        let premapped = probe_job(
            &client,
            &ns,
            "premap",
            &image,
            &format!("set -eu\nnova-manage api_db sync\n{premap}"),
            json!([
                from("OS_API_DATABASE__CONNECTION", "api"),
                from("OS_DATABASE__CONNECTION", "cell"),
                from("OS_DEFAULT__TRANSPORT_URL", "transport"),
            ]),
        )
        .await;
        start_controller(client.clone(), &ns).await;
        let mut nova = real_nova(&ns, &image);
        for (block, schema) in [
            (&mut nova.spec.api_database, db.api()),
            (&mut nova.spec.database, db.cell.to_owned()),
        ] {
            block.cluster_ref = None;
            block.host = Some(db.host.to_owned());
            block.database = schema;
        }
        Api::<Nova>::namespaced(client.clone(), &ns)
            .create(&PostParams::default(), &nova)
            .await
            .expect("create Nova");
        Self {
            os,
            client,
            ns,
            db,
            premapped,
        }
    }

    /// The Nova once its db-sync Job succeeded (`DatabaseReady=True`, `DatabaseSynced`).
    async fn synced(&self) -> Nova {
        let nova = wait_nova(&self.client, &self.ns, "DatabaseReady=True", |n| {
            holds(n, "DatabaseReady", "True")
        })
        .await;
        assert_eq!(reason(&nova, "DatabaseReady"), Some("DatabaseSynced"));
        nova
    }

    /// The cell mappings of the nova_api schema, `name=uuid` by name.
    async fn mappings(&self, job: &str) -> Vec<String> {
        let sql = format!(
            "SELECT CONCAT(name, '=', uuid) FROM {}.cell_mappings ORDER BY name",
            self.db.api()
        );
        let listed = query(&self.client, &self.ns, job, &sql).await;
        listed.split_whitespace().map(str::to_owned).collect()
    }

    /// Deletes the namespace, then the case's schemas and users.
    async fn finish(self) {
        finish(&self.client, &self.ns).await;
        let db = &self.db;
        let sql = format!(
            "DROP DATABASE IF EXISTS `{}`;\nDROP DATABASE IF EXISTS `{}`;\nDROP DATABASE IF EXISTS `{}`;\n\
             DROP USER IF EXISTS '{}'@'%';\nDROP USER IF EXISTS '{}'@'%';\n",
            db.api(),
            db.cell,
            db.cell0(),
            db.api_user,
            db.cell_user
        );
        self.os
            .run_sql(&format!("drop-{}", self.ns), &sql)
            .await
            .expect("drop the case's schemas and users");
    }
}

/// An ExternalName Service `name` in `ns` for the shared MariaDB: a database host of another
/// name.
async fn alias_mariadb(client: &Client, ns: &str, name: &str) {
    openstack::apply(
        client,
        &json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "type": "ExternalName",
                "externalName": format!("{}.{}.svc.cluster.local", openstack::MARIADB, openstack::NAMESPACE),
                "ports": [{"name": "main", "port": 3306}]
            }
        }),
    )
    .await
    .expect("MariaDB alias");
}

/// The UUID a fixture's `create_cell --verbose` printed.
fn premapped_uuid(case: &Case) -> String {
    let uuid = case.premapped.trim().to_owned();
    assert!(
        uuid.len() == 36 && uuid.chars().filter(|c| *c == '-').count() == 4,
        "{:?}",
        case.premapped
    );
    uuid
}

#[tokio::test(flavor = "multi_thread")]
async fn a_brownfield_cell_mapped_under_another_name_is_not_mapped_again() {
    let _timed = nova_testkit::stack::timed().await;
    // The cloud mapped its cell as `legacy`, with an expanded URL on the same schema (other
    // query parameters), long before the operator.
    let case = Case::start(
        "guard-brownfield",
        nova_testkit::stack::RELEASE,
        Brownfield::new(openstack::MARIADB, "guard_a_api", "guard_a", "guard_a"),
        r#"nova-manage cell_v2 create_cell --verbose --name legacy --transport-url "$OS_DEFAULT__TRANSPORT_URL" \
  --database_connection "${OS_DATABASE__CONNECTION%%\?*}?charset=utf8&read_timeout=30" > /dev/termination-log"#,
    )
    .await;
    let legacy = premapped_uuid(&case);
    let nova = case.synced().await;
    assert_eq!(
        cells(&nova),
        [
            ("cell0".to_owned(), CELL0.to_owned()),
            ("legacy".to_owned(), legacy.clone())
        ],
        "the report names the brownfield cell under its own name"
    );
    assert_eq!(
        nova.status
            .as_ref()
            .and_then(|s| s.installed_release.as_deref()),
        Some(nova_testkit::stack::RELEASE)
    );
    assert_eq!(
        case.mappings("mappings").await,
        [format!("cell0={CELL0}"), format!("legacy={legacy}")],
        "no second mapping of the cell schema"
    );
    eprintln!(
        "brownfield: the real db-sync found legacy={legacy} by its schema and mapped nothing"
    );
    case.finish().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cell1_in_a_host_a_user_or_a_vhost_does_not_pass_for_a_mapped_cell1() {
    let _timed = nova_testkit::stack::timed().await;
    // The Nova's database host is `cell1-mariadb`, its cell user `cell1` (both in cell0's row
    // once map_cell0 ran, and the namespace puts cell1 in the broker host); a foreign cell
    // `edge` names cell1 as its broker user, host and vhost and its database user and host.
    // The fixture checks that a grep for the word would take the table for a mapped cell1.
    // This case runs the 2026.2 image: its fresh db-sync maps cell0 and cell1 as 2026.1's does
    // in `nova_real`.
    let case = Case::start(
        "cell1-guard",
        "2026.2",
        Brownfield::new("cell1-mariadb", "guard_b_api", "cell1", "guard_b"),
        "nova-manage cell_v2 create_cell --verbose --name edge \
  --transport-url 'rabbit://cell1@cell1-rabbit.example:5672/cell1' \
  --database_connection 'mysql+pymysql://cell1@cell1-db.example:3306/edge?charset=utf8' > /dev/termination-log
nova-manage cell_v2 list_cells | grep -qw cell1",
    )
    .await;
    let edge = premapped_uuid(&case);
    let nova = case.synced().await;
    let reported = cells(&nova);
    let names: Vec<&str> = reported.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["cell0", "cell1", "edge"], "{reported:?}");
    let cell1 = &reported[1].1;
    assert!(cell1 != CELL0 && *cell1 != edge, "{reported:?}");
    assert_eq!(reported[2].1, edge);
    assert_eq!(
        nova.status
            .as_ref()
            .and_then(|s| s.installed_release.as_deref()),
        Some("2026.2")
    );
    assert_eq!(
        case.mappings("mappings").await,
        [
            format!("cell0={CELL0}"),
            format!("cell1={cell1}"),
            format!("edge={edge}")
        ]
    );
    eprintln!("cell1 in host, user and vhost: the real db-sync mapped cell1={cell1} beside edge");
    case.finish().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_listing_stops_the_script_and_fails_the_job() {
    let _timed = nova_testkit::stack::timed().await;
    // cell1 is mapped (expanded URLs, as a hand-built cloud stores them: a create_cell with the
    // operator's templates would map a second one), and beside it a cell whose connection
    // nova-manage accepted but cannot print (an unterminated IPv6 literal): list_cells fails
    // on it, as the fixture checks, and with it every run of the db-sync script.
    let case = Case::start(
        "guard-listing",
        nova_testkit::stack::RELEASE,
        Brownfield::new(openstack::MARIADB, "guard_c_api", "guard_c", "guard_c"),
        r#"nova-manage cell_v2 create_cell --verbose --name cell1 --transport-url "$OS_DEFAULT__TRANSPORT_URL" \
  --database_connection "$OS_DATABASE__CONNECTION" > /dev/termination-log
nova-manage cell_v2 create_cell --name broken --transport-url 'rabbit://broken@broken.example:5672/' \
  --database_connection 'mysql+pymysql://broken@[fd00::1/broken'
if nova-manage cell_v2 list_cells > /dev/null; then exit 3; fi"#,
    )
    .await;
    let cell1 = premapped_uuid(&case);
    // Five attempts (backoffLimit 4) with the Job controller's back-off between them.
    let nova = wait_nova_for(
        &case.client,
        &case.ns,
        "DatabaseReady=False",
        std::time::Duration::from_secs(1200),
        |n| reason(n, "DatabaseReady") == Some("DBSyncFailed"),
    )
    .await;
    let message = nova
        .status
        .iter()
        .flat_map(|s| s.conditions.iter())
        .find(|c| c.type_ == "DatabaseReady")
        .map(|c| c.message.clone());
    assert_eq!(
        message,
        Some(format!(
            "db_sync job failed: job has permanently failed: {}/nova-db-sync",
            case.ns
        ))
    );
    assert!(
        event_reasons(&case.client, &case.ns)
            .await
            .iter()
            .any(|r| r == "DBSyncFailed")
    );
    let status = nova.status.clone().unwrap_or_default();
    assert!(status.cells.is_empty(), "{:?}", status.cells);
    assert_eq!(status.installed_release, None, "nothing promoted");
    // Every attempt ended where nova-manage failed: exit code 255, its "An error has occurred".
    let attempts = Api::<Pod>::namespaced(case.client.clone(), &case.ns)
        .list(&ListParams::default().labels("job-name=nova-db-sync"))
        .await
        .expect("db-sync pods")
        .items;
    let codes: Vec<Option<i32>> = attempts
        .iter()
        .map(|p| {
            let status = p.status.as_ref()?.container_statuses.as_ref()?.first()?;
            Some(status.state.as_ref()?.terminated.as_ref()?.exit_code)
        })
        .collect();
    assert!(
        !codes.is_empty() && codes.iter().all(|c| *c == Some(255)),
        "{codes:?}"
    );
    // map_cell0 ran before the listing; neither create_cell nor db sync ran after it.
    let mut mappings = case.mappings("mappings").await;
    let broken = mappings.remove(0);
    assert!(broken.starts_with("broken="), "{broken}");
    assert_eq!(
        mappings,
        [format!("cell0={CELL0}"), format!("cell1={cell1}")]
    );
    let tables = query(
        &case.client,
        &case.ns,
        "cell-tables",
        &format!(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = '{}'",
            case.db.cell
        ),
    )
    .await;
    assert_eq!(tables.trim(), "0", "db sync never migrated the cell schema");
    eprintln!(
        "failed listing: {} real db-sync runs stopped at list_cells, cell1 mapped once",
        codes.len()
    );
    case.finish().await;
}
