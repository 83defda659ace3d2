//! Condition types and reasons of both pipelines (`nova-reconciler.txt`, "Conditions";
//! `novacompute.md` §2.9). A reason is an enum variant everywhere, never a loose string.

/// Declares a fieldless enum whose variants spell themselves exactly as written.
macro_rules! spelled_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vmeta])* $variant),+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The exact spelling written into a condition.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => stringify!($variant)),+
                }
            }

            /// Parses the exact spelling back.
            pub fn parse(s: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|v| v.as_str() == s)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                self.as_str()
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

spelled_enum! {
    /// The condition types a Nova reports.
    NovaConditionType {
        SecretsReady, ComputeConfigReady, DatabaseReady, ConductorReady, SchedulerReady,
        MetadataReady, ConsoleProxyReady, DeploymentReady, DBArchiveReady, NovaAPIReady,
        HPAReady, VPAReady, NetworkPolicyReady, HTTPRouteReady, MetadataHTTPRouteReady,
        ConsoleHTTPRouteReady, ExtraConfigHealthy, Ready,
        /// Beyond the spec (issue 30): True while the pause annotation holds reconciliation;
        /// absent otherwise.
        Paused,
    }
}

spelled_enum! {
    /// The condition types a NovaCompute reports.
    NovaComputeConditionType {
        NovaReady, NodesReady, ConfigReady, DaemonSetReady, VPAReady, AggregatesReady,
        ServicesReady, TraitsReady, ExtraConfigHealthy, Ready,
        /// Beyond the spec (issue 30), as for a Nova.
        Paused,
    }
}

spelled_enum! {
    /// Every reason either pipeline writes into a condition.
    Reason {
        // The aggregate.
        AllReady, NotAllReady,
        // Beyond the spec (issue 30): the pause annotation.
        ReconciliationPaused,
        // Shared.
        TargetClusterUnavailable, CapabilityProbeFailed, ConfigError, ComputeAPIError,
        NovaComputeListError, NoOwnedKeysOverridden, OwnedKeysOverridden,
        VPAReady, VPANotRequired, VPANotInstalled, VPAError,
        // Nova: SecretsReady.
        SecretsAvailable, SecretStoreNotReady, ClusterSecretStoreUnsupported,
        WaitingForDBCredentials, WaitingForServiceUserCredentials, WaitingForMetadataSharedSecret,
        MetadataSharedSecretEmpty, WaitingForMessagingCA, WaitingForMessagingCredentials,
        TransportURLRejected,
        // Beyond the spec (issue 30): spec.tls's CA bundle, for SecretsReady and a pool's NovaReady.
        WaitingForEndpointCA,
        // Nova: ComputeConfigReady.
        ComputeConfigPublished, ComputeConfigError, WaitingForRemoteTransportURL,
        // Nova: DatabaseReady.
        DatabaseSynced, ClusterNotReady, WaitingForDatabase, WaitingForConfig,
        ImageReleaseMismatch, DBSyncFailed, DBSyncInProgress, VersionParseError,
        DowngradeNotSupported, UpgradePathInvalid, UpgradeTargetChanged, ExpandInProgress,
        MigrateInProgress, UpgradeRollingUpdate, ContractInProgress, ExpandFailed,
        MigrateFailed, ContractFailed, SchemaInUse,
        // Nova: the workloads.
        ConductorReady, WaitingForConductor, SchedulerReady, WaitingForScheduler,
        MetadataReady, WaitingForMetadata, ConsoleProxyReady, ConsoleProxyDisabled,
        WaitingForConsoleProxy, DeploymentReady, WaitingForDeployment,
        // Nova: DBArchiveReady.
        DBArchiveScheduled, DBArchiveSuspended, DBArchiveJobFailed,
        // Nova: NovaAPIReady.
        APIHealthy, APIUnhealthy, EndpointNotReady, HealthCheckTimeout, ConnectionFailed,
        HealthCheckFailed,
        // Nova: HPAReady, NetworkPolicyReady (their failures propagate as errors).
        HPAReady, HPANotRequired, NetworkPolicyReady, NetworkPolicyNotRequired,
        // Nova: the three route conditions.
        HTTPRouteAccepted, HTTPRouteNotRequired, HTTPRouteNotAccepted, GatewayAPINotInstalled,
        // NovaCompute: NovaReady.
        NovaResolved, NovaNotFound, WaitingForInstalledRelease, ComputeConfigNotPublished,
        WaitingForServiceUserSecret, NovaError,
        // NovaCompute: NodesReady.
        NodesResolved, NoMatchingNodes, NodeConflict, NodesForbidden, NodeListError,
        // NovaCompute: ConfigReady.
        ConfigRendered, WaitingForComputeConfig, ComputeConfigIncomplete,
        // NovaCompute: DaemonSetReady.
        DaemonSetReady, DaemonSetProgressing, DaemonSetError,
        // NovaCompute: AggregatesReady.
        AggregatesEnsured, NodesOutsideZoneAggregate, NodesWithoutZone, AggregateZoneMismatch,
        WaitingForAggregate,
        // NovaCompute: ServicesReady.
        ServicesUp, Draining, WaitingForServices, WaitingForHostMapping, HostDiscoveryError,
        ServicesDown, ServicesDisabled, PodListError,
        // NovaCompute: TraitsReady.
        NoTraitsDeclared, TraitsApplied, HypervisorOperatorNotInstalled, HypervisorsForbidden,
        NodesWithoutHypervisor, WaitingForHypervisorOperator, HypervisorError,
    }
}

