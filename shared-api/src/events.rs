//! Every Kubernetes event reason the Nova and NovaCompute controllers publish, with its type,
//! its action verb, the kind it is published on and when: one table, which the controller
//! publishes from and `refgen` writes `docs/reference/events.md` from, so neither drifts.

/// The kinds an event is published on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Regarding {
    /// A Nova.
    Nova,
    /// A NovaCompute.
    NovaCompute,
    /// Either kind.
    Both,
}

impl Regarding {
    /// The kinds, as the reference names them.
    pub const fn as_str(self) -> &'static str {
        match self {
            Regarding::Nova => "Nova",
            Regarding::NovaCompute => "NovaCompute",
            Regarding::Both => "Nova, NovaCompute",
        }
    }
}

macro_rules! event_reasons {
    ($($variant:ident: $type:ident, $action:literal, $on:ident, $when:literal;)+) => {
        /// An event reason: its spelling is the variant's name.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum EventReason {
            $(#[doc = $when] $variant),+
        }

        impl EventReason {
            /// Every reason, in the reference's order.
            pub const ALL: &'static [EventReason] = &[$(EventReason::$variant),+];

            /// The exact spelling published.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(EventReason::$variant => stringify!($variant)),+
                }
            }

            /// Whether it is a Warning (else Normal).
            pub const fn warning(self) -> bool {
                match self {
                    $(EventReason::$variant => event_reasons!(@warning $type)),+
                }
            }

            /// The events.k8s.io `action`: the short verb of what was done or attempted.
            pub const fn action(self) -> &'static str {
                match self {
                    $(EventReason::$variant => $action),+
                }
            }

            /// The kind it is published on.
            pub const fn regarding(self) -> Regarding {
                match self {
                    $(EventReason::$variant => Regarding::$on),+
                }
            }

            /// When it is published.
            pub const fn when(self) -> &'static str {
                match self {
                    $(EventReason::$variant => $when),+
                }
            }
        }
    };
    (@warning Normal) => { false };
    (@warning Warning) => { true };
}

