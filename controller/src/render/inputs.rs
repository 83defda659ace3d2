//! The typed spec fields the documents share, resolved to their render-time defaults and
//! checked for line breaks, once, under their field paths.
//!
//! Defaulting may not have run (an offline render, a CR admitted while the webhook was down),
//! so every unset or empty field resolves here to the default the defaulting webhook would
//! have written: a render of a defaulted spec and of the same spec undefaulted are
//! byte-identical.

use nova_api::defaults::{DEFAULT_DOMAIN, DEFAULT_SERVICE_PROJECT, DEFAULT_SERVICE_USERNAME};
use nova_api::effective::keystone_public_endpoint;
use nova_api::names::NovaNames;
use nova_api::v1alpha1::{EndpointOverrideSpec, NovaSpec, OptionalEndpointSpec};

use super::error::RenderError;
use super::ini::has_line_break;
use super::paths::NOVNCPROXY_PORT;

/// `value`, or the field's error when it carries a newline or carriage return.
pub(crate) fn verbatim<'a>(field: &str, value: &'a str) -> Result<&'a str, RenderError> {
    if has_line_break(value) {
        Err(RenderError::ControlCharacter {
            field: field.to_owned(),
        })
    } else {
        Ok(value)
    }
}

/// A set, non-empty optional string field, checked.
fn optional<'a>(field: &str, value: Option<&'a String>) -> Result<Option<&'a str>, RenderError> {
    match value.map(String::as_str).filter(|v| !v.is_empty()) {
        Some(v) => verbatim(field, v).map(Some),
        None => Ok(None),
    }
}

/// A string field with a default for unset and empty, checked.
fn defaulted<'a>(
    field: &str,
    value: Option<&'a String>,
    default: &'static str,
) -> Result<&'a str, RenderError> {
    Ok(optional(field, value)?.unwrap_or(default))
}

fn override_of(
    field: &str,
    block: Option<&EndpointOverrideSpec>,
) -> Result<Option<String>, RenderError> {
    Ok(optional(field, block.and_then(|b| b.override_url.as_ref()))?.map(str::to_owned))
}

/// An optional service: None while switched off, else its override (if any).
fn optional_service(
    field: &str,
    block: Option<&OptionalEndpointSpec>,
) -> Result<Option<Option<String>>, RenderError> {
    match block {
        Some(b) if b.enabled.unwrap_or(false) => Ok(Some(
            optional(field, b.override_url.as_ref())?.map(str::to_owned),
        )),
        _ => Ok(None),
    }
}

/// The service user's identity, the same in every identity and client section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Identity {
    pub username: String,
    pub project_name: String,
    pub user_domain_name: String,
    pub project_domain_name: String,
}

/// The console switch and the URL a compute hands browsers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Console {
    pub enabled: bool,
    /// `[vnc] novncproxy_base_url`, only while the proxy runs.
    pub base_url: Option<String>,
}

/// The fields nova.conf and the compute fragment both render.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SharedInputs {
    pub keystone_endpoint: String,
    pub keystone_public_endpoint: String,
    pub identity: Identity,
    pub region: Option<String>,
    pub placement_override: Option<String>,
    pub neutron_override: Option<String>,
    pub glance_override: Option<String>,
    /// None while Cinder is off; else its endpoint_template, if pinned.
    pub cinder: Option<Option<String>>,
    /// None while Barbican is off; else its barbican_endpoint, if pinned.
    pub barbican: Option<Option<String>>,
    pub messaging_tls: bool,
    /// Whether spec.tls names a CA bundle for Keystone and the service endpoints.
    pub endpoint_tls: bool,
    pub debug: bool,
    pub console: Console,
}

