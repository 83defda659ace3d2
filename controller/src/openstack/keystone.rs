//! The Keystone v3 password token (`novacompute.md` §7.2), how long it lives, and the Placement
//! endpoint read off its catalog (§7.4).

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde::Deserialize;
use serde_json::{Value, json};

use super::Credentials;

/// `<keystone>/auth/tokens`: trailing slashes trimmed, `/v3` appended unless already there.
pub fn tokens_url(keystone: &str) -> String {
    let base = keystone.trim_end_matches('/');
    if base.ends_with("/v3") {
        format!("{base}/auth/tokens")
    } else {
        format!("{base}/v3/auth/tokens")
    }
}

/// The password-method, project-scoped request body (carries the password: sent, never logged).
pub fn token_request(credentials: &Credentials) -> Value {
    json!({ "auth": {
        "identity": {
            "methods": ["password"],
            "password": { "user": {
                "name": credentials.username,
                "domain": { "name": credentials.user_domain_name },
                "password": credentials.password.expose(),
            } }
        },
        "scope": { "project": {
            "name": credentials.project_name,
            "domain": { "name": credentials.project_domain_name },
        } }
    } })
}

#[derive(Debug, Default, Deserialize)]
struct TokenBody {
    #[serde(default)]
    token: Token,
}

#[derive(Debug, Default, Deserialize)]
struct Token {
    #[serde(default)]
    catalog: Vec<CatalogEntry>,
    #[serde(default)]
    issued_at: Option<String>,
    #[serde(default)]
    expires_at: Option<String>,
}

#[derive(Debug, Deserialize)]
struct CatalogEntry {
    #[serde(default, rename = "type")]
    type_: String,
    #[serde(default)]
    endpoints: Vec<CatalogEndpoint>,
}

#[derive(Debug, Deserialize)]
struct CatalogEndpoint {
    #[serde(default)]
    interface: String,
    #[serde(default)]
    url: String,
    #[serde(default)]
    region_id: Option<String>,
}

/// How long a token response's token lives: `expires_at` less `issued_at`, both Keystone's
/// clock, so a skew between Keystone's clock and ours does not shorten or stretch it. None when
/// either is missing or unreadable.
pub fn lifetime(body: &[u8]) -> Option<Duration> {
    let token = serde_json::from_slice::<TokenBody>(body).ok()?.token;
    let at = |t: Option<String>| t?.parse::<Timestamp>().ok();
    let (issued, expires) = (at(token.issued_at)?, at(token.expires_at)?);
    Duration::try_from(expires.duration_since(issued)).ok()
}

/// The internal Placement endpoint of a token response's catalog: the first `placement`
/// entry's `internal` endpoint (in `region` when one is given). A body that is not a token
/// document has no catalog.
pub fn placement_from_catalog(body: &[u8], region: Option<&str>) -> Option<String> {
    let token: TokenBody = serde_json::from_slice(body).unwrap_or_default();
    token
        .token
        .catalog
        .iter()
        .filter(|entry| entry.type_ == "placement")
        .flat_map(|entry| &entry.endpoints)
        .find(|endpoint| {
            endpoint.interface == "internal"
                && region.is_none_or(|r| endpoint.region_id.as_deref() == Some(r))
        })
        .map(|endpoint| endpoint.url.trim_end_matches('/').to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sensitive::Sensitive;

    #[test]
    fn the_tokens_url_appends_v3_once() {
        for (keystone, want) in [
            (
                "http://keystone:5000",
                "http://keystone:5000/v3/auth/tokens",
            ),
            (
                "http://keystone:5000/",
                "http://keystone:5000/v3/auth/tokens",
            ),
            (
                "http://keystone:5000/v3",
                "http://keystone:5000/v3/auth/tokens",
            ),
            (
                "http://keystone:5000/v3//",
                "http://keystone:5000/v3/auth/tokens",
            ),
            ("https://k/identity", "https://k/identity/v3/auth/tokens"),
        ] {
            assert_eq!(tokens_url(keystone), want, "{keystone}");
        }
    }

    #[test]
    fn the_request_names_user_and_project_by_domain_name() {
        let body = token_request(&Credentials {
            username: "nova".into(),
            password: Sensitive::new("pw"),
            project_name: "service".into(),
            user_domain_name: "Default".into(),
            project_domain_name: "Other".into(),
        });
        assert_eq!(body["auth"]["identity"]["methods"], json!(["password"]));
        assert_eq!(
            body["auth"]["identity"]["password"]["user"],
            json!({ "name": "nova", "domain": { "name": "Default" }, "password": "pw" })
        );
        assert_eq!(
            body["auth"]["scope"]["project"],
            json!({ "name": "service", "domain": { "name": "Other" } })
        );
    }

    #[test]
    fn the_lifetime_is_keystones_own_difference_of_its_two_stamps() {
        let body = |issued: &str, expires: &str| {
            json!({"token": {"issued_at": issued, "expires_at": expires}}).to_string()
        };
        let hour = body("2026-12-06T10:00:00.000000Z", "2026-12-06T11:00:00.000000Z");
        assert_eq!(lifetime(hour.as_bytes()), Some(Duration::from_secs(3600)));
        let backwards = body("2026-12-06T11:00:00Z", "2026-12-06T10:00:00Z");
        assert_eq!(lifetime(backwards.as_bytes()), None);
        assert_eq!(lifetime(body("yesterday", "today").as_bytes()), None);
        assert_eq!(lifetime(br#"{"token": {}}"#), None);
        assert_eq!(lifetime(b"not json"), None);
    }

    #[test]
    fn placement_is_the_internal_endpoint_of_the_region() {
        let body = json!({ "token": { "catalog": [
            { "type": "identity", "endpoints": [{ "interface": "internal", "url": "http://k", "region_id": "RegionOne" }] },
            { "type": "placement", "endpoints": [
                { "interface": "public", "url": "https://public", "region_id": "RegionOne" },
                { "interface": "internal", "url": "http://placement-two:8778/", "region_id": "RegionTwo" },
                { "interface": "internal", "url": "http://placement-one:8778", "region_id": "RegionOne" }
            ] }
        ] } })
        .to_string();
        assert_eq!(
            placement_from_catalog(body.as_bytes(), None).as_deref(),
            Some("http://placement-two:8778")
        );
        assert_eq!(
            placement_from_catalog(body.as_bytes(), Some("RegionOne")).as_deref(),
            Some("http://placement-one:8778")
        );
        assert_eq!(
            placement_from_catalog(body.as_bytes(), Some("RegionThree")),
            None
        );
        assert_eq!(placement_from_catalog(b"not json", None), None);
    }
}