event_reasons! {
    ReconciliationPaused: Normal, "Pause", Both,
        "The pause annotation took hold (`Paused=True`); nothing is applied until it is removed.";
    ReconcileDeadlineExceeded: Warning, "Reconcile", Both,
        "A pass ran past `controller.passDeadlineSeconds` and was stopped; it is retried with back-off.";
    CRDSchemaOutdated: Warning, "Reconcile", Both,
        "Once per CR and controller start: the served CRD is older than the controller, so fields this release added are dropped.";
    RemoteChildrenAbandoned: Warning, "Delete", Both,
        "A deleted CR's target cluster stayed unreachable past the window; its children there were left behind.";
    UnsafeEndpointOverride: Warning, "Validate", Nova,
        "An override in `spec.endpoints` is not a cluster Service name or uses plain `http` (when the overrides change).";
    ExtraConfigOwnedKeyOverride: Warning, "Render", Both,
        "`spec.extraConfig` overrides operator-owned keys (ExtraConfigHealthy False), when that verdict or its keys are new.";
    RolloutStarted: Normal, "Rollout", Nova,
        "A workload Deployment's pod template changes; the note names the Deployment and the cause: `release`, `credential` (a referenced Secret changed), `operator upgrade` or `spec`, the first input that moved.";
    RolloutComplete: Normal, "Rollout", Nova,
        "A Deployment that started a rollout runs its new pod template on every replica; the note names the cause.";
    DBSyncFailed: Warning, "Sync", Nova,
        "The db-sync Job failed (on the transition of DatabaseReady).";
    CellsReportUnavailable: Normal, "Sync", Nova,
        "The db-sync Job's termination report names no cell; `status.cells` is left as it was.";
    DBSyncMetricEmissionDeferred: Warning, "Count", Nova,
        "A terminal db-sync or upgrade-phase Job could not be stamped on the Nova, so its metrics wait for the next pass.";
    DBArchiveMetricEmissionDeferred: Warning, "Count", Nova,
        "A terminal archive Job could not be stamped on the Nova, so its metrics wait for the next pass.";
    DBArchiveJobFailed: Warning, "Archive", Nova,
        "An archive Job failed (on the transition of DBArchiveReady).";
    UpgradeInitiated: Normal, "Upgrade", Nova,
        "`spec.openStackRelease` moved to the next release; the expand phase starts.";
    ExpandComplete: Normal, "Upgrade", Nova,
        "The expand Job succeeded; the migrate phase starts.";
    ExpandFailed: Warning, "Upgrade", Nova,
        "The expand Job failed.";
    MigrateComplete: Normal, "Upgrade", Nova,
        "The migrate Job succeeded; the workloads roll to the new release.";
    MigrateFailed: Warning, "Upgrade", Nova,
        "The migrate Job failed.";
    DeploymentRolloutComplete: Normal, "Upgrade", Nova,
        "During an upgrade, every workload runs the new release's image; the contract phase starts.";
    ContractFailed: Warning, "Upgrade", Nova,
        "The contract Job failed.";
    UpgradeComplete: Normal, "Upgrade", Nova,
        "The contract Job succeeded; the new release is installed.";
    UpgradeAborted: Normal, "Upgrade", Nova,
        "`spec.openStackRelease` was reverted to the installed release during an upgrade.";
    VersionParseError: Warning, "Upgrade", Nova,
        "`spec.openStackRelease` or the installed release is not a release name.";
    DowngradeNotSupported: Warning, "Upgrade", Nova,
        "`spec.openStackRelease` is older than the installed release.";
    UpgradePathInvalid: Warning, "Upgrade", Nova,
        "`spec.openStackRelease` skips a release.";
    UpgradeTargetChanged: Warning, "Upgrade", Nova,
        "`spec.openStackRelease` names a third release while an upgrade runs.";
    FinalizingDatabase: Normal, "Delete", Nova,
        "A deleted Nova deletes the MariaDB Database, User and Grant objects of both schemas.";
    DatabaseFinalized: Normal, "Delete", Nova,
        "No MariaDB object of a deleted Nova is left; its finalizer is released.";
    NodeConflict: Warning, "Select", NovaCompute,
        "A selected node is held by another pool of the same Nova; this pool runs no pod on it.";
    AggregateCreated: Normal, "Create", NovaCompute,
        "The pool created a host aggregate (in its availability zone).";
    AggregateDeleted: Normal, "Delete", NovaCompute,
        "The pool deleted a host aggregate no pool of its Nova needs.";
    AggregateKept: Warning, "Delete", NovaCompute,
        "An empty aggregate carries metadata the operator did not set, so it is kept (when that starts or the keys change).";
    TraitCreated: Normal, "Create", NovaCompute,
        "The pool created a custom trait in Placement.";
    TraitDeleted: Normal, "Delete", NovaCompute,
        "The pool deleted a custom trait no pool of its Nova declares.";
    TraitKept: Normal, "Delete", NovaCompute,
        "A custom trait the pool no longer declares is kept: another pool declares it, or Placement still uses it.";
    HostDiscoveryStarted: Normal, "Register", NovaCompute,
        "The pool started the discovery Job that maps new compute hosts into the cell.";
    HostDiscoveryFailed: Warning, "Register", NovaCompute,
        "The discovery Job failed; it is replaced after 30 s.";
    ComputeServiceDisabled: Normal, "Drain", NovaCompute,
        "A node left the pool; its compute service is disabled so no server is scheduled to it.";
    ComputeServiceDeleted: Normal, "Delete", NovaCompute,
        "A drained node's compute service was deleted (Nova drops its host mapping with it).";
    ComputeConfigMirrorReaped: Normal, "Delete", NovaCompute,
        "A deleted pool removed a compute config mirror no other pool of its Nova uses on its cluster.";
}

impl std::fmt::Display for EventReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_is_pascal_case_with_a_verb_and_a_sentence() {
        for reason in EventReason::ALL {
            let name = reason.as_str();
            assert!(name.len() <= 128 && name.starts_with(|c: char| c.is_ascii_uppercase()));
            let action = reason.action();
            assert!(
                action.len() <= 128 && !action.contains(' '),
                "{name}: one short verb, not {action:?}"
            );
            assert!(reason.when().ends_with('.'), "{name}");
        }
    }
}