impl SharedInputs {
    /// Resolves and checks the shared fields of `spec` for the Nova `name` in `namespace`.
    pub(crate) fn resolve(
        name: &str,
        namespace: &str,
        spec: &NovaSpec,
    ) -> Result<Self, RenderError> {
        let user = &spec.service_user;
        let identity = Identity {
            username: defaulted(
                "spec.serviceUser.username",
                user.username.as_ref(),
                DEFAULT_SERVICE_USERNAME,
            )?
            .to_owned(),
            project_name: defaulted(
                "spec.serviceUser.projectName",
                user.project_name.as_ref(),
                DEFAULT_SERVICE_PROJECT,
            )?
            .to_owned(),
            user_domain_name: defaulted(
                "spec.serviceUser.userDomainName",
                user.user_domain_name.as_ref(),
                DEFAULT_DOMAIN,
            )?
            .to_owned(),
            project_domain_name: defaulted(
                "spec.serviceUser.projectDomainName",
                user.project_domain_name.as_ref(),
                DEFAULT_DOMAIN,
            )?
            .to_owned(),
        };
        let keystone_endpoint = verbatim("spec.keystoneEndpoint", &spec.keystone_endpoint)?;
        let public_field = if spec
            .keystone_public_endpoint
            .as_deref()
            .is_some_and(|e| !e.is_empty())
        {
            "spec.keystonePublicEndpoint"
        } else {
            "spec.keystoneEndpoint"
        };
        let keystone_public_endpoint = verbatim(public_field, keystone_public_endpoint(spec))?;
        let endpoints = spec.endpoints.clone().unwrap_or_default();
        Ok(Self {
            keystone_endpoint: keystone_endpoint.to_owned(),
            keystone_public_endpoint: keystone_public_endpoint.to_owned(),
            identity,
            region: optional("spec.region", spec.region.as_ref())?.map(str::to_owned),
            placement_override: override_of(
                "spec.endpoints.placement.override",
                endpoints.placement.as_ref(),
            )?,
            neutron_override: override_of(
                "spec.endpoints.neutron.override",
                endpoints.neutron.as_ref(),
            )?,
            glance_override: override_of(
                "spec.endpoints.glance.override",
                endpoints.glance.as_ref(),
            )?,
            cinder: optional_service("spec.endpoints.cinder.override", endpoints.cinder.as_ref())?,
            barbican: optional_service(
                "spec.endpoints.barbican.override",
                endpoints.barbican.as_ref(),
            )?,
            messaging_tls: spec.messaging.tls.is_some(),
            endpoint_tls: spec.tls.is_some(),
            debug: spec.logging.as_ref().and_then(|l| l.debug).unwrap_or(false),
            console: console(name, namespace, spec)?,
        })
    }
}

/// The console switch and base URL.
///
/// `novncproxy_base_url` is the page the compute hands a browser, with the token appended by
/// nova. The spec fixes the console URL as `https://<hostname>/vnc_lite.html?path=...`, so
/// with a console gateway the base is `https://<hostname>/vnc_lite.html`; without one it is
/// the proxy's cluster-local Service URL, `http://{name}-novncproxy.{namespace}.svc.cluster.local:6080/vnc_lite.html`
/// (plain http: the proxy Service terminates no TLS). `vnc_lite.html` is the page nova's own
/// default names (`http://127.0.0.1:6080/vnc_lite.html`).
fn console(name: &str, namespace: &str, spec: &NovaSpec) -> Result<Console, RenderError> {
    let block = spec.console_proxy.as_ref();
    let enabled = block.and_then(|c| c.enabled).unwrap_or(true);
    if !enabled {
        return Ok(Console {
            enabled,
            base_url: None,
        });
    }
    let hostname = block
        .and_then(|c| c.gateway.as_ref())
        .map(|g| g.hostname.as_str())
        .filter(|h| !h.is_empty());
    let base_url = match hostname {
        Some(hostname) => format!(
            "https://{}/vnc_lite.html",
            verbatim("spec.consoleProxy.gateway.hostname", hostname)?
        ),
        None => format!(
            "http://{}.{}.svc.cluster.local:{NOVNCPROXY_PORT}/vnc_lite.html",
            verbatim("metadata.name", &NovaNames::new(name).novncproxy())?,
            verbatim("metadata.namespace", namespace)?
        ),
    };
    Ok(Console {
        enabled,
        base_url: Some(base_url),
    })
}