use NovaComputeConditionType as C;
use NovaConditionType as N;
use Reason as R;

/// The reasons one condition type may carry, split by the status they go with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vocabulary {
    /// Reasons written with status True.
    pub true_reasons: &'static [Reason],
    /// Reasons written with status False.
    pub false_reasons: &'static [Reason],
}

impl Vocabulary {
    /// Whether `reason` is one of this condition's True reasons.
    pub fn is_true_reason(&self, reason: Reason) -> bool {
        self.true_reasons.contains(&reason)
    }
}

const fn vocab(true_reasons: &'static [Reason], false_reasons: &'static [Reason]) -> Vocabulary {
    Vocabulary {
        true_reasons,
        false_reasons,
    }
}

const AGGREGATE: Vocabulary = vocab(&[R::AllReady], &[R::NotAllReady]);
const PAUSED: Vocabulary = vocab(&[R::ReconciliationPaused], &[]);
const EXTRA_CONFIG: Vocabulary = vocab(&[R::NoOwnedKeysOverridden], &[R::OwnedKeysOverridden]);
const VPA: Vocabulary = vocab(
    &[R::VPAReady, R::VPANotRequired],
    &[R::VPANotInstalled, R::CapabilityProbeFailed, R::VPAError],
);
const ROUTE: Vocabulary = vocab(
    &[R::HTTPRouteAccepted, R::HTTPRouteNotRequired],
    &[
        R::HTTPRouteNotAccepted,
        R::GatewayAPINotInstalled,
        R::CapabilityProbeFailed,
    ],
);

impl NovaConditionType {
    /// The sixteen sub-conditions whose conjunction is Ready (ExtraConfigHealthy stays out).
    pub const AGGREGATED: [NovaConditionType; 16] = [
        N::SecretsReady,
        N::ComputeConfigReady,
        N::DatabaseReady,
        N::ConductorReady,
        N::SchedulerReady,
        N::MetadataReady,
        N::ConsoleProxyReady,
        N::DeploymentReady,
        N::DBArchiveReady,
        N::NovaAPIReady,
        N::HPAReady,
        N::VPAReady,
        N::NetworkPolicyReady,
        N::HTTPRouteReady,
        N::MetadataHTTPRouteReady,
        N::ConsoleHTTPRouteReady,
    ];

    /// The reasons this condition may carry.
    pub const fn vocabulary(self) -> Vocabulary {
        match self {
            N::SecretsReady => vocab(
                &[R::SecretsAvailable],
                &[
                    R::TargetClusterUnavailable,
                    R::SecretStoreNotReady,
                    R::ClusterSecretStoreUnsupported,
                    R::WaitingForDBCredentials,
                    R::WaitingForServiceUserCredentials,
                    R::WaitingForMetadataSharedSecret,
                    R::MetadataSharedSecretEmpty,
                    R::WaitingForMessagingCA,
                    R::WaitingForEndpointCA,
                    R::WaitingForMessagingCredentials,
                    R::TransportURLRejected,
                    R::ConfigError,
                ],
            ),
            N::ComputeConfigReady => vocab(
                &[R::ComputeConfigPublished],
                &[R::ComputeConfigError, R::WaitingForRemoteTransportURL],
            ),
            N::DatabaseReady => vocab(
                &[R::DatabaseSynced],
                &[
                    R::ClusterNotReady,
                    R::WaitingForDatabase,
                    R::WaitingForConfig,
                    R::ImageReleaseMismatch,
                    R::DBSyncFailed,
                    R::DBSyncInProgress,
                    R::VersionParseError,
                    R::DowngradeNotSupported,
                    R::UpgradePathInvalid,
                    R::UpgradeTargetChanged,
                    R::ExpandInProgress,
                    R::MigrateInProgress,
                    R::UpgradeRollingUpdate,
                    R::ContractInProgress,
                    R::ExpandFailed,
                    R::MigrateFailed,
                    R::ContractFailed,
                    R::SchemaInUse,
                ],
            ),
            N::ConductorReady => vocab(&[R::ConductorReady], &[R::WaitingForConductor]),
            N::SchedulerReady => vocab(&[R::SchedulerReady], &[R::WaitingForScheduler]),
            N::MetadataReady => vocab(&[R::MetadataReady], &[R::WaitingForMetadata]),
            N::ConsoleProxyReady => vocab(
                &[R::ConsoleProxyReady, R::ConsoleProxyDisabled],
                &[R::WaitingForConsoleProxy],
            ),
            N::DeploymentReady => vocab(&[R::DeploymentReady], &[R::WaitingForDeployment]),
            N::DBArchiveReady => vocab(
                &[R::DBArchiveScheduled, R::DBArchiveSuspended],
                &[R::DBArchiveJobFailed],
            ),
            N::NovaAPIReady => vocab(
                &[R::APIHealthy],
                &[
                    R::APIUnhealthy,
                    R::EndpointNotReady,
                    R::HealthCheckTimeout,
                    R::ConnectionFailed,
                    R::HealthCheckFailed,
                ],
            ),
            N::HPAReady => vocab(&[R::HPAReady, R::HPANotRequired], &[]),
            N::VPAReady => VPA,
            N::NetworkPolicyReady => {
                vocab(&[R::NetworkPolicyReady, R::NetworkPolicyNotRequired], &[])
            }
            N::HTTPRouteReady | N::MetadataHTTPRouteReady | N::ConsoleHTTPRouteReady => ROUTE,
            N::ExtraConfigHealthy => EXTRA_CONFIG,
            N::Ready => AGGREGATE,
            N::Paused => PAUSED,
        }
    }
}

impl NovaComputeConditionType {
    /// The eight sub-conditions whose conjunction is Ready (ExtraConfigHealthy stays out).
    pub const AGGREGATED: [NovaComputeConditionType; 8] = [
        C::NovaReady,
        C::NodesReady,
        C::ConfigReady,
        C::DaemonSetReady,
        C::VPAReady,
        C::AggregatesReady,
        C::ServicesReady,
        C::TraitsReady,
    ];

    /// The reasons this condition may carry.
    pub const fn vocabulary(self) -> Vocabulary {
        match self {
            C::NovaReady => vocab(
                &[R::NovaResolved],
                &[
                    R::NovaNotFound,
                    R::WaitingForInstalledRelease,
                    R::ComputeConfigNotPublished,
                    R::TargetClusterUnavailable,
                    R::WaitingForServiceUserSecret,
                    R::WaitingForEndpointCA,
                    R::NovaError,
                ],
            ),
            C::NodesReady => vocab(
                &[R::NodesResolved],
                &[
                    R::NoMatchingNodes,
                    R::NodeConflict,
                    R::NodesForbidden,
                    R::NodeListError,
                    R::TargetClusterUnavailable,
                ],
            ),
            C::ConfigReady => vocab(
                &[R::ConfigRendered],
                &[
                    R::WaitingForComputeConfig,
                    R::ComputeConfigIncomplete,
                    R::ConfigError,
                ],
            ),
            C::DaemonSetReady => vocab(
                &[R::DaemonSetReady],
                &[R::DaemonSetProgressing, R::DaemonSetError],
            ),
            C::VPAReady => VPA,
            C::AggregatesReady => vocab(
                &[R::AggregatesEnsured, R::NodesOutsideZoneAggregate],
                &[
                    R::NodesWithoutZone,
                    R::AggregateZoneMismatch,
                    R::WaitingForAggregate,
                    R::ComputeAPIError,
                    R::NovaComputeListError,
                ],
            ),
            C::ServicesReady => vocab(
                &[R::ServicesUp, R::Draining],
                &[
                    R::WaitingForServices,
                    R::WaitingForHostMapping,
                    R::HostDiscoveryError,
                    R::ServicesDown,
                    R::ServicesDisabled,
                    R::ComputeAPIError,
                    R::PodListError,
                    R::TargetClusterUnavailable,
                ],
            ),
            C::TraitsReady => vocab(
                &[R::NoTraitsDeclared, R::TraitsApplied],
                &[
                    R::HypervisorOperatorNotInstalled,
                    R::HypervisorsForbidden,
                    R::NodesWithoutHypervisor,
                    R::NovaComputeListError,
                    R::ComputeAPIError,
                    R::WaitingForHypervisorOperator,
                    R::HypervisorError,
                ],
            ),
            C::ExtraConfigHealthy => EXTRA_CONFIG,
            C::Ready => AGGREGATE,
            C::Paused => PAUSED,
        }
    }
}

/// NovaCompute reasons that are not waits: the step returns a zero result so later steps run.
pub const NOVACOMPUTE_NON_WAIT_REASONS: [Reason; 5] = [
    R::NoMatchingNodes,
    R::NodeConflict,
    R::DaemonSetProgressing,
    R::NodesWithoutZone,
    R::AggregateZoneMismatch,
];

/// The aggregate's messages (`common-types.md` §3.3).
pub const ALL_READY_MESSAGE: &str = "All sub-conditions are ready";
/// The aggregate's message while any sub-condition is not True.
pub const NOT_ALL_READY_MESSAGE: &str = "One or more sub-conditions are not ready";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_round_trip() {
        for r in Reason::ALL {
            assert_eq!(Reason::parse(r.as_str()), Some(*r));
        }
        assert_eq!(
            Reason::TransportURLRejected.to_string(),
            "TransportURLRejected"
        );
        assert_eq!(NovaConditionType::DBArchiveReady.as_str(), "DBArchiveReady");
        assert_eq!(NovaComputeConditionType::NovaReady.as_str(), "NovaReady");
    }

    #[test]
    fn every_reason_belongs_to_a_condition() {
        let used: Vec<Reason> = NovaConditionType::ALL
            .iter()
            .map(|t| t.vocabulary())
            .chain(NovaComputeConditionType::ALL.iter().map(|t| t.vocabulary()))
            .flat_map(|v| v.true_reasons.iter().chain(v.false_reasons).copied())
            .collect();
        for r in Reason::ALL {
            assert!(
                used.contains(r),
                "{r} is declared but no condition carries it"
            );
        }
    }

    #[test]
    fn no_reason_is_both_true_and_false_for_one_condition() {
        let vocabularies = NovaConditionType::ALL
            .iter()
            .map(|t| (t.as_str(), t.vocabulary()))
            .chain(
                NovaComputeConditionType::ALL
                    .iter()
                    .map(|t| (t.as_str(), t.vocabulary())),
            );
        for (name, v) in vocabularies {
            for r in v.true_reasons {
                assert!(
                    !v.false_reasons.contains(r),
                    "{name}: {r} is both True and False"
                );
            }
        }
    }

    #[test]
    fn aggregates_leave_out_the_informational_condition() {
        assert_eq!(NovaConditionType::AGGREGATED.len(), 16);
        assert!(!NovaConditionType::AGGREGATED.contains(&NovaConditionType::ExtraConfigHealthy));
        assert!(!NovaConditionType::AGGREGATED.contains(&NovaConditionType::Ready));
        assert_eq!(NovaComputeConditionType::AGGREGATED.len(), 8);
        assert!(
            !NovaComputeConditionType::AGGREGATED
                .contains(&NovaComputeConditionType::ExtraConfigHealthy)
        );
    }

    #[test]
    fn the_documented_true_reasons_of_an_absence() {
        let console = NovaConditionType::ConsoleProxyReady.vocabulary();
        assert!(console.is_true_reason(Reason::ConsoleProxyDisabled));
        let archive = NovaConditionType::DBArchiveReady.vocabulary();
        assert!(archive.is_true_reason(Reason::DBArchiveSuspended));
        let aggregates = NovaComputeConditionType::AggregatesReady.vocabulary();
        assert!(aggregates.is_true_reason(Reason::NodesOutsideZoneAggregate));
        let services = NovaComputeConditionType::ServicesReady.vocabulary();
        assert!(services.is_true_reason(Reason::Draining));
    }
}
